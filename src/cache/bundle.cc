#include "src/cache/bundle.h"

#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/cache/entry_format.h"
#include "src/cache/fs_util.h"
#include "src/cache/sha256.h"

namespace mlajit::cache::cache_internal {
namespace {

// The body is held in memory whole; a full DeepSeek-V3 manifest is ~100 MB.
constexpr uint64_t kMaxBundleBytes = uint64_t{16} << 30;
// How many bad entries an import error lists before summarising.
constexpr size_t kMaxListedProblems = 8;

std::pair<std::string, std::string> SplitPath(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

struct ManifestLine {
  CacheKey key;
  std::string sha256;
  uint64_t bytes = 0;
  std::string spec;
};

}  // namespace

absl::StatusOr<BundleSummary> ExportBundle(KernelCache& cache, const std::string& bundle_path,
                                           const std::string& manifest_path,
                                           const std::vector<std::string>& tuning_lines) {
  if (bundle_path.empty()) return absl::InvalidArgumentError("bundle path is empty");
  for (size_t i = 0; i < tuning_lines.size(); ++i) {
    const std::string& t = tuning_lines[i];
    if (t.empty() || t.find_first_of("\n\r") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("tuning line ", i + 1, " \"",
                                                     absl::CEscape(t.substr(0, 80)),
                                                     "\": expected one non-empty line of JSON"));
    }
  }
  absl::StatusOr<std::vector<EntryInfo>> infos = cache.List();
  if (!infos.ok()) return infos.status();
  BundleSummary summary;
  std::string lines, body;
  for (const EntryInfo& info : *infos) {
    if (!info.valid) {
      ++summary.skipped;
      continue;
    }
    absl::StatusOr<std::shared_ptr<const CacheEntry>> e = cache.Read(info.key);
    if (!e.ok()) {  // went bad (or away) since List: leave it out like any invalid one
      ++summary.skipped;
      continue;
    }
    const CacheEntry& entry = **e;
    std::string file = SerializeEntry(entry.key, entry.metadata, entry.fields, entry.payload);
    // The spec is one line of JSON; a foreign entry's newline must not split the line.
    std::string spec = absl::StrReplaceAll(entry.metadata.spec, {{"\n", " "}, {"\r", " "}});
    absl::StrAppend(&lines, entry.key.Hex(), " ", Sha256Hex(entry.payload), " ", file.size(),
                    " ", spec, "\n");
    absl::StrAppend(&body, file);
    ++summary.entries;
    summary.bytes += file.size();
  }
  // Version 1 when there is nothing of version 2 to carry: older readers read it.
  std::string head =
      tuning_lines.empty()
          ? absl::StrCat(kBundleMagic, " ", kBundleVersionKernelsOnly, " ", summary.entries, "\n")
          : absl::StrCat(kBundleMagic, " ", kBundleVersion, " ", summary.entries, " ",
                         tuning_lines.size(), "\n");
  absl::StrAppend(&head, lines);
  for (const std::string& t : tuning_lines) absl::StrAppend(&head, kBundleTuningPrefix, t, "\n");
  absl::StrAppend(&head, "end\n");
  summary.tuning_lines = tuning_lines.size();
  auto [dir, name] = SplitPath(bundle_path);
  absl::Status s = WriteFileAtomic(dir, name, absl::StrCat(head, body), nullptr);
  if (!s.ok()) return s;
  if (!manifest_path.empty()) {
    auto [mdir, mname] = SplitPath(manifest_path);
    s = WriteFileAtomic(mdir, mname,
                        absl::StrCat("# mlajit pins: <key> <payload sha256> <entry bytes> <spec>\n",
                                     lines),
                        nullptr);
    if (!s.ok()) return s;
  }
  return summary;
}

absl::StatusOr<VerifiedBundle> ReadBundle(const std::string& bundle_path, const PinSet* expected) {
  absl::StatusOr<FileData> data = ReadFileBounded(bundle_path, kMaxBundleBytes);
  if (!data.ok()) {
    return absl::Status(data.status().code(),
                        absl::StrCat("bundle ", bundle_path, ": ", data.status().message()));
  }
  absl::string_view rest = data->bytes;
  auto not_bundle = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("bundle ", bundle_path, ": ", why));
  };
  auto next_line = [&](absl::string_view* line) {
    size_t nl = rest.find('\n');
    if (nl == absl::string_view::npos) return false;
    *line = rest.substr(0, nl);
    rest.remove_prefix(nl + 1);
    return true;
  };
  auto quoted = [](absl::string_view line, size_t n) {
    return absl::StrCat("\"", absl::CEscape(line.substr(0, n)), line.size() > n ? "...\"" : "\"");
  };
  absl::string_view line;
  if (!next_line(&line)) return not_bundle("no header line");
  std::vector<absl::string_view> head = absl::StrSplit(line, ' ');
  VerifiedBundle bundle;
  bundle.path = bundle_path;
  uint64_t count = 0, tuning_count = 0;
  const bool v1 = head.size() == 3 && head[1] == absl::StrCat(kBundleVersionKernelsOnly);
  const bool v2 = head.size() == 4 && head[1] == absl::StrCat(kBundleVersion) &&
                  absl::SimpleAtoi(head[3], &tuning_count);
  if (head[0] != kBundleMagic || !(v1 || v2) || !absl::SimpleAtoi(head[2], &count)) {
    return not_bundle(absl::StrCat("header ", quoted(line, 80), ": expected \"", kBundleMagic, " ",
                                   kBundleVersionKernelsOnly, " <count>\" or \"", kBundleMagic, " ",
                                   kBundleVersion, " <count> <tuning count>\""));
  }
  std::vector<ManifestLine> manifest;
  uint64_t body_bytes = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (!next_line(&line)) {
      return not_bundle(absl::StrCat("manifest ends after ", i, " of ", count, " lines"));
    }
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(' ', 3));
    ManifestLine m;
    absl::StatusOr<CacheKey> key =
        f.size() == 4 ? CacheKey::FromHex(f[0]) : absl::InvalidArgumentError("");
    if (f.size() != 4 || !key.ok() || f[1].size() != 64 || !absl::SimpleAtoi(f[2], &m.bytes) ||
        m.bytes > kMaxEntryFileBytes) {
      return not_bundle(absl::StrCat("manifest line ", i + 1, " ", quoted(line, 120),
                                     ": expected \"<32 hex key> <64 hex sha256> <bytes> <spec>\""));
    }
    m.key = *key;
    m.sha256 = std::string(f[1]);
    m.spec = std::string(f[3]);
    body_bytes += m.bytes;
    manifest.push_back(std::move(m));
  }
  for (uint64_t i = 0; i < tuning_count; ++i) {
    const uint64_t line_no = 2 + count + i;
    if (!next_line(&line)) {
      return not_bundle(absl::StrCat("tuning section ends after ", i, " of ", tuning_count,
                                     " lines (line ", line_no, ")"));
    }
    absl::string_view json = line;
    if (!absl::ConsumePrefix(&json, kBundleTuningPrefix) || json.empty()) {
      return not_bundle(absl::StrCat("line ", line_no, ", tuning line ", i + 1, " of ",
                                     tuning_count, " ", quoted(line, 120),
                                     ": expected \"tuning <JSON>\""));
    }
    bundle.tuning_lines.emplace_back(json);
  }
  const bool has_end_line = next_line(&line);
  if (!has_end_line || line != "end") {
    // A wrong count lands here too: the line after the counted ones is named.
    return not_bundle(absl::StrCat(
        "line ", 2 + count + tuning_count, " ", has_end_line ? quoted(line, 120) : "missing",
        ": expected \"end\" after ", count, " manifest lines and ", tuning_count, " tuning lines"));
  }
  if (rest.size() != body_bytes) {
    return not_bundle(absl::StrCat("body has ", rest.size(), " bytes, the manifest lists ",
                                   body_bytes, " (truncated or padded)"));
  }

  // Verify everything before installing anything.
  std::vector<std::string> problems;
  for (const ManifestLine& m : manifest) {
    absl::string_view file = rest.substr(0, m.bytes);
    rest.remove_prefix(m.bytes);
    absl::StatusOr<CacheEntry> e = ParseEntry(file, &m.key, ParseMode::kFull);
    std::string why;
    if (!e.ok()) {
      why = std::string(e.status().message());
    } else if (std::string d = Sha256Hex(e->payload); d != m.sha256) {
      why = absl::StrCat("payload sha256 ", d, ", manifest lists ", m.sha256);
    } else if (absl::StrReplaceAll(e->metadata.spec, {{"\n", " "}, {"\r", " "}}) != m.spec) {
      why = absl::StrCat("spec ", e->metadata.spec, ", manifest lists ", m.spec);
    } else if (expected != nullptr) {
      why = expected->Check(m.key, e->payload);
    }
    if (!why.empty()) {
      problems.push_back(absl::StrCat("entry ", m.key.Hex(), ": ", why));
    } else {
      bundle.entries.push_back(*std::move(e));
    }
  }
  if (!problems.empty()) {
    size_t n = problems.size();
    if (n > kMaxListedProblems) {
      problems.resize(kMaxListedProblems);
      problems.push_back(absl::StrCat("and ", n - kMaxListedProblems, " more"));
    }
    return absl::DataLossError(
        absl::StrCat("bundle ", bundle_path, ": ", n, " of ", manifest.size(),
                     " entries refused, nothing installed: ", absl::StrJoin(problems, "; ")));
  }
  bundle.bytes = body_bytes;
  return bundle;
}

absl::StatusOr<BundleSummary> InstallBundle(KernelCache& cache, const VerifiedBundle& bundle) {
  BundleSummary summary;
  for (const CacheEntry& e : bundle.entries) {
    absl::Status s = cache.Install(e);
    if (!s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat("installing ", e.key.Hex(), " from bundle ", bundle.path, " (",
                                 summary.entries, " installed before it): ", s.message()));
    }
    ++summary.entries;
  }
  summary.bytes = bundle.bytes;
  return summary;
}

}  // namespace mlajit::cache::cache_internal
