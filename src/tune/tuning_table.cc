#include "src/tune/tuning_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/base/log.h"
#include "src/base/status_macros.h"
#include "src/cache/file_lock.h"
#include "src/cache/fs_util.h"
#include "src/jit/json_util.h"

namespace mlajit::tune {
namespace {

using cache::cache_internal::FileLock;
using jit::jit_internal::FlatJsonObject;
using jit::jit_internal::JsonQuote;

constexpr double kLockTimeoutS = 30;

const char* FormatName(int f) {
  switch (f) {
    case 0: return "bf16";
    case 1: return "fp8";
    case 2: return "mxfp4";
    default: return "kv?";
  }
}

absl::StatusOr<int64_t> GetInt64(const FlatJsonObject& o, absl::string_view name) {
  const jit::jit_internal::FlatJsonValue* v = o.Find(name);
  if (v == nullptr || v->kind != jit::jit_internal::FlatJsonValue::Kind::kInt) {
    return absl::InvalidArgumentError(absl::StrCat("\"", name, "\": missing or not an integer"));
  }
  return v->int_value;
}

// The record of one parsed line; the field name in the message when one is
// missing or of the wrong type.
absl::StatusOr<TuningRecord> RecordFromObject(const FlatJsonObject& o) {
  TuningRecord r;
  MLAJIT_ASSIGN_OR_RETURN(r.key.device, o.GetString("device"));
  MLAJIT_ASSIGN_OR_RETURN(r.key.arch, o.GetString("arch"));
  MLAJIT_ASSIGN_OR_RETURN(r.key.sm_count, o.GetInt("sm_count"));
  MLAJIT_ASSIGN_OR_RETURN(r.key.kv_format, o.GetInt("kv_format"));
  MLAJIT_ASSIGN_OR_RETURN(r.key.q_mode, o.GetInt("q_mode"));
  MLAJIT_ASSIGN_OR_RETURN(r.key.page_size, o.GetInt("page_size"));
  MLAJIT_ASSIGN_OR_RETURN(r.key.rows, o.GetInt("rows"));
  MLAJIT_ASSIGN_OR_RETURN(r.key.work_bucket, o.GetInt("work_bucket"));
  MLAJIT_ASSIGN_OR_RETURN(r.shape.block_m, o.GetInt("block_m"));
  MLAJIT_ASSIGN_OR_RETURN(r.shape.block_n, o.GetInt("block_n"));
  MLAJIT_ASSIGN_OR_RETURN(r.shape.num_warps, o.GetInt("num_warps"));
  MLAJIT_ASSIGN_OR_RETURN(r.shape.num_stages, o.GetInt("num_stages"));
  MLAJIT_ASSIGN_OR_RETURN(r.shape.ctas_per_sm, o.GetInt("ctas_per_sm"));
  MLAJIT_ASSIGN_OR_RETURN(r.shape.min_split_cost, o.GetInt("min_split_cost"));
  MLAJIT_ASSIGN_OR_RETURN(r.median_ns, GetInt64(o, "median_ns"));
  MLAJIT_ASSIGN_OR_RETURN(r.default_ns, GetInt64(o, "default_ns"));
  MLAJIT_ASSIGN_OR_RETURN(r.candidates, o.GetInt("candidates"));
  MLAJIT_ASSIGN_OR_RETURN(r.unix_s, GetInt64(o, "unix_s"));
  MLAJIT_ASSIGN_OR_RETURN(r.library_version, o.GetString("library_version"));
  if (r.key.kv_format < 0 || r.key.kv_format > 2 || r.key.q_mode < 0 || r.key.q_mode > 1 ||
      r.key.rows < 1 || r.key.work_bucket < -1) {
    return absl::InvalidArgumentError("key fields out of range");
  }
  // The shape itself is checked against the target where it is used
  // (plan::CompleteTileShape), since only the target knows what runs.
  return r;
}

}  // namespace

int WorkBucket(const plan::BatchWork* work) {
  if (work == nullptr) return -1;
  int b = 0;
  for (int64_t u = work->wide_units; u > 1; u >>= 1) ++b;
  return b;
}

std::string KeyName(const TuningKey& k) {
  return absl::StrCat(k.device, " ", k.arch, "/", k.sm_count, " ", FormatName(k.kv_format),
                      k.q_mode == 1 ? " a8" : " a16",
                      k.page_size == 0 ? std::string(" flat") : absl::StrCat(" p", k.page_size),
                      " rows", k.rows,
                      k.work_bucket < 0 ? std::string(" limits")
                                        : absl::StrCat(" work2^", k.work_bucket));
}

std::string ToJsonLine(const TuningRecord& r) {
  const TuningKey& k = r.key;
  const plan::TileShape& t = r.shape;
  return absl::StrCat(
      "{\"device\":", JsonQuote(k.device), ",\"arch\":", JsonQuote(k.arch),
      ",\"sm_count\":", k.sm_count, ",\"kv_format\":", k.kv_format, ",\"q_mode\":", k.q_mode,
      ",\"page_size\":", k.page_size, ",\"rows\":", k.rows, ",\"work_bucket\":", k.work_bucket,
      ",\"block_m\":", t.block_m, ",\"block_n\":", t.block_n, ",\"num_warps\":", t.num_warps,
      ",\"num_stages\":", t.num_stages, ",\"ctas_per_sm\":", t.ctas_per_sm,
      ",\"min_split_cost\":", t.min_split_cost, ",\"median_ns\":", r.median_ns,
      ",\"default_ns\":", r.default_ns, ",\"candidates\":", r.candidates,
      ",\"unix_s\":", r.unix_s, ",\"library_version\":", JsonQuote(r.library_version), "}");
}

absl::StatusOr<TuningRecord> ParseJsonLine(absl::string_view line) {
  MLAJIT_ASSIGN_OR_RETURN(FlatJsonObject o, jit::jit_internal::ParseFlatJsonObject(line));
  return RecordFromObject(o);
}


absl::StatusOr<std::vector<TuningFileLine>> ReadTuningFile(const std::string& dir,
                                                           std::string* path) {
  const std::string file = cache::cache_internal::JoinPath(dir, kTuningFileName);
  if (path != nullptr) *path = file;
  std::vector<TuningFileLine> lines;
  absl::StatusOr<cache::cache_internal::FileData> data =
      cache::cache_internal::ReadFileBounded(file, kMaxTuningFileBytes);
  if (!data.ok()) {
    if (absl::IsNotFound(data.status())) return lines;
    return data.status();
  }
  int number = 0;
  for (absl::string_view text : absl::StrSplit(data->bytes, '\n')) {
    ++number;
    if (text.empty()) continue;
    lines.push_back({number, std::string(text), ParseJsonLine(text)});
  }
  return lines;
}

absl::StatusOr<int> TuningTable::Load(const std::string& dir) {
  std::string path;
  MLAJIT_ASSIGN_OR_RETURN(std::vector<TuningFileLine> lines, ReadTuningFile(dir, &path));
  std::vector<TuningRecord> records;
  for (TuningFileLine& line : lines) {
    if (!line.record.ok()) {
      MLAJIT_LOG_WARN(path, ":", line.number, ": skipping a malformed tuning record: ",
                      line.record.status().message());
      continue;
    }
    if (line.record->library_version != version_) {
      MLAJIT_LOG_DEBUG(path, ":", line.number, ": tuning record of library ",
                       line.record->library_version, " ignored (this is ", version_, ")");
      continue;
    }
    records.push_back(*std::move(line.record));
  }
  absl::MutexLock lock(&mu_);
  for (TuningRecord& r : records) records_[r.key] = std::move(r);
  return static_cast<int>(records.size());
}

absl::Status TuningTable::Save(const std::string& dir) const {
  namespace ci = cache::cache_internal;
  MLAJIT_RETURN_IF_ERROR(ci::MakeDirs(dir, 0700));
  MLAJIT_ASSIGN_OR_RETURN(FileLock lock,
                          FileLock::Acquire(ci::JoinPath(dir, "tuning.lock"), kLockTimeoutS));
  // What is on disk now (other processes, other versions' lines kept as they
  // are), then ours over it.
  std::vector<std::string> foreign;
  absl::flat_hash_map<TuningKey, std::string> lines;
  MLAJIT_ASSIGN_OR_RETURN(std::vector<TuningFileLine> on_disk, ReadTuningFile(dir));
  for (TuningFileLine& line : on_disk) {
    if (!line.record.ok()) continue;  // malformed: dropped on rewrite (Load warned)
    if (line.record->library_version != version_) {
      foreign.push_back(std::move(line.text));
    } else {
      lines[line.record->key] = std::move(line.text);
    }
  }
  {
    absl::MutexLock l(&mu_);
    for (const auto& [key, r] : records_) lines[key] = ToJsonLine(r);
  }
  std::vector<std::string> ours;
  ours.reserve(lines.size());
  for (auto& [key, line] : lines) ours.push_back(std::move(line));
  std::sort(ours.begin(), ours.end());  // a stable file for diffs and tests
  std::string text;
  for (const std::string& line : foreign) absl::StrAppend(&text, line, "\n");
  for (const std::string& line : ours) absl::StrAppend(&text, line, "\n");
  return ci::WriteFileAtomic(dir, kTuningFileName, text, nullptr);
}

void TuningTable::Put(const TuningRecord& r) {
  absl::MutexLock lock(&mu_);
  records_[r.key] = r;
}

std::optional<TuningRecord> TuningTable::Find(const TuningKey& k) const {
  absl::MutexLock lock(&mu_);
  auto it = records_.find(k);
  if (it == records_.end()) return std::nullopt;
  return it->second;
}

std::vector<TuningRecord> TuningTable::All() const {
  absl::MutexLock lock(&mu_);
  std::vector<TuningRecord> out;
  out.reserve(records_.size());
  for (const auto& [k, r] : records_) out.push_back(r);
  return out;
}

}  // namespace mlajit::tune
