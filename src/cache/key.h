// Cache key derivation helpers shared by the key builder and the entry format.
// CacheKey and KeyBuilder themselves are declared in kernel_cache.h; this header
// holds the private pieces other cache files need.
//
//   std::string h = cache_internal::Hash64Hex(payload);   // "0123456789abcdef"
//   KeyField f = cache_internal::MakeKeyField("arch", "sm_90a");
#ifndef MLAJIT_SRC_CACHE_KEY_H_
#define MLAJIT_SRC_CACHE_KEY_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "src/cache/kernel_cache.h"

namespace mlajit::cache::cache_internal {

// Values up to this many bytes are stored verbatim in KeyField::value_preview.
inline constexpr size_t kMaxPreviewBytes = 96;

uint64_t Hash64(absl::string_view data);         // XXH3-64, seed 0
std::string Hash64Hex(absl::string_view data);   // 16 lowercase hex digits
std::string U64Hex(uint64_t v);                  // 16 lowercase hex digits
KeyField MakeKeyField(absl::string_view name, absl::string_view value);

}  // namespace mlajit::cache::cache_internal

#endif  // MLAJIT_SRC_CACHE_KEY_H_
