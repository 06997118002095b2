// One directory of cache entries: the writable disk tier or the read-only
// prebuilt layer. It knows the layout and validates what it reads; policy
// (which tier first, locking around compiles, eviction order) is KernelCache's.
//
// Layout under the root, one namespace per format version, sharded by the first
// two hex digits of the key:
//   <root>/v1/ab/<key hex>.bin    the entry (entry_format.h)
//   <root>/v1/ab/<key hex>.lock   per-key compile lock; never deleted
//   <root>/v1/ab/<key hex>.use    last use = its mtime, set explicitly
//   <root>/v1/ab/<key hex>.cu     rendered source (save_source only)
//
//   DiskTier disk({.root = dir});
//   absl::StatusOr<CacheEntry> e = disk.Load(key, ParseMode::kFull);
//   if (absl::IsNotFound(e.status())) { ... compile ...; disk.Publish(entry); }
#ifndef MLAJIT_SRC_CACHE_DISK_TIER_H_
#define MLAJIT_SRC_CACHE_DISK_TIER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/cache/entry_format.h"
#include "src/cache/file_lock.h"
#include "src/cache/fs_util.h"
#include "src/cache/kernel_cache.h"

namespace mlajit::cache::cache_internal {

struct DiskTierOptions {
  std::string root;
  // Entries must be owned by this process's user (the writable tier). Files
  // writable by others are refused unless `trusted`.
  bool require_owner = true;
  bool trusted = false;
  FaultHook fault;
};

// A file found by Scan: an entry, possibly invalid.
struct ScanItem {
  CacheKey key;
  bool name_ok = true;     // the file name is "<32 hex>.bin"
  std::string path;
  uint64_t bytes = 0;      // .bin plus .cu
  int64_t last_use_unix_s = 0;
};

class DiskTier {
 public:
  explicit DiskTier(DiskTierOptions options);

  const std::string& root() const { return options_.root; }
  std::string NamespaceDir() const;
  std::string ShardDir(const CacheKey& key) const;
  std::string EntryPath(const CacheKey& key) const;
  std::string LockPath(const CacheKey& key) const;
  std::string UsePath(const CacheKey& key) const;
  std::string SourcePath(const CacheKey& key) const;

  // kNotFound when no file exists; kDataLoss with the reason when the file is
  // corrupt, truncated, of another format version, holds another key, or fails
  // the ownership rules. The entry's path is set; source is left to the caller.
  absl::StatusOr<CacheEntry> Load(const CacheKey& key, ParseMode mode) const;

  // Writes the entry atomically (creating the shard directory, 0700).
  absl::Status Publish(const CacheKey& key, const EntryMetadata& metadata,
                       const std::vector<KeyField>& fields, absl::string_view payload) const;
  absl::Status SaveSource(const CacheKey& key, absl::string_view source) const;
  absl::Status TouchUse(const CacheKey& key, int64_t unix_s) const;
  absl::StatusOr<FileLock> LockKey(const CacheKey& key, double timeout_s) const;

  // Every *.bin under the namespace (stat only, nothing parsed), sorted by path.
  absl::StatusOr<std::vector<ScanItem>> Scan() const;
  // Reads and validates one scanned file.
  EntryInfo Inspect(const ScanItem& item, ParseMode mode) const;

  // Removes the entry, its use record and saved source; the lock file stays.
  absl::Status RemoveEntry(const ScanItem& item) const;
  // Removes v<N> directories for N != kCacheFormatVersion; returns the number
  // of entry files they held.
  absl::StatusOr<uint64_t> RemoveOtherNamespaces() const;
  // Removes temp files whose key lock is free (their writer is gone).
  absl::StatusOr<uint64_t> RemoveOrphanTemps() const;

 private:
  absl::Status CheckOwnership(const struct stat& st, const std::string& path) const;

  DiskTierOptions options_;
};

}  // namespace mlajit::cache::cache_internal

#endif  // MLAJIT_SRC_CACHE_DISK_TIER_H_
