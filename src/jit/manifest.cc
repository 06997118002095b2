#include "src/jit/manifest.h"

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace mlajit::jit {

absl::StatusOr<std::vector<ManifestEntry>> ParseManifest(absl::string_view text,
                                                         absl::string_view name) {
  std::vector<ManifestEntry> out;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    absl::string_view s = absl::StripAsciiWhitespace(line);
    if (s.empty() || s[0] == '#') continue;
    absl::StatusOr<KernelSpec> spec = SpecFromJson(s);
    if (!spec.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " line ", line_no, ": ", spec.status().message()));
    }
    out.push_back({line_no, *std::move(spec)});
  }
  return out;
}

absl::StatusOr<std::vector<ManifestEntry>> ReadManifest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("manifest ", path, " cannot be read"));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ParseManifest(ss.str(), path);
}

std::string ManifestLine(const KernelSpec& spec) { return SpecToJson(spec); }

}  // namespace mlajit::jit
