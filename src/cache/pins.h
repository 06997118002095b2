// Trust pins: the (key, payload SHA-256) pairs a deployment expects its prebuilt
// kernels to be. With CacheOptions::pins_file (MLAJIT_CACHE_PINS) set, an entry of
// the prebuilt layer runs only if its key is listed with its payload's digest;
// anything else is refused as a miss with a warning, so the pins file is a proof
// of which binaries the process can run.
//
// File format (the manifest `jitcache export --manifest` writes is one): one pin
// per line, "<32 hex key> <64 hex sha256>" optionally followed by a space and
// free text (the bundle manifest puts the entry size and spec there); blank lines
// and lines starting with '#' are ignored. Anything else fails the whole file.
//
//   MLAJIT_ASSIGN_OR_RETURN(PinSet pins, PinSet::Load("/etc/mlajit/pins.txt"));
//   std::string why = pins.Check(entry.key, entry.payload);  // "" when pinned
#ifndef MLAJIT_SRC_CACHE_PINS_H_
#define MLAJIT_SRC_CACHE_PINS_H_

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/cache/kernel_cache.h"

namespace mlajit::cache::cache_internal {

class PinSet {
 public:
  // kNotFound / kPermissionDenied when unreadable; kInvalidArgument naming the
  // file and line for a malformed line or a key pinned to two digests.
  static absl::StatusOr<PinSet> Load(const std::string& path);
  static absl::StatusOr<PinSet> Parse(absl::string_view text, absl::string_view origin);

  // Empty when `key` is pinned to SHA-256(payload); otherwise why it is not.
  std::string Check(const CacheKey& key, absl::string_view payload) const;
  size_t size() const { return pins_.size(); }
  const std::string& origin() const { return origin_; }

 private:
  std::string origin_;
  absl::flat_hash_map<CacheKey, std::string> pins_;  // key -> sha256 hex
};

}  // namespace mlajit::cache::cache_internal

#endif  // MLAJIT_SRC_CACHE_PINS_H_
