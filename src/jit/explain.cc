#include "src/jit/explain.h"

#include "src/jit/json_util.h"

namespace mlajit::jit {
namespace {

const cache::KeyField* FindField(const std::vector<cache::KeyField>& fields,
                                 const std::string& name) {
  for (const cache::KeyField& f : fields) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::string ValueText(const jit_internal::FlatJsonValue& v) {
  switch (v.kind) {
    case jit_internal::FlatJsonValue::Kind::kString: return jit_internal::JsonQuote(v.text);
    case jit_internal::FlatJsonValue::Kind::kInt: return v.text;
    case jit_internal::FlatJsonValue::Kind::kBool: return v.bool_value ? "true" : "false";
    case jit_internal::FlatJsonValue::Kind::kNull: return "null";
  }
  return "";
}

}  // namespace

KeyExplanation ExplainEntries(const cache::CacheEntry& a, const cache::CacheEntry& b) {
  KeyExplanation x;
  for (const cache::KeyField& fa : a.fields) {
    const cache::KeyField* fb = FindField(b.fields, fa.name);
    if (fb != nullptr && fb->value_hash == fa.value_hash) {
      ++x.same_fields;
      continue;
    }
    FieldDifference d;
    d.name = fa.name;
    d.a_preview = fa.value_preview;
    d.a_hash = fa.value_hash;
    if (fb == nullptr) {
      d.in_b = false;
    } else {
      d.b_preview = fb->value_preview;
      d.b_hash = fb->value_hash;
    }
    x.fields.push_back(std::move(d));
  }
  for (const cache::KeyField& fb : b.fields) {
    if (FindField(a.fields, fb.name) != nullptr) continue;
    FieldDifference d;
    d.name = fb.name;
    d.in_a = false;
    d.b_preview = fb.value_preview;
    d.b_hash = fb.value_hash;
    x.fields.push_back(std::move(d));
  }

  auto sa = jit_internal::ParseFlatJsonObject(a.metadata.spec);
  auto sb = jit_internal::ParseFlatJsonObject(b.metadata.spec);
  if (sa.ok() && sb.ok()) {
    for (const auto& [name, va] : sa->fields) {
      const jit_internal::FlatJsonValue* vb = sb->Find(name);
      std::string ta = ValueText(va), tb = vb != nullptr ? ValueText(*vb) : "";
      if (ta != tb) x.spec.push_back({name, ta, tb});
    }
    for (const auto& [name, vb] : sb->fields) {
      if (sa->Find(name) == nullptr) x.spec.push_back({name, "", ValueText(vb)});
    }
  }
  return x;
}

}  // namespace mlajit::jit
