// Hit / miss / compile counters persisted across processes: each process
// appends its deltas as one short line ("<hits> <misses> <compiles>\n") to
// <namespace>/stats.log under <namespace>/stats.lock, and readers sum the lines.
// The file is compacted to one line when it grows, under the same lock, so no
// append is lost. A damaged line is skipped, never fatal.
//
//   StatsLog log(ns_dir);
//   log.Append({.hits = 3, .misses = 1, .compiles = 1});
//   absl::StatusOr<Counters> total = log.Read();
#ifndef MLAJIT_SRC_CACHE_STATS_LOG_H_
#define MLAJIT_SRC_CACHE_STATS_LOG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mlajit::cache::cache_internal {

struct Counters {
  uint64_t hits = 0, misses = 0, compiles = 0;
  bool empty() const { return hits == 0 && misses == 0 && compiles == 0; }
};

class StatsLog {
 public:
  explicit StatsLog(std::string dir);
  absl::Status Append(const Counters& delta);
  absl::StatusOr<Counters> Read() const;  // zeros when the file does not exist

 private:
  std::string dir_, path_, lock_path_;
};

}  // namespace mlajit::cache::cache_internal

#endif  // MLAJIT_SRC_CACHE_STATS_LOG_H_
