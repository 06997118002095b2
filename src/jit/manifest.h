// Warm-up manifests: the kernel specs a deployment needs, one KernelSpec JSON
// object per line, exactly as SpecToJson writes it (so a line recorded by the
// cache with MLAJIT_RECORD_MANIFEST is a manifest line). Blank lines and lines
// starting with '#' are ignored. See cache/README.md.
//
//   MLAJIT_ASSIGN_OR_RETURN(std::vector<ManifestEntry> specs, ReadManifest(path));
//   for (const ManifestEntry& e : specs) Use(e.spec);   // e.line for messages
#ifndef MLAJIT_SRC_JIT_MANIFEST_H_
#define MLAJIT_SRC_JIT_MANIFEST_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/jit/kernel_spec.h"

namespace mlajit::jit {

struct ManifestEntry {
  int line = 0;  // 1-based line in the manifest
  KernelSpec spec;
};

// Strict: any malformed line fails the whole manifest with kInvalidArgument
// "<name> line N: <what>". Specs are parsed, not validated (the arch may still be
// overridden by the caller).
absl::StatusOr<std::vector<ManifestEntry>> ParseManifest(absl::string_view text,
                                                         absl::string_view name);
// kNotFound when the file cannot be read.
absl::StatusOr<std::vector<ManifestEntry>> ReadManifest(const std::string& path);

// One manifest line for `spec` (no newline).
std::string ManifestLine(const KernelSpec& spec);

}  // namespace mlajit::jit

#endif  // MLAJIT_SRC_JIT_MANIFEST_H_
