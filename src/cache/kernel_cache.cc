// KernelCache: the tiers (memory, prebuilt, disk), single-flight per key, the
// per-key compile lock, publication, eviction and maintenance. File formats and
// directory layout live in entry_format / disk_tier.
#include "src/cache/kernel_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <ctime>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "src/base/log.h"
#include "src/cache/disk_tier.h"
#include "src/cache/entry_format.h"
#include "src/cache/file_lock.h"
#include "src/cache/fs_util.h"
#include "src/cache/pins.h"
#include "src/cache/stats_log.h"

namespace mlajit::cache {
namespace {

using cache_internal::Counters;
using cache_internal::DiskTier;
using cache_internal::DiskTierOptions;
using cache_internal::FileLock;
using cache_internal::ParseMode;
using cache_internal::ScanItem;
using cache_internal::StatsLog;

using EntryPtr = std::shared_ptr<const CacheEntry>;

// Last-use times this far ahead of the clock are taken as written by a skewed
// clock (see ScanDisk); smaller leads are ordinary drift between processes.
constexpr int64_t kClockSkewToleranceS = 24 * 3600;

// Why a directory may not hold the cache; empty when it may. A cache dir that
// others can write lets them plant a kernel that this process would then run.
std::string DirProblem(const std::string& dir, const struct stat& st, bool check_owner,
                       mode_t forbidden_bits) {
  if (!S_ISDIR(st.st_mode)) return absl::StrCat(dir, " is not a directory");
  if (check_owner && st.st_uid != geteuid()) {
    return absl::StrCat(dir, " is owned by uid ", st.st_uid, ", not by this user (uid ",
                        geteuid(), ")");
  }
  if (st.st_mode & forbidden_bits) {
    return absl::StrFormat("%s has mode %04o: writable by %s", dir, st.st_mode & 07777,
                           forbidden_bits == S_IWOTH ? "others" : "group or others");
  }
  return "";
}

class KernelCacheImpl final : public KernelCache {
 public:
  explicit KernelCacheImpl(const CacheOptions& options) : options_(options) {}
  ~KernelCacheImpl() override { FlushStats(); }

  void Init();
  absl::Status LoadPins();

  absl::StatusOr<EntryPtr> GetOrCompile(const CacheKey& key, const std::vector<KeyField>& fields,
                                        const EntryMetadata& metadata,
                                        const CompileFn& compile) override;
  absl::StatusOr<std::vector<EntryInfo>> List() override;
  absl::StatusOr<EntryPtr> Read(const CacheKey& key) override;
  absl::StatusOr<std::vector<EntryInfo>> Verify() override;
  absl::StatusOr<CacheStats> Stats() override;
  absl::StatusOr<uint64_t> PruneToBytes(uint64_t max_bytes) override;
  absl::StatusOr<uint64_t> PruneOlderThan(int64_t seconds) override;
  absl::StatusOr<uint64_t> PruneStale() override;
  absl::StatusOr<uint64_t> Clear() override;
  absl::Status Install(const CacheEntry& entry) override;
  const CacheOptions& options() const override { return options_; }

 private:
  struct Flight {
    absl::Mutex mu;
    bool done ABSL_GUARDED_BY(mu) = false;
    absl::StatusOr<EntryPtr> result ABSL_GUARDED_BY(mu);
  };
  struct Slot {
    EntryPtr entry;           // source kMemory
    bool on_disk = false;     // has a use record to keep fresh
    int64_t last_touch_s = 0;
  };

  int64_t Now() const {
    return options_.clock ? options_.clock() : static_cast<int64_t>(std::time(nullptr));
  }
  // The slow path of GetOrCompile, run by one thread per key at a time.
  absl::StatusOr<EntryPtr> Resolve(const CacheKey& key, const std::vector<KeyField>& fields,
                                   const EntryMetadata& metadata, const CompileFn& compile,
                                   bool* on_disk);
  absl::StatusOr<EntryPtr> LoadFrom(const DiskTier& tier, const CacheKey& key,
                                    CacheEntry::Source source, bool* warned);
  void DiskUnusable(const absl::Status& why);
  void RecordManifest(const std::string& spec);
  void FlushStats();
  absl::StatusOr<uint64_t> EvictLru(uint64_t max_bytes, const CacheKey* keep);
  absl::StatusOr<std::vector<ScanItem>> ScanDisk();

  const CacheOptions options_;
  std::unique_ptr<DiskTier> disk_;      // null: memory-only
  std::unique_ptr<DiskTier> prebuilt_;  // null: no prebuilt layer
  std::optional<cache_internal::PinSet> pins_;  // set: prebuilt entries must be pinned
  std::unique_ptr<StatsLog> stats_log_;

  absl::Mutex mu_;
  absl::flat_hash_map<CacheKey, Slot> memory_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<CacheKey, std::shared_ptr<Flight>> flights_ ABSL_GUARDED_BY(mu_);

  std::atomic<bool> disk_warned_{false};
  std::atomic<bool> manifest_warned_{false};
  // Counts not yet appended to the stats log.
  std::atomic<uint64_t> hits_{0}, misses_{0}, compiles_{0};
  absl::Mutex stats_mu_;  // one flush at a time
};

void KernelCacheImpl::Init() {
  if (!options_.prebuilt_dir.empty()) {
    struct stat st;
    std::string problem;
    if (stat(options_.prebuilt_dir.c_str(), &st) != 0) {
      problem = absl::StrCat(options_.prebuilt_dir, " cannot be read: ", strerror(errno));
    } else if (!options_.trust_cache_dir) {
      // Prebuilt images are often built by another user (root): only the
      // "writable by others" rule applies.
      problem = DirProblem(options_.prebuilt_dir, st, /*check_owner=*/false, S_IWOTH);
    } else if (!S_ISDIR(st.st_mode)) {
      problem = absl::StrCat(options_.prebuilt_dir, " is not a directory");
    }
    if (problem.empty()) {
      prebuilt_ = std::make_unique<DiskTier>(DiskTierOptions{
          options_.prebuilt_dir, /*require_owner=*/false, options_.trust_cache_dir, nullptr});
    } else {
      MLAJIT_LOG_WARN("prebuilt cache layer (MLAJIT_CACHE_PREBUILT) ignored: ", problem);
    }
  }

  if (options_.memory_only) return;
  if (options_.cache_dir.empty()) {
    MLAJIT_LOG_WARN("no kernel cache directory (MLAJIT_CACHE_DIR, XDG_CACHE_HOME and HOME are "
                    "unset): compiled kernels are kept in memory only");
    return;
  }
  const std::string& dir = options_.cache_dir;
  struct stat st;
  std::string problem;
  if (stat(dir.c_str(), &st) == 0) {
    if (!options_.trust_cache_dir) {
      problem = DirProblem(dir, st, /*check_owner=*/true, S_IWGRP | S_IWOTH);
    } else if (!S_ISDIR(st.st_mode)) {
      problem = absl::StrCat(dir, " is not a directory");
    }
  } else {
    absl::Status s = cache_internal::MakeDirs(dir, 0700, options_.fault_injection);
    if (!s.ok()) problem = std::string(s.message());
  }
  if (!problem.empty()) {
    disk_warned_ = true;
    MLAJIT_LOG_WARN("kernel cache directory refused: ", problem,
                    "; compiled kernels are kept in memory only (fix the directory, choose "
                    "another with MLAJIT_CACHE_DIR, or set trust_cache_dir / "
                    "MLAJIT_CACHE_TRUST_DIR=1 for a shared directory)");
    return;
  }
  disk_ = std::make_unique<DiskTier>(DiskTierOptions{dir, /*require_owner=*/true,
                                                     options_.trust_cache_dir,
                                                     options_.fault_injection});
  stats_log_ = std::make_unique<StatsLog>(disk_->NamespaceDir());
}

void KernelCacheImpl::DiskUnusable(const absl::Status& why) {
  if (disk_warned_.exchange(true)) return;
  MLAJIT_LOG_WARN("kernel cache directory ", options_.cache_dir, " is not writable (",
                  why.message(), "); continuing with compiled kernels in memory only");
}

absl::StatusOr<EntryPtr> KernelCacheImpl::LoadFrom(const DiskTier& tier, const CacheKey& key,
                                                   CacheEntry::Source source, bool* warned) {
  absl::StatusOr<CacheEntry> e = tier.Load(key, ParseMode::kFull);
  if (e.ok()) {
    e->source = source;
    return std::make_shared<const CacheEntry>(*std::move(e));
  }
  if (absl::IsDataLoss(e.status()) && !*warned) {
    *warned = true;
    MLAJIT_LOG_WARN("ignoring invalid kernel cache entry (", e.status().message(), ")",
                    source == CacheEntry::Source::kPrebuilt ? ""
                                                            : "; recompiling and replacing it");
  }
  return e.status();
}

absl::StatusOr<EntryPtr> KernelCacheImpl::GetOrCompile(const CacheKey& key,
                                                       const std::vector<KeyField>& fields,
                                                       const EntryMetadata& metadata,
                                                       const CompileFn& compile) {
  const int64_t now = Now();
  std::shared_ptr<Flight> flight;
  bool leader = false;
  EntryPtr hit;
  bool touch = false;
  {
    absl::MutexLock lock(&mu_);
    if (auto it = memory_.find(key); it != memory_.end()) {
      Slot& slot = it->second;
      // Last-use records are rewritten at most once per interval per key, so a
      // hot key costs one map lookup and no file I/O.
      // A clock that stepped back (now < last touch) also rewrites it, or the
      // record would keep a future time and the key would dodge eviction.
      if (slot.on_disk && (now - slot.last_touch_s >= options_.use_record_interval_s ||
                           now < slot.last_touch_s)) {
        slot.last_touch_s = now;
        touch = true;
      }
      hit = slot.entry;
    } else if (auto f = flights_.find(key); f != flights_.end()) {
      flight = f->second;
    } else {
      flight = std::make_shared<Flight>();
      flights_.emplace(key, flight);
      leader = true;
    }
  }
  if (hit != nullptr) {
    hits_.fetch_add(1, std::memory_order_relaxed);
    if (touch && disk_ != nullptr) disk_->TouchUse(key, now).IgnoreError();
    return hit;
  }
  if (!leader) {
    // Another thread of this process is resolving the key: share its result.
    absl::MutexLock lock(&flight->mu);
    flight->mu.Await(absl::Condition(&flight->done));
    if (flight->result.ok()) hits_.fetch_add(1, std::memory_order_relaxed);
    return flight->result;
  }

  bool on_disk = false;
  absl::StatusOr<EntryPtr> result = Resolve(key, fields, metadata, compile, &on_disk);
  {
    absl::MutexLock lock(&mu_);
    if (result.ok()) {
      auto copy = std::make_shared<CacheEntry>(**result);
      copy->source = CacheEntry::Source::kMemory;
      memory_[key] = Slot{std::move(copy), on_disk, now};
    }
    // Failures are not remembered: the next call tries again.
    flights_.erase(key);
  }
  {
    absl::MutexLock lock(&flight->mu);
    flight->result = result;
    flight->done = true;
  }
  return result;
}

absl::StatusOr<EntryPtr> KernelCacheImpl::Resolve(const CacheKey& key,
                                                  const std::vector<KeyField>& fields,
                                                  const EntryMetadata& metadata,
                                                  const CompileFn& compile, bool* on_disk) {
  if (prebuilt_ != nullptr) {
    bool prebuilt_warned = false;
    absl::StatusOr<EntryPtr> e =
        LoadFrom(*prebuilt_, key, CacheEntry::Source::kPrebuilt, &prebuilt_warned);
    std::string unpinned;
    if (e.ok() && pins_.has_value()) unpinned = pins_->Check(key, (*e)->payload);
    if (e.ok() && unpinned.empty()) {
      hits_.fetch_add(1, std::memory_order_relaxed);
      return e;
    }
    if (!unpinned.empty()) {
      // A binary nobody vouched for never runs; this process goes on as for a miss.
      MLAJIT_LOG_WARN("prebuilt kernel ", (*e)->path, " refused by the pins (", unpinned,
                      "); treating it as a miss");
    }
  }
  bool warned = false;  // one warning per invalid entry, even if seen twice
  if (disk_ != nullptr) {
    absl::StatusOr<EntryPtr> e = LoadFrom(*disk_, key, CacheEntry::Source::kDisk, &warned);
    if (e.ok()) {
      hits_.fetch_add(1, std::memory_order_relaxed);
      *on_disk = true;
      disk_->TouchUse(key, Now()).IgnoreError();
      return e;
    }
  }
  if (options_.disable_jit) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    std::string where = disk_ != nullptr ? options_.cache_dir : "memory only";
    if (prebuilt_ != nullptr) absl::StrAppend(&where, ", prebuilt ", options_.prebuilt_dir);
    return absl::FailedPreconditionError(absl::StrCat(
        "kernel ", key.Hex(), " (template ", metadata.template_name, ", arch ", metadata.arch,
        ", spec ", metadata.spec, ") is not in the kernel cache (", where,
        ") and JIT compilation is disabled (MLAJIT_DISABLE_JIT=1): warm the cache for this "
        "shape (jitcache warm) or unset MLAJIT_DISABLE_JIT"));
  }

  std::optional<FileLock> lock;
  if (disk_ != nullptr) {
    absl::StatusOr<FileLock> l = disk_->LockKey(key, options_.lock_timeout_s);
    if (l.ok()) {
      lock.emplace(*std::move(l));
      // Another process may have published the entry while we waited.
      absl::StatusOr<EntryPtr> e = LoadFrom(*disk_, key, CacheEntry::Source::kDisk, &warned);
      if (e.ok()) {
        hits_.fetch_add(1, std::memory_order_relaxed);
        *on_disk = true;
        disk_->TouchUse(key, Now()).IgnoreError();
        return e;
      }
    } else if (absl::IsUnavailable(l.status())) {
      return l.status();
    } else {
      DiskUnusable(l.status());  // read-only or unusable: compile without publishing
    }
  }

  misses_.fetch_add(1, std::memory_order_relaxed);
  if (!compile) {
    return absl::InvalidArgumentError(
        absl::StrCat("compile function for kernel ", key.Hex(), " is empty"));
  }
  absl::StatusOr<CompileResult> compiled = compile();
  if (!compiled.ok()) return compiled.status();
  compiles_.fetch_add(1, std::memory_order_relaxed);

  auto entry = std::make_shared<CacheEntry>();
  entry->key = key;
  entry->metadata = metadata;
  if (entry->metadata.compile_ms == 0) entry->metadata.compile_ms = compiled->compile_ms;
  if (entry->metadata.library_version.empty()) {
    entry->metadata.library_version = options_.library_version;
  }
  entry->fields = fields;
  entry->payload = std::move(compiled->payload);
  entry->source = CacheEntry::Source::kCompiled;

  bool published = false;
  if (lock.has_value()) {
    absl::Status s = disk_->Publish(key, entry->metadata, entry->fields, entry->payload);
    if (s.ok()) {
      published = true;
      *on_disk = true;
      entry->path = disk_->EntryPath(key);
      disk_->TouchUse(key, Now()).IgnoreError();
      if (options_.save_source && !compiled->source.empty()) {
        absl::Status src = disk_->SaveSource(key, compiled->source);
        if (!src.ok()) DiskUnusable(src);
      }
    } else {
      DiskUnusable(s);
    }
    lock->Release();
  }
  if (published) {
    absl::StatusOr<uint64_t> evicted = EvictLru(options_.max_bytes, &key);
    if (!evicted.ok()) MLAJIT_LOG_WARN("kernel cache eviction: ", evicted.status().message());
  }
  if (!options_.record_manifest.empty()) RecordManifest(entry->metadata.spec);
  FlushStats();
  return EntryPtr(std::move(entry));
}

void KernelCacheImpl::RecordManifest(const std::string& spec) {
  // One write() of one line on an O_APPEND descriptor: lines from concurrent
  // processes never interleave.
  std::string line = absl::StrCat(absl::StrReplaceAll(spec, {{"\n", " "}, {"\r", " "}}), "\n");
  const std::string& path = options_.record_manifest;
  int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  absl::Status s;
  if (fd < 0) {
    s = cache_internal::ErrnoStatus(errno, "opening manifest", path);
  } else {
    ssize_t w = write(fd, line.data(), line.size());
    if (w != static_cast<ssize_t>(line.size())) {
      s = cache_internal::ErrnoStatus(w < 0 ? errno : ENOSPC, "appending to manifest", path);
    }
    close(fd);
  }
  if (!s.ok() && !manifest_warned_.exchange(true)) {
    MLAJIT_LOG_WARN("MLAJIT_RECORD_MANIFEST: ", s.message(), "; specs are not recorded");
  }
}

void KernelCacheImpl::FlushStats() {
  if (stats_log_ == nullptr) return;  // memory-only: the process counters are all there is
  absl::MutexLock lock(&stats_mu_);
  Counters delta;
  delta.hits = hits_.exchange(0);
  delta.misses = misses_.exchange(0);
  delta.compiles = compiles_.exchange(0);
  if (delta.empty() || stats_log_->Append(delta).ok()) return;
  hits_.fetch_add(delta.hits);  // keep them for a later flush
  misses_.fetch_add(delta.misses);
  compiles_.fetch_add(delta.compiles);
}

absl::StatusOr<std::vector<ScanItem>> KernelCacheImpl::ScanDisk() {
  if (disk_ == nullptr) return std::vector<ScanItem>();
  absl::StatusOr<std::vector<ScanItem>> items = disk_->Scan();
  if (!items.ok()) return items;
  // A last use far in the future was written under a wrong clock and says
  // nothing about recency; left alone it would make the entry look newest
  // forever (never evicted, never old enough to prune). Re-anchor it to now, on
  // disk too, so that it ages from here like any entry.
  const int64_t now = Now();
  for (ScanItem& it : *items) {
    if (it.last_use_unix_s > now + kClockSkewToleranceS && it.name_ok) {
      it.last_use_unix_s = now;
      disk_->TouchUse(it.key, now).IgnoreError();
    }
  }
  return items;
}

absl::StatusOr<uint64_t> KernelCacheImpl::EvictLru(uint64_t max_bytes, const CacheKey* keep) {
  absl::StatusOr<std::vector<ScanItem>> items = ScanDisk();
  if (!items.ok()) return items.status();
  uint64_t total = 0;
  for (const ScanItem& it : *items) total += it.bytes;
  if (total <= max_bytes) return 0;
  // Oldest last use first; the path breaks ties so the order is deterministic.
  std::stable_sort(items->begin(), items->end(), [](const ScanItem& a, const ScanItem& b) {
    return a.last_use_unix_s < b.last_use_unix_s;
  });
  uint64_t removed = 0;
  for (const ScanItem& it : *items) {
    if (total <= max_bytes) break;
    if (keep != nullptr && it.name_ok && it.key == *keep) continue;
    absl::Status s = disk_->RemoveEntry(it);
    if (!s.ok()) return s;
    total -= it.bytes;
    ++removed;
  }
  return removed;
}

absl::StatusOr<std::vector<EntryInfo>> KernelCacheImpl::List() {
  std::vector<EntryInfo> out;
  if (disk_ == nullptr) {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, slot] : memory_) {
      EntryInfo info;
      info.key = key;
      info.metadata = slot.entry->metadata;
      info.file_bytes = slot.entry->payload.size();
      info.last_use_unix_s = slot.last_touch_s;
      out.push_back(std::move(info));
    }
    std::sort(out.begin(), out.end(),
              [](const EntryInfo& a, const EntryInfo& b) { return a.key.Hex() < b.key.Hex(); });
    return out;
  }
  absl::StatusOr<std::vector<ScanItem>> items = disk_->Scan();
  if (!items.ok()) return items.status();
  for (const ScanItem& it : *items) out.push_back(disk_->Inspect(it, ParseMode::kFull));
  return out;
}

absl::StatusOr<std::vector<EntryInfo>> KernelCacheImpl::Verify() {
  absl::StatusOr<std::vector<EntryInfo>> all = List();
  if (!all.ok()) return all.status();
  std::vector<EntryInfo> bad;
  for (EntryInfo& e : *all) {
    if (!e.valid) bad.push_back(std::move(e));
  }
  return bad;
}

absl::StatusOr<EntryPtr> KernelCacheImpl::Read(const CacheKey& key) {
  std::string looked;
  for (const DiskTier* tier : {prebuilt_.get(), disk_.get()}) {
    if (tier == nullptr) continue;
    absl::StatusOr<CacheEntry> e = tier->Load(key, ParseMode::kFull);
    if (e.ok()) {
      e->source = tier == disk_.get() ? CacheEntry::Source::kDisk : CacheEntry::Source::kPrebuilt;
      return std::make_shared<const CacheEntry>(*std::move(e));
    }
    if (!absl::IsNotFound(e.status())) return e.status();
    absl::StrAppend(&looked, looked.empty() ? "" : ", ", tier->EntryPath(key));
  }
  return absl::NotFoundError(absl::StrCat("kernel ", key.Hex(), " is not in the cache (looked in ",
                                          looked.empty() ? "no directory: memory only" : looked,
                                          ")"));
}

absl::StatusOr<CacheStats> KernelCacheImpl::Stats() {
  FlushStats();
  CacheStats stats;
  if (disk_ == nullptr) {
    absl::MutexLock lock(&mu_);
    stats.entries = memory_.size();
    for (const auto& [key, slot] : memory_) stats.bytes += slot.entry->payload.size();
  } else {
    absl::StatusOr<std::vector<ScanItem>> items = disk_->Scan();
    if (!items.ok()) return items.status();
    stats.entries = items->size();
    for (const ScanItem& it : *items) stats.bytes += it.bytes;
  }
  if (stats_log_ != nullptr) {
    absl::StatusOr<Counters> persisted = stats_log_->Read();
    if (persisted.ok()) {
      stats.hits = persisted->hits;
      stats.misses = persisted->misses;
      stats.compiles = persisted->compiles;
    }
  }
  stats.hits += hits_.load();  // not yet flushed (or the flush failed)
  stats.misses += misses_.load();
  stats.compiles += compiles_.load();
  return stats;
}

absl::StatusOr<uint64_t> KernelCacheImpl::PruneToBytes(uint64_t max_bytes) {
  return EvictLru(max_bytes, nullptr);
}

absl::StatusOr<uint64_t> KernelCacheImpl::PruneOlderThan(int64_t seconds) {
  if (seconds < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("PruneOlderThan: seconds=", seconds, ": must be >= 0"));
  }
  absl::StatusOr<std::vector<ScanItem>> items = ScanDisk();
  if (!items.ok()) return items.status();
  const int64_t cutoff = Now() - seconds;
  uint64_t removed = 0;
  for (const ScanItem& it : *items) {
    if (it.last_use_unix_s >= cutoff) continue;
    absl::Status s = disk_->RemoveEntry(it);
    if (!s.ok()) return s;
    ++removed;
  }
  return removed;
}

absl::StatusOr<uint64_t> KernelCacheImpl::PruneStale() {
  if (disk_ == nullptr) return 0;
  absl::StatusOr<uint64_t> removed = disk_->RemoveOtherNamespaces();
  if (!removed.ok()) return removed.status();
  absl::StatusOr<std::vector<ScanItem>> items = disk_->Scan();
  if (!items.ok()) return items.status();
  for (const ScanItem& it : *items) {
    EntryInfo info = disk_->Inspect(it, ParseMode::kMetadataOnly);
    if (info.valid && info.metadata.library_version == options_.library_version) continue;
    absl::Status s = disk_->RemoveEntry(it);
    if (!s.ok()) return s;
    ++*removed;
  }
  disk_->RemoveOrphanTemps().IgnoreError();
  return removed;
}

absl::StatusOr<uint64_t> KernelCacheImpl::Clear() {
  uint64_t removed = 0;
  {
    absl::MutexLock lock(&mu_);
    if (disk_ == nullptr) removed = memory_.size();
    memory_.clear();
  }
  if (disk_ == nullptr) return removed;
  absl::StatusOr<std::vector<ScanItem>> items = disk_->Scan();
  if (!items.ok()) return items.status();
  for (const ScanItem& it : *items) {
    absl::Status s = disk_->RemoveEntry(it);
    if (!s.ok()) return s;
    ++removed;
  }
  disk_->RemoveOrphanTemps().IgnoreError();
  return removed;
}

absl::Status KernelCacheImpl::Install(const CacheEntry& entry) {
  if (disk_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot install kernel ", entry.key.Hex(), ": the cache has no usable directory (",
        options_.memory_only ? "memory only" : options_.cache_dir, ")"));
  }
  // Under the key lock, like a compile: a concurrent compiler of this key
  // re-checks after its wait and finds the installed entry.
  absl::StatusOr<FileLock> lock = disk_->LockKey(entry.key, options_.lock_timeout_s);
  if (!lock.ok()) return lock.status();
  absl::Status s = disk_->Publish(entry.key, entry.metadata, entry.fields, entry.payload);
  if (!s.ok()) return s;
  disk_->TouchUse(entry.key, Now()).IgnoreError();
  {
    // A stale copy in this process's memory tier must not outlive the new file.
    absl::MutexLock l(&mu_);
    memory_.erase(entry.key);
  }
  return absl::OkStatus();
}

absl::Status KernelCacheImpl::LoadPins() {
  if (options_.pins_file.empty()) return absl::OkStatus();
  absl::StatusOr<cache_internal::PinSet> pins = cache_internal::PinSet::Load(options_.pins_file);
  if (!pins.ok()) {
    return absl::Status(pins.status().code(),
                        absl::StrCat("CacheOptions.pins_file (MLAJIT_CACHE_PINS): ",
                                     pins.status().message()));
  }
  pins_ = *std::move(pins);
  if (options_.prebuilt_dir.empty()) {
    MLAJIT_LOG_WARN("kernel cache pins ", options_.pins_file,
                    " are set but there is no prebuilt layer (MLAJIT_CACHE_PREBUILT): they "
                    "apply to nothing");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<KernelCache>> KernelCache::Open(const CacheOptions& options) {
  if (!(options.lock_timeout_s >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("CacheOptions.lock_timeout_s=", options.lock_timeout_s, ": must be >= 0"));
  }
  if (options.use_record_interval_s < 0) {
    return absl::InvalidArgumentError(absl::StrCat("CacheOptions.use_record_interval_s=",
                                                   options.use_record_interval_s,
                                                   ": must be >= 0"));
  }
  auto cache = std::make_unique<KernelCacheImpl>(options);
  absl::Status pins = cache->LoadPins();
  if (!pins.ok()) return pins;
  cache->Init();
  return std::unique_ptr<KernelCache>(std::move(cache));
}

}  // namespace mlajit::cache
