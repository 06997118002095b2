// Bundles: a cache's entries packed into one file that can be shipped and
// installed elsewhere, with a manifest that pins each entry, and optionally the
// autotuner's records.
//
// Layout (one file; text head, binary body):
//   mlajit-bundle 2 <N> <T>\n     (or "mlajit-bundle 1 <N>\n" when T is 0)
//   N manifest lines: <32 hex key> <64 hex sha256 of the payload> <entry bytes> <spec>\n
//   T tuning lines: tuning <one JSON object>\n
//   end\n
//   the N entry files (entry_format.h), concatenated in manifest order.
// The manifest lines are pins lines (pins.h): the manifest written beside a
// bundle is a valid MLAJIT_CACHE_PINS file. Export writes version 1 when there
// are no tuning lines, so that readers of version 1 still read such bundles.
//
// The tuning lines are opaque here: the caller (src/api) passes them to export
// and checks, parses and merges them after reading (src/tune owns their format;
// this layer sits below it).
//
// Reading checks every entry before anything is installed: its file parses
// (magic, version, header and payload checksums), holds the key its line names,
// its payload has the listed SHA-256, its spec is the listed one and, with
// expected pins, the (key, digest) pair is pinned there. One bad entry fails the
// read, naming it, and nothing is installed.
//
//   MLAJIT_ASSIGN_OR_RETURN(BundleSummary s,
//                           ExportBundle(cache, "/tmp/k.bundle", "/tmp/k.pins", lines));
//   MLAJIT_ASSIGN_OR_RETURN(VerifiedBundle b, ReadBundle("/tmp/k.bundle", &pins));
//   ... check b.tuning_lines ...
//   MLAJIT_ASSIGN_OR_RETURN(BundleSummary t, InstallBundle(other, b));
#ifndef MLAJIT_SRC_CACHE_BUNDLE_H_
#define MLAJIT_SRC_CACHE_BUNDLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/cache/kernel_cache.h"
#include "src/cache/pins.h"

namespace mlajit::cache::cache_internal {

inline constexpr char kBundleMagic[] = "mlajit-bundle";
// Written when there are tuning lines; kBundleVersionKernelsOnly otherwise.
inline constexpr int kBundleVersion = 2;
inline constexpr int kBundleVersionKernelsOnly = 1;
inline constexpr char kBundleTuningPrefix[] = "tuning ";

struct BundleSummary {
  uint64_t entries = 0;       // exported / installed
  uint64_t bytes = 0;         // entry bytes in the bundle
  uint64_t skipped = 0;       // export: invalid entries left out
  uint64_t tuning_lines = 0;  // export: tuning lines embedded
};

// A bundle whose entries have all been checked (ReadBundle), ready to install.
struct VerifiedBundle {
  std::string path;
  std::vector<CacheEntry> entries;        // in manifest order
  std::vector<std::string> tuning_lines;  // as embedded, without the "tuning " prefix
  uint64_t bytes = 0;                     // entry bytes

  // The bundle's line number (1-based) of tuning line `i` (0-based).
  uint64_t TuningLineNumber(size_t i) const { return 2 + entries.size() + i; }
};

// Writes every valid entry of the cache's disk tier (invalid ones are skipped
// and counted) and `tuning_lines` (each one line of JSON: non-empty, no line
// breaks) to `bundle_path`, atomically; with `manifest_path` non-empty also
// writes the manifest alone there (usable as a pins file).
absl::StatusOr<BundleSummary> ExportBundle(KernelCache& cache, const std::string& bundle_path,
                                           const std::string& manifest_path,
                                           const std::vector<std::string>& tuning_lines = {});

// Reads a bundle of version 1 or 2 and verifies every entry, installing
// nothing. kInvalidArgument naming the line when the file is not a bundle;
// kDataLoss naming the first bad entries (key and reason).
absl::StatusOr<VerifiedBundle> ReadBundle(const std::string& bundle_path, const PinSet* expected);

// Installs the entries of a verified bundle into the cache's disk tier, in
// manifest order. The tuning lines are the caller's to merge.
absl::StatusOr<BundleSummary> InstallBundle(KernelCache& cache, const VerifiedBundle& bundle);

}  // namespace mlajit::cache::cache_internal

#endif  // MLAJIT_SRC_CACHE_BUNDLE_H_
