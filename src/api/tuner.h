// mlajit_tune behind the C ABI: times the candidate tile shapes of one batch
// layout on the runtime's device and records the fastest (see mlajit.h).
//
//   TuneOptions o;  o.timed_calls = 100;
//   MLAJIT_ASSIGN_OR_RETURN(TuneResult r, Tune(rt, &config, b, qo, kv, nullptr, o));
//   std::string json = TuneResultJson(r);
#ifndef MLAJIT_SRC_API_TUNER_H_
#define MLAJIT_SRC_API_TUNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mlajit/mlajit.h"
#include "src/api/runtime.h"
#include "src/plan/tile_policy.h"
#include "src/tune/tuning_table.h"

namespace mlajit::api_internal {

struct TuneOptions {
  int warmup_calls = 5;
  int timed_calls = 100;
  bool persist = true;
  bool device_plans = false;  // also record for device-built plans (mlajit.h)
};

struct CandidateOutcome {
  plan::TileShape shape;
  absl::Status status;      // why it was skipped: compile, launch, disagreement
  double median_us = -1;    // when timed
  double rel_diff = 0;      // ||out - out_default|| / ||out_default||
};

struct TuneResult {
  tune::TuningKey key;
  std::vector<CandidateOutcome> candidates;  // [0]: the tile policy's shape
  int chosen = 0;
  bool persisted = false;
};

// Arguments as for Plan::Create. Errors: invalid arguments, no memory for the
// synthetic inputs, or the default shape failing (nothing to compare with).
absl::StatusOr<TuneResult> Tune(Runtime* runtime, const mlajit_plan_config_t* config,
                                int batch_size, const int32_t* qo_indptr,
                                const int32_t* kv_indptr, const int32_t* kv_lens,
                                const TuneOptions& options);

std::string TuneResultJson(const TuneResult& r);

}  // namespace mlajit::api_internal

#endif  // MLAJIT_SRC_API_TUNER_H_
