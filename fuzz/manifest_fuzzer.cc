// Fuzzes the warm-up manifest parser (src/jit/manifest.h ParseManifest): a
// deployment file, often hand-edited or recorded by the cache.
//
// Oracle: no crash; errors are kInvalidArgument naming a line; line numbers are
// increasing and within the text; the manifest that ManifestLine prints for the
// parsed specs parses back to the same specs.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "fuzz/fuzz_check.h"
#include "src/jit/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using mlajit::jit::ManifestEntry;
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<ManifestEntry>> m = mlajit::jit::ParseManifest(text, "fuzz.jsonl");
  if (!m.ok()) {
    FUZZ_CHECK(m.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(absl::StartsWith(m.status().message(), "fuzz.jsonl line "));
    return 0;
  }
  const size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
  std::string printed;
  int previous = 0;
  for (const ManifestEntry& e : *m) {
    FUZZ_CHECK(e.line > previous && static_cast<size_t>(e.line) <= lines);
    previous = e.line;
    printed += mlajit::jit::ManifestLine(e.spec);
    printed += '\n';
  }
  absl::StatusOr<std::vector<ManifestEntry>> again = mlajit::jit::ParseManifest(printed, "again");
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->size() == m->size());
  for (size_t i = 0; i < m->size(); ++i) FUZZ_CHECK((*again)[i].spec == (*m)[i].spec);
  return 0;
}
