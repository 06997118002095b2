#include "src/jit/json_util.h"

#include <cstdio>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace mlajit::jit::jit_internal {
namespace {

class Parser {
 public:
  explicit Parser(absl::string_view text) : text_(text) {}

  absl::StatusOr<FlatJsonObject> ParseObject() {
    FlatJsonObject obj;
    SkipSpace();
    if (!Consume('{')) return Error("expected '{'");
    SkipSpace();
    if (Consume('}')) return Finish(std::move(obj));
    while (true) {
      SkipSpace();
      if (Peek() != '"') return Error("expected a field name in quotes");
      std::string name;
      if (absl::Status s = ParseString(&name); !s.ok()) return s;
      if (obj.Find(name) != nullptr) {
        return Error(absl::StrCat("duplicate field \"", absl::CEscape(name), "\""));
      }
      SkipSpace();
      if (!Consume(':')) return Error(absl::StrCat("expected ':' after \"", name, "\""));
      SkipSpace();
      FlatJsonValue value;
      if (absl::Status s = ParseValue(name, &value); !s.ok()) return s;
      obj.fields.emplace_back(std::move(name), std::move(value));
      SkipSpace();
      if (Consume(',')) continue;
      if (Consume('}')) return Finish(std::move(obj));
      return Error("expected ',' or '}'");
    }
  }

 private:
  absl::StatusOr<FlatJsonObject> Finish(FlatJsonObject obj) {
    SkipSpace();
    if (pos_ != text_.size()) return Error("trailing text after the object");
    return obj;
  }

  absl::Status ParseValue(const std::string& name, FlatJsonValue* v) {
    char c = Peek();
    if (c == '"') {
      v->kind = FlatJsonValue::Kind::kString;
      return ParseString(&v->text);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return ParseInt(name, v);
    if (ConsumeWord("true")) {
      v->kind = FlatJsonValue::Kind::kBool;
      v->bool_value = true;
      return absl::OkStatus();
    }
    if (ConsumeWord("false")) {
      v->kind = FlatJsonValue::Kind::kBool;
      return absl::OkStatus();
    }
    if (ConsumeWord("null")) return absl::OkStatus();
    if (c == '{' || c == '[') {
      return Error(absl::StrCat("field \"", name, "\": nested values are not allowed"));
    }
    return Error(absl::StrCat("field \"", name, "\": expected a string, integer or boolean"));
  }

  absl::Status ParseInt(const std::string& name, FlatJsonValue* v) {
    size_t start = pos_;
    Consume('-');
    if (pos_ >= text_.size() || text_[pos_] < '0' || text_[pos_] > '9') {
      return Error(absl::StrCat("field \"", name, "\": malformed number"));
    }
    // JSON forbids leading zeros ("007"); reject rather than guess.
    if (text_[pos_] == '0' && pos_ + 1 < text_.size() && text_[pos_ + 1] >= '0' &&
        text_[pos_ + 1] <= '9') {
      return Error(absl::StrCat("field \"", name, "\": leading zeros are not allowed"));
    }
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
    if (pos_ < text_.size() && (text_[pos_] == '.' || text_[pos_] == 'e' || text_[pos_] == 'E')) {
      return Error(absl::StrCat("field \"", name, "\": expected an integer"));
    }
    v->kind = FlatJsonValue::Kind::kInt;
    v->text = std::string(text_.substr(start, pos_ - start));
    if (!absl::SimpleAtoi(v->text, &v->int_value)) {
      return Error(absl::StrCat("field \"", name, "\": integer ", v->text, " out of range"));
    }
    return absl::OkStatus();
  }

  absl::Status ParseString(std::string* out) {
    Consume('"');
    while (pos_ < text_.size()) {
      char c = text_[pos_++];
      if (c == '"') return absl::OkStatus();
      if (static_cast<unsigned char>(c) < 0x20) return Error("control character in a string");
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= text_.size()) break;
      char e = text_[pos_++];
      switch (e) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          if (pos_ + 4 > text_.size()) return Error("truncated \\u escape");
          unsigned cp = 0;
          for (int i = 0; i < 4; ++i) {
            char h = text_[pos_++];
            cp <<= 4;
            if (h >= '0' && h <= '9') cp |= h - '0';
            else if (h >= 'a' && h <= 'f') cp |= h - 'a' + 10;
            else if (h >= 'A' && h <= 'F') cp |= h - 'A' + 10;
            else return Error("bad hex digit in \\u escape");
          }
          // Only the BMP without surrogates: our strings are names and paths.
          if (cp >= 0xD800 && cp <= 0xDFFF) return Error("surrogate \\u escapes are not supported");
          if (cp < 0x80) {
            out->push_back(static_cast<char>(cp));
          } else if (cp < 0x800) {
            out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
            out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
          } else {
            out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
            out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
            out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
          }
          break;
        }
        default:
          return Error(absl::StrCat("bad escape \\", std::string(1, e)));
      }
    }
    return Error("unterminated string");
  }

  void SkipSpace() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool Consume(char c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  bool ConsumeWord(absl::string_view w) {
    if (text_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("JSON at offset ", pos_, ": ", what));
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

absl::Status FieldError(absl::string_view name, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("field \"", name, "\": ", what));
}

std::string Shown(const FlatJsonValue& v) {
  switch (v.kind) {
    case FlatJsonValue::Kind::kString: return JsonQuote(v.text);
    case FlatJsonValue::Kind::kInt: return v.text;
    case FlatJsonValue::Kind::kBool: return v.bool_value ? "true" : "false";
    case FlatJsonValue::Kind::kNull: return "null";
  }
  return "?";
}

}  // namespace

std::string JsonQuote(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned char>(c));
          out += buf;
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
  return out;
}

const FlatJsonValue* FlatJsonObject::Find(absl::string_view name) const {
  for (const auto& [k, v] : fields) {
    if (k == name) return &v;
  }
  return nullptr;
}

absl::StatusOr<std::string> FlatJsonObject::GetString(absl::string_view name) const {
  const FlatJsonValue* v = Find(name);
  if (v == nullptr) return FieldError(name, "missing");
  if (v->kind != FlatJsonValue::Kind::kString) {
    return FieldError(name, absl::StrCat("expected a string, got ", Shown(*v)));
  }
  return v->text;
}

absl::StatusOr<int> FlatJsonObject::GetInt(absl::string_view name) const {
  const FlatJsonValue* v = Find(name);
  if (v == nullptr) return FieldError(name, "missing");
  if (v->kind != FlatJsonValue::Kind::kInt) {
    return FieldError(name, absl::StrCat("expected an integer, got ", Shown(*v)));
  }
  if (v->int_value < std::numeric_limits<int>::min() ||
      v->int_value > std::numeric_limits<int>::max()) {
    return FieldError(name, absl::StrCat(v->text, " does not fit in an int"));
  }
  return static_cast<int>(v->int_value);
}

absl::StatusOr<bool> FlatJsonObject::GetBool(absl::string_view name) const {
  const FlatJsonValue* v = Find(name);
  if (v == nullptr) return FieldError(name, "missing");
  if (v->kind != FlatJsonValue::Kind::kBool) {
    return FieldError(name, absl::StrCat("expected true or false, got ", Shown(*v)));
  }
  return v->bool_value;
}

absl::StatusOr<FlatJsonObject> ParseFlatJsonObject(absl::string_view json) {
  return Parser(json).ParseObject();
}

}  // namespace mlajit::jit::jit_internal
