// Fuzzes the KernelSpec JSON parser (src/jit/kernel_spec.h SpecFromJson) and the
// flat JSON reader under it: spec JSON arrives from manifests, from the C ABI's
// spec strings and from cache metadata written by other processes.
//
// Oracle: no crash; every error is kInvalidArgument; a spec that parses prints
// (SpecToJson) to JSON that parses back to the same spec; validation, bindings
// and the readable name never crash on a parsed spec; any string quoted by
// JsonQuote reads back unchanged.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "fuzz/fuzz_check.h"
#include "src/jit/json_util.h"
#include "src/jit/kernel_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace ji = mlajit::jit::jit_internal;
  const absl::string_view text(reinterpret_cast<const char*>(data), size);

  absl::StatusOr<ji::FlatJsonObject> obj = ji::ParseFlatJsonObject(text);
  FUZZ_CHECK(obj.ok() || obj.status().code() == absl::StatusCode::kInvalidArgument);
  if (obj.ok()) {
    for (const auto& [name, value] : obj->fields) {
      // Names were unique, so Find gives back this very member.
      FUZZ_CHECK(obj->Find(name) == &value);
    }
  }

  absl::StatusOr<mlajit::jit::KernelSpec> spec = mlajit::jit::SpecFromJson(text);
  if (!spec.ok()) {
    FUZZ_CHECK(spec.status().code() == absl::StatusCode::kInvalidArgument);
  } else {
    const std::string json = mlajit::jit::SpecToJson(*spec);
    absl::StatusOr<mlajit::jit::KernelSpec> again = mlajit::jit::SpecFromJson(json);
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(*again == *spec);
    if (mlajit::jit::ValidateSpec(*spec).ok()) {
      (void)mlajit::jit::SpecBindings(*spec);
      (void)mlajit::jit::SpecName(*spec);
    }
  }

  // The input as a string value: quoting then reading is the identity.
  absl::StatusOr<ji::FlatJsonObject> quoted =
      ji::ParseFlatJsonObject(absl::StrCat("{\"s\":", ji::JsonQuote(text), "}"));
  FUZZ_CHECK(quoted.ok());
  absl::StatusOr<std::string> s = quoted->GetString("s");
  FUZZ_CHECK(s.ok() && *s == text);
  return 0;
}
