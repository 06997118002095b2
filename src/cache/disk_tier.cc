#include "src/cache/disk_tier.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace mlajit::cache::cache_internal {
namespace {

constexpr absl::string_view kEntrySuffix = ".bin";

bool IsHex2(absl::string_view s) {
  return s.size() == 2 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

uint64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

}  // namespace

DiskTier::DiskTier(DiskTierOptions options) : options_(std::move(options)) {}

std::string DiskTier::NamespaceDir() const {
  return JoinPath(options_.root, absl::StrCat("v", kCacheFormatVersion));
}
std::string DiskTier::ShardDir(const CacheKey& key) const {
  return JoinPath(NamespaceDir(), key.Hex().substr(0, 2));
}
std::string DiskTier::EntryPath(const CacheKey& key) const {
  return JoinPath(ShardDir(key), key.Hex() + ".bin");
}
std::string DiskTier::LockPath(const CacheKey& key) const {
  return JoinPath(ShardDir(key), key.Hex() + ".lock");
}
std::string DiskTier::UsePath(const CacheKey& key) const {
  return JoinPath(ShardDir(key), key.Hex() + ".use");
}
std::string DiskTier::SourcePath(const CacheKey& key) const {
  return JoinPath(ShardDir(key), key.Hex() + ".cu");
}

absl::Status DiskTier::CheckOwnership(const struct stat& st, const std::string& path) const {
  if (options_.trusted) return absl::OkStatus();
  if (options_.require_owner && st.st_uid != geteuid()) {
    return absl::DataLossError(absl::StrCat(path, ": owned by uid ", st.st_uid,
                                            ", expected this user (uid ", geteuid(),
                                            "); not trusted"));
  }
  if (st.st_mode & S_IWOTH) {
    return absl::DataLossError(absl::StrFormat("%s: writable by others (mode %04o); not trusted",
                                               path, st.st_mode & 07777));
  }
  return absl::OkStatus();
}

absl::StatusOr<CacheEntry> DiskTier::Load(const CacheKey& key, ParseMode mode) const {
  const std::string path = EntryPath(key);
  absl::StatusOr<FileData> data = ReadFileBounded(path, kMaxEntryFileBytes);
  if (!data.ok()) {
    if (absl::IsNotFound(data.status())) return data.status();
    // Unreadable (a symlink, a directory, EACCES...) counts as invalid: the
    // caller recompiles and replaces it.
    return absl::DataLossError(data.status().message());
  }
  absl::Status own = CheckOwnership(data->st, path);
  if (!own.ok()) return own;
  absl::StatusOr<CacheEntry> e = ParseEntry(std::move(data->bytes), &key, mode);
  if (!e.ok()) return absl::DataLossError(absl::StrCat(path, ": ", e.status().message()));
  e->path = path;
  return e;
}

absl::Status DiskTier::Publish(const CacheKey& key, const EntryMetadata& metadata,
                               const std::vector<KeyField>& fields,
                               absl::string_view payload) const {
  const std::string dir = ShardDir(key);
  absl::Status s = MakeDirs(dir, 0700, options_.fault);
  if (!s.ok()) return s;
  return WriteFileAtomic(dir, key.Hex() + ".bin", SerializeEntry(key, metadata, fields, payload),
                         options_.fault);
}

absl::Status DiskTier::SaveSource(const CacheKey& key, absl::string_view source) const {
  const std::string dir = ShardDir(key);
  absl::Status s = MakeDirs(dir, 0700, options_.fault);
  if (!s.ok()) return s;
  return WriteFileAtomic(dir, key.Hex() + ".cu", source, options_.fault);
}

absl::Status DiskTier::TouchUse(const CacheKey& key, int64_t unix_s) const {
  return TouchAt(UsePath(key), unix_s);
}

absl::StatusOr<FileLock> DiskTier::LockKey(const CacheKey& key, double timeout_s) const {
  absl::Status s = MakeDirs(ShardDir(key), 0700, options_.fault);
  if (!s.ok()) return s;
  return FileLock::Acquire(LockPath(key), timeout_s);
}

absl::StatusOr<std::vector<ScanItem>> DiskTier::Scan() const {
  std::vector<ScanItem> items;
  const std::string ns = NamespaceDir();
  absl::StatusOr<std::vector<std::string>> shards = ListDir(ns);
  if (!shards.ok()) {
    if (absl::IsNotFound(shards.status())) return items;
    return shards.status();
  }
  for (const std::string& shard : *shards) {
    if (!IsHex2(shard)) continue;
    const std::string dir = JoinPath(ns, shard);
    absl::StatusOr<std::vector<std::string>> names = ListDir(dir);
    if (!names.ok()) continue;  // not a directory, or vanished: nothing of ours
    for (const std::string& name : *names) {
      if (!absl::EndsWith(name, kEntrySuffix)) continue;
      ScanItem item;
      item.path = JoinPath(dir, name);
      absl::string_view stem = absl::string_view(name).substr(0, name.size() - 4);
      absl::StatusOr<CacheKey> key = CacheKey::FromHex(stem);
      item.name_ok = key.ok() && key->Hex().substr(0, 2) == shard;
      if (key.ok()) item.key = *key;
      struct stat st;
      if (lstat(item.path.c_str(), &st) != 0) continue;  // removed meanwhile
      item.bytes = static_cast<uint64_t>(st.st_size);
      item.last_use_unix_s = st.st_mtime;
      if (item.name_ok) {
        item.bytes += FileSize(SourcePath(item.key));
        struct stat use;
        if (stat(UsePath(item.key).c_str(), &use) == 0) item.last_use_unix_s = use.st_mtime;
      }
      items.push_back(std::move(item));
    }
  }
  std::sort(items.begin(), items.end(),
            [](const ScanItem& a, const ScanItem& b) { return a.path < b.path; });
  return items;
}

EntryInfo DiskTier::Inspect(const ScanItem& item, ParseMode mode) const {
  EntryInfo info;
  info.key = item.key;
  info.path = item.path;
  info.file_bytes = item.bytes;
  info.last_use_unix_s = item.last_use_unix_s;
  if (!item.name_ok) {
    info.valid = false;
    info.problem = absl::StrCat(item.path, ": file name is not <key hex>.bin in its shard");
    return info;
  }
  absl::StatusOr<CacheEntry> e = Load(item.key, mode);
  if (!e.ok()) {
    info.valid = false;
    info.problem = std::string(e.status().message());
    return info;
  }
  info.metadata = std::move(e->metadata);
  return info;
}

absl::Status DiskTier::RemoveEntry(const ScanItem& item) const {
  absl::Status s = RemoveFile(item.path);
  if (!item.name_ok) return s;
  absl::Status u = RemoveFile(UsePath(item.key));
  absl::Status c = RemoveFile(SourcePath(item.key));
  if (!s.ok()) return s;
  return u.ok() ? c : u;
}

absl::StatusOr<uint64_t> DiskTier::RemoveOtherNamespaces() const {
  absl::StatusOr<std::vector<std::string>> names = ListDir(options_.root);
  if (!names.ok()) {
    if (absl::IsNotFound(names.status())) return 0;
    return names.status();
  }
  uint64_t removed = 0;
  const std::string current = absl::StrCat("v", kCacheFormatVersion);
  for (const std::string& name : *names) {
    uint32_t version;
    if (name.size() < 2 || name[0] != 'v' || name == current ||
        !absl::SimpleAtoi(absl::string_view(name).substr(1), &version)) {
      continue;
    }
    absl::Status s = RemoveTree(JoinPath(options_.root, name), &removed);
    if (!s.ok()) return s;
  }
  return removed;
}

absl::StatusOr<uint64_t> DiskTier::RemoveOrphanTemps() const {
  uint64_t removed = 0;
  const std::string ns = NamespaceDir();
  absl::StatusOr<std::vector<std::string>> shards = ListDir(ns);
  if (!shards.ok()) {
    if (absl::IsNotFound(shards.status())) return 0;
    return shards.status();
  }
  for (const std::string& shard : *shards) {
    if (!IsHex2(shard)) continue;
    const std::string dir = JoinPath(ns, shard);
    absl::StatusOr<std::vector<std::string>> names = ListDir(dir);
    if (!names.ok()) continue;
    for (const std::string& name : *names) {
      std::string target = TempFileTarget(name);
      if (target.size() < 4) continue;
      // "<hex>.bin" or "<hex>.cu": both are written under the key's lock, so a
      // free lock means the writer is gone (a crash, SIGKILL) and the file is junk.
      absl::StatusOr<CacheKey> key = CacheKey::FromHex(target.substr(0, target.find('.')));
      if (!key.ok()) continue;
      absl::StatusOr<std::optional<FileLock>> lock = FileLock::TryAcquire(LockPath(*key));
      if (!lock.ok() || !lock->has_value()) continue;
      if (RemoveFile(JoinPath(dir, name)).ok()) ++removed;
    }
  }
  return removed;
}

}  // namespace mlajit::cache::cache_internal
