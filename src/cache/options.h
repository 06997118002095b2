// Resolution of CacheOptions from the environment, with the lookup injectable so
// that tests need not modify the real process environment.
//
//   CacheOptions o = cache_internal::OptionsFromLookup(
//       [](const char* name) -> const char* { return name == "HOME"s ? "/h" : nullptr; });
//   // o.cache_dir == "/h/.cache/mlajit"
#ifndef MLAJIT_SRC_CACHE_OPTIONS_H_
#define MLAJIT_SRC_CACHE_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <optional>

#include "absl/strings/string_view.h"
#include "src/cache/kernel_cache.h"

namespace mlajit::cache::cache_internal {

// Returns the variable's value or nullptr when unset.
using EnvLookup = std::function<const char*(const char* name)>;

CacheOptions OptionsFromLookup(const EnvLookup& getenv);

// "1", "true", "yes", "on" (any case) are true; "0", "false", "no", "off", "" false.
std::optional<bool> ParseBool(absl::string_view s);
// Bytes, optionally with a K/M/G/T suffix (powers of 1024, optional "iB"/"B").
std::optional<uint64_t> ParseByteSize(absl::string_view s);

}  // namespace mlajit::cache::cache_internal

#endif  // MLAJIT_SRC_CACHE_OPTIONS_H_
