// SHA-256 (FIPS 180-4), used where a checksum must resist deliberate collisions:
// the payload digests of bundles and of pinned prebuilt entries. The entries'
// own XXH3 checksums only catch accidents (torn writes, bit rot).
//
//   std::string hex = Sha256Hex(payload);  // 64 lowercase hex digits
#ifndef MLAJIT_SRC_CACHE_SHA256_H_
#define MLAJIT_SRC_CACHE_SHA256_H_

#include <string>

#include "absl/strings/string_view.h"

namespace mlajit::cache::cache_internal {

std::string Sha256Hex(absl::string_view data);

}  // namespace mlajit::cache::cache_internal

#endif  // MLAJIT_SRC_CACHE_SHA256_H_
