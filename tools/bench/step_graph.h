// One decode step of a whole model, as an engine captures it: a device-built
// plan's update followed by one decode per layer (each layer reading its own
// KV cache and Q), captured once in a graph and replayed; reported next to the
// same calls enqueued one by one.
//
//   MLAJIT_RETURN_IF_ERROR(RunStepGraph(harness, config, /*layers=*/61, /*replays=*/30));
//   MLAJIT_RETURN_IF_ERROR(RunStepGraph(harness, config, 61, 30, /*kv_len_hint=*/config.kv_len));
#ifndef MLAJIT_TOOLS_BENCH_STEP_GRAPH_H_
#define MLAJIT_TOOLS_BENCH_STEP_GRAPH_H_

#include "absl/status/status.h"
#include "src/reference/batch_generator.h"
#include "tools/harness/decode_harness.h"

namespace mlajit::bench {

// Prints one line: median replay time of the captured step (device events),
// per layer, the eager step's device time, and the host time to enqueue it,
// with the plan's tile rows. kv_len_hint: the plan's
// mlajit_plan_limits_t::kv_len_hint (0: none).
absl::Status RunStepGraph(harness::DecodeHarness& h, const reference::BatchConfig& config,
                          int layers, int replays, int kv_len_hint = 0);

}  // namespace mlajit::bench

#endif  // MLAJIT_TOOLS_BENCH_STEP_GRAPH_H_
