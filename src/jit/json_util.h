// Minimal JSON helpers for the jit stage and the C ABI: quoting strings, and a
// strict parser for the flat objects the library reads (KernelSpec lines of a
// manifest). Nested values are rejected on purpose: nothing we read has them.
//
//   std::string s = absl::StrCat("{\"arch\":", JsonQuote(arch), "}");
//   MLAJIT_ASSIGN_OR_RETURN(FlatJsonObject o, ParseFlatJsonObject(line));
//   MLAJIT_ASSIGN_OR_RETURN(int heads, o.GetInt("num_heads"));
#ifndef MLAJIT_SRC_JIT_JSON_UTIL_H_
#define MLAJIT_SRC_JIT_JSON_UTIL_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mlajit::jit::jit_internal {

// A JSON string literal (with quotes); control characters and non-ASCII bytes
// below 0x20 are \u-escaped, other bytes pass through (UTF-8 stays UTF-8).
std::string JsonQuote(absl::string_view s);

struct FlatJsonValue {
  enum class Kind { kString, kInt, kBool, kNull } kind = Kind::kNull;
  std::string text;  // decoded string, or the integer's digits
  int64_t int_value = 0;
  bool bool_value = false;
};

struct FlatJsonObject {
  std::vector<std::pair<std::string, FlatJsonValue>> fields;  // in document order

  // Each fails with kInvalidArgument naming the field when it is missing or of
  // another type.
  absl::StatusOr<std::string> GetString(absl::string_view name) const;
  absl::StatusOr<int> GetInt(absl::string_view name) const;
  absl::StatusOr<bool> GetBool(absl::string_view name) const;
  const FlatJsonValue* Find(absl::string_view name) const;
};

// One object of string / integer / true / false / null members; duplicate names,
// nesting, fractions and trailing text are errors naming the byte offset.
absl::StatusOr<FlatJsonObject> ParseFlatJsonObject(absl::string_view json);

}  // namespace mlajit::jit::jit_internal

#endif  // MLAJIT_SRC_JIT_JSON_UTIL_H_
