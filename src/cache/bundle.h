// Bundles: a cache's entries packed into one file that can be shipped and
// installed elsewhere, with a manifest that pins each entry.
//
// Layout (one file; text head, binary body):
//   mlajit-bundle 1 <N>\n
//   N manifest lines: <32 hex key> <64 hex sha256 of the payload> <entry bytes> <spec>\n
//   end\n
//   the N entry files (entry_format.h), concatenated in manifest order.
// The manifest lines are pins lines (pins.h): the manifest written beside a
// bundle is a valid MLAJIT_CACHE_PINS file.
//
// Import checks every entry before installing any: its file parses (magic,
// version, header and payload checksums), holds the key its line names, its
// payload has the listed SHA-256, its spec is the listed one and, with expected
// pins, the (key, digest) pair is pinned there. One bad entry fails the import,
// naming it, and nothing is installed.
//
//   MLAJIT_ASSIGN_OR_RETURN(BundleSummary s, ExportBundle(cache, "/tmp/k.bundle", "/tmp/k.pins"));
//   MLAJIT_ASSIGN_OR_RETURN(BundleSummary t, ImportBundle(other, "/tmp/k.bundle", &pins));
#ifndef MLAJIT_SRC_CACHE_BUNDLE_H_
#define MLAJIT_SRC_CACHE_BUNDLE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "src/cache/kernel_cache.h"
#include "src/cache/pins.h"

namespace mlajit::cache::cache_internal {

inline constexpr char kBundleMagic[] = "mlajit-bundle";
inline constexpr int kBundleVersion = 1;

struct BundleSummary {
  uint64_t entries = 0;  // exported / installed
  uint64_t bytes = 0;    // entry bytes in the bundle
  uint64_t skipped = 0;  // export: invalid entries left out
};

// Writes every valid entry of the cache's disk tier (invalid ones are skipped
// and counted) to `bundle_path`, atomically; with `manifest_path` non-empty also
// writes the manifest alone there (usable as a pins file).
absl::StatusOr<BundleSummary> ExportBundle(KernelCache& cache, const std::string& bundle_path,
                                           const std::string& manifest_path);

// Verifies the whole bundle, then installs its entries into the cache's disk
// tier. kDataLoss naming the first bad entries (key and reason);
// kInvalidArgument when the file is not a bundle.
absl::StatusOr<BundleSummary> ImportBundle(KernelCache& cache, const std::string& bundle_path,
                                           const PinSet* expected);

}  // namespace mlajit::cache::cache_internal

#endif  // MLAJIT_SRC_CACHE_BUNDLE_H_
