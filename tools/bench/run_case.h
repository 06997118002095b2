// One benchmark case measured on the GPU, and the bench's other per-case
// steps: the autotuner's run, the first call's compile and load, the host
// cost of a call's checks. What each figure means is in bench.cc's header.
//
//   MLAJIT_ASSIGN_OR_RETURN(CaseResult r,
//                           RunCase(h, c, ceilings, 300, 200.0, true, hold, clocks, 0));
#ifndef MLAJIT_TOOLS_BENCH_RUN_CASE_H_
#define MLAJIT_TOOLS_BENCH_RUN_CASE_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/ceilings.h"
#include "tools/bench/gpu_clocks.h"
#include "tools/bench/stream_hold.h"
#include "tools/harness/decode_harness.h"

namespace mlajit::bench {

// Case `c`: checked against the CPU reference (unless !check), then `runs`
// per-call times after `warmup_ms` of calls (each behind `hold`), the same
// calls host-paced, a burst, graph replays and, with power_ms > 0, a power
// window (power.h). `clocks` may be null (no clock columns, no power).
absl::StatusOr<CaseResult> RunCase(harness::DecodeHarness& h, const Case& c,
                                   const Ceilings& ceilings, int runs, double warmup_ms, bool check,
                                   const StreamHold& hold, ClockMonitor* clocks, double power_ms);

// NVML on the bench's device, or null (with the reason on stderr): the
// figures are the same either way, only the clock columns read "-".
std::unique_ptr<ClockMonitor> OpenClockMonitor(harness::DecodeHarness& h);

// mlajit_tune on the case's layout; the chosen shape and both timings go to
// stderr, the record to the cache directory.
absl::Status TuneCase(harness::DecodeHarness& h, const Case& c);

// Where a decode call's host time goes: the driver queries behind its device
// checks, timed on their own (µs per query, median of 5 bursts of 1000).
void HostCostBreakdown(harness::DecodeHarness& h);

// Cold compile and warm disk load of `c`'s kernel, in fresh runtimes over a
// fresh cache directory (so neither figure touches the steady state).
void FirstCallCosts(const Case& c);

}  // namespace mlajit::bench

#endif  // MLAJIT_TOOLS_BENCH_RUN_CASE_H_
