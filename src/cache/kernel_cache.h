// Content-addressed kernel binary cache: an in-memory tier, a read-only prebuilt
// layer, and a disk tier of one file per entry, with single-flight compilation.
// The cache stores bytes; what they mean (cubin, code object) is the caller's.
//
//   KeyBuilder kb;
//   kb.Add("source", rendered);  kb.Add("arch", "sm_90a");  ...
//   CacheKey key = kb.Finish();
//   MLAJIT_ASSIGN_OR_RETURN(std::unique_ptr<KernelCache> cache,
//                           KernelCache::Open(CacheOptions::FromEnvironment()));
//   MLAJIT_ASSIGN_OR_RETURN(CacheEntry e, cache->GetOrCompile(key, kb.fields(), meta,
//       [&]() -> absl::StatusOr<std::string> { return compiler.Compile(...); }));
//
// Contracts (DESIGN.md "JIT and the cache"):
//  - key = XXH3-128 over length-prefixed (name, value) fields, in order;
//  - an entry file: magic, format version, full key, payload size + checksum,
//    metadata, key fields, payload; published by private temp file + fsync +
//    rename; readers take no lock;
//  - compiling takes a per-key advisory lock (released by the kernel if the holder
//    dies), re-checks, compiles, publishes; the wait is bounded (kUnavailable);
//  - a corrupt / truncated / foreign / wrong-version file is a miss: recompiled and
//    replaced with one warning;
//  - an unusable directory (read-only, permissions, disk full): warn once and keep
//    going in memory;
//  - disable_jit: a miss is kFailedPrecondition naming the key and the spec.
#ifndef MLAJIT_SRC_CACHE_KERNEL_CACHE_H_
#define MLAJIT_SRC_CACHE_KERNEL_CACHE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mlajit::cache {

// Bumped whenever the entry layout changes; each version has its own namespace
// (subdirectory) so that library versions can share one cache dir.
inline constexpr uint32_t kCacheFormatVersion = 1;

struct CacheKey {
  uint64_t hi = 0, lo = 0;
  std::string Hex() const;  // 32 lowercase hex digits
  static absl::StatusOr<CacheKey> FromHex(absl::string_view hex);
  friend bool operator==(const CacheKey& a, const CacheKey& b) {
    return a.hi == b.hi && a.lo == b.lo;
  }
  friend bool operator!=(const CacheKey& a, const CacheKey& b) { return !(a == b); }
  template <typename H>
  friend H AbslHashValue(H h, const CacheKey& k) {
    return H::combine(std::move(h), k.hi, k.lo);
  }
};

// One input of the key. The entry stores the name, the field's own hash and (when
// short) its value, so that `jitcache explain` can say which fields differ.
struct KeyField {
  std::string name;
  std::string value_preview;  // the value if <= 96 bytes, else "<N bytes>"
  std::string value_hash;     // XXH3-64 hex of the full value
};

class KeyBuilder {
 public:
  void Add(absl::string_view name, absl::string_view value);
  CacheKey Finish() const;
  const std::vector<KeyField>& fields() const;

 private:
  std::string buffer_;  // length-prefixed name/value pairs
  std::vector<KeyField> fields_;
};

// Human-facing description stored in each entry (for list/show/stats).
struct EntryMetadata {
  std::string template_name;      // "mla_decode"
  std::string arch;               // "sm_90a"
  std::string spec;               // KernelSpec as one line of JSON
  std::string compiler;           // "nvrtc 13.0 (build ...)"
  std::string library_version;    // "0.1.0"
  double compile_ms = 0;
};

struct CacheEntry {
  CacheKey key;
  EntryMetadata metadata;
  std::vector<KeyField> fields;
  std::string payload;        // the binary
  std::string path;           // file it came from; empty for memory-only entries
  enum class Source { kMemory, kPrebuilt, kDisk, kCompiled } source = Source::kCompiled;
};

struct CacheOptions {
  std::string cache_dir;       // resolved: MLAJIT_CACHE_DIR, XDG_CACHE_HOME/mlajit, ~/.cache/mlajit
  std::string prebuilt_dir;    // read-only layer; empty: none
  bool memory_only = false;
  bool disable_jit = false;
  bool save_source = false;
  bool trust_cache_dir = false;
  uint64_t max_bytes = uint64_t{4} << 30;
  std::string record_manifest;  // append compiled specs here; empty: off
  // Pins file (pins.h): when set, a prebuilt-layer entry is used only if its key
  // and payload SHA-256 are listed; others are misses with a warning. Open fails
  // when the file cannot be read or parsed (a deployment that asked for pins
  // must not silently run unpinned). Empty: off.
  std::string pins_file;
  double lock_timeout_s = 300;  // bound on waiting for another process's compile
  // This build's version: stored in entries written without one, and the
  // reference of PruneStale (entries of other versions are removed).
  std::string library_version = LibraryVersion();
  // A key's last-use record is rewritten at most once per this many seconds per
  // process, so that hits stay cheap.
  int64_t use_record_interval_s = 60;

  // Test hooks; empty in production.
  // Unix seconds used for last-use records and PruneOlderThan (default: the real clock).
  std::function<int64_t()> clock;
  // Called at each step of a disk write ("mkdir", "open_temp", "partial_write" after
  // half of the temp file is written, "fsync", "rename", "fsync_dir"); a nonzero
  // return is taken as the errno of that step (e.g. ENOSPC, EROFS).
  std::function<int(absl::string_view step)> fault_injection;

  // Defaults overridden by MLAJIT_CACHE_DIR, XDG_CACHE_HOME, HOME,
  // MLAJIT_CACHE_PREBUILT, MLAJIT_DISABLE_JIT, MLAJIT_SAVE_SOURCE,
  // MLAJIT_CACHE_MAX_BYTES (bytes, or with a K/M/G suffix), MLAJIT_RECORD_MANIFEST,
  // MLAJIT_CACHE_PINS, MLAJIT_CACHE_MEMORY_ONLY and MLAJIT_CACHE_TRUST_DIR
  // (boolean: 1/true/yes/on).
  // With no usable directory (no HOME either) the cache runs memory-only.
  static CacheOptions FromEnvironment();
  // The library version compiled into this build ("0.1.0").
  static std::string LibraryVersion();
};

struct CompileResult {
  std::string payload;
  std::string source;  // rendered source, kept when save_source is on
  double compile_ms = 0;
};
using CompileFn = std::function<absl::StatusOr<CompileResult>()>;

struct EntryInfo {
  CacheKey key;
  EntryMetadata metadata;
  std::string path;
  uint64_t file_bytes = 0;   // the entry file plus its saved source, if any
  int64_t last_use_unix_s = 0;
  bool valid = true;
  std::string problem;  // why it is invalid
};

struct CacheStats {
  uint64_t entries = 0, bytes = 0, hits = 0, misses = 0, compiles = 0;
};

class KernelCache {
 public:
  static absl::StatusOr<std::unique_ptr<KernelCache>> Open(const CacheOptions& options);
  virtual ~KernelCache() = default;

  // Memory tier, then prebuilt layer, then disk, then (unless disable_jit) compile
  // under the per-key lock. Concurrent callers for one key compile once.
  virtual absl::StatusOr<std::shared_ptr<const CacheEntry>> GetOrCompile(
      const CacheKey& key, const std::vector<KeyField>& fields, const EntryMetadata& metadata,
      const CompileFn& compile) = 0;

  // Inspection and maintenance (jitcache).
  virtual absl::StatusOr<std::vector<EntryInfo>> List() = 0;  // valid and invalid entries
  // Prebuilt layer, then disk; never compiles. kNotFound when absent, kDataLoss
  // (with the reason) when the file is invalid.
  virtual absl::StatusOr<std::shared_ptr<const CacheEntry>> Read(const CacheKey& key) = 0;
  virtual absl::StatusOr<std::vector<EntryInfo>> Verify() = 0;  // the bad ones
  virtual absl::StatusOr<CacheStats> Stats() = 0;
  // Maintenance of the disk tier; each returns the number of entries removed.
  // Lock files stay (a concurrent compile may hold one); the memory tier of this
  // process is left as is, except by Clear.
  virtual absl::StatusOr<uint64_t> PruneToBytes(uint64_t max_bytes) = 0;  // LRU by last use
  virtual absl::StatusOr<uint64_t> PruneOlderThan(int64_t seconds) = 0;   // last use older
  // Other format-version namespaces, entries of other library versions, invalid
  // entries and temp files left by dead writers.
  virtual absl::StatusOr<uint64_t> PruneStale() = 0;
  virtual absl::StatusOr<uint64_t> Clear() = 0;
  // Publishes a complete entry (e.g. from a verified bundle) into the disk tier
  // under its key lock, replacing any file there. kFailedPrecondition when the
  // cache has no usable directory.
  virtual absl::Status Install(const CacheEntry& entry) = 0;
  virtual const CacheOptions& options() const = 0;
};

}  // namespace mlajit::cache

#endif  // MLAJIT_SRC_CACHE_KERNEL_CACHE_H_
