// The autotuner's choices: which tile shape (and split floor) a class of batch
// runs with on one kind of device, measured by mlajit_tune and kept in the
// cache directory so that later processes, and servers the cache is shipped
// to, start with them.
//
//   TuningKey k = KeyFor(props.name, "sm_90a", 132, config, /*rows=*/16, &work);
//   if (std::optional<plan::TileShape> t = table.Find(k)) ... use *t ...
//   table.Put(record);  MLAJIT_RETURN_IF_ERROR(table.Save(cache_dir));
//
// On disk: <dir>/tuning.jsonl, one flat JSON object per line (fields in
// cache/README.md). Lines written by another library version are ignored (they
// timed other kernels), as are lines that do not parse, with a warning.
#ifndef MLAJIT_SRC_TUNE_TUNING_TABLE_H_
#define MLAJIT_SRC_TUNE_TUNING_TABLE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "src/base/mla_types.h"
#include "src/plan/tile_policy.h"

namespace mlajit::tune {

inline constexpr char kTuningFileName[] = "tuning.jsonl";
// Larger files are refused unread; a few thousand records fit in 1 MB.
inline constexpr uint64_t kMaxTuningFileBytes = uint64_t{16} << 20;

// A class of batches that share one tuned shape: the device, the plan
// config's formats and paging, the query rows per sequence (max q_len x
// heads: what decides the kernel path) and the batch's size in octaves of
// work (plan::BatchWork::wide_units), or -1 for plans sized by limits.
struct TuningKey {
  std::string device;  // "NVIDIA H200"
  std::string arch;    // "sm_90a"
  int sm_count = 0;
  int kv_format = 0;
  int q_mode = 0;
  int page_size = 0;
  int rows = 0;
  int work_bucket = -1;

  bool operator==(const TuningKey& o) const {
    return device == o.device && arch == o.arch && sm_count == o.sm_count &&
           kv_format == o.kv_format && q_mode == o.q_mode && page_size == o.page_size &&
           rows == o.rows && work_bucket == o.work_bucket;
  }
  template <typename H>
  friend H AbslHashValue(H h, const TuningKey& k) {
    return H::combine(std::move(h), k.device, k.arch, k.sm_count, k.kv_format, k.q_mode,
                      k.page_size, k.rows, k.work_bucket);
  }
};

// floor(log2(wide_units)) (0 for none); -1 without a batch.
int WorkBucket(const plan::BatchWork* work);

// "NVIDIA H200 sm_90a/132 fp8 a16 flat rows16 work2^13": for logs and reports.
std::string KeyName(const TuningKey& k);

// What one tuning run chose for a key, and what it measured.
struct TuningRecord {
  TuningKey key;
  plan::TileShape shape;       // block_m .. ctas_per_sm and min_split_cost are stored
  int64_t median_ns = 0;       // the chosen shape's median call time
  int64_t default_ns = 0;      // the tile policy's own choice, same run
  int candidates = 0;          // shapes timed
  int64_t unix_s = 0;          // when
  std::string library_version; // of the library that measured it
};

std::string ToJsonLine(const TuningRecord& r);
// kInvalidArgument naming the field on a malformed line.
absl::StatusOr<TuningRecord> ParseJsonLine(absl::string_view line);

// One non-empty line of a tuning.jsonl: its number (from 1), its text, and
// the record it holds or why it holds none.
struct TuningFileLine {
  int number = 0;
  std::string text;
  absl::StatusOr<TuningRecord> record;
};
// The non-empty lines of <dir>/tuning.jsonl, every library version's; none
// when the file does not exist. `path` (optional) receives the file's path.
absl::StatusOr<std::vector<TuningFileLine>> ReadTuningFile(const std::string& dir,
                                                           std::string* path = nullptr);

// Thread-safe map of records. Load merges files into it; Save rewrites
// <dir>/tuning.jsonl atomically under a lock file, merged with what other
// processes wrote there meanwhile (the records this table holds win).
class TuningTable {
 public:
  explicit TuningTable(std::string library_version) : version_(std::move(library_version)) {}

  // Reads <dir>/tuning.jsonl if present; a missing file is not an error, a
  // malformed line is skipped with a warning. Returns the records taken.
  absl::StatusOr<int> Load(const std::string& dir);
  absl::Status Save(const std::string& dir) const;

  void Put(const TuningRecord& r);
  std::optional<TuningRecord> Find(const TuningKey& k) const;
  std::vector<TuningRecord> All() const;  // in no particular order

 private:
  std::string version_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<TuningKey, TuningRecord> records_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mlajit::tune

#endif  // MLAJIT_SRC_TUNE_TUNING_TABLE_H_
