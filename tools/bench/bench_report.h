// The bench's report: a case and its measured result, the table it prints
// (one row per case, a geometric-mean row per suite) and the JSON it writes
// with --json. Pure formatting, so the CPU tests check both.
//
//   std::printf("%s", ResultsTable(results, /*checked=*/true).c_str());
//   out << ResultsJson(ceilings, floor, chains, runs, warmup_ms, results);
#ifndef MLAJIT_TOOLS_BENCH_BENCH_REPORT_H_
#define MLAJIT_TOOLS_BENCH_BENCH_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "src/reference/batch_generator.h"
#include "tools/bench/ceilings.h"
#include "tools/bench/chain_floor.h"
#include "tools/bench/gpu_clocks.h"
#include "tools/bench/launch_floor.h"
#include "tools/bench/power.h"
#include "tools/bench/schedule_report.h"

namespace mlajit::bench {

struct Case {
  std::string suite;
  reference::BatchConfig config;
};

// "(batch,q_len,kv_len,heads) format[ a8][ pPAGE][ skewed|uniform]".
std::string CaseName(const reference::BatchConfig& c);

struct CaseResult {
  Case c;
  double median_us = 0, min_us = 0, burst_us = 0;
  double graph_us = 0;  // 0: the call could not be captured
  double host_us = 0;
  double hold_us = 0;   // the stream hold before each timed call (stream_hold.h)
  double paced_us = 0;  // median of the same calls without the hold: host-paced
  double bytes = 0, flops = 0, floor_us = 0;
  double contract_floor_us = 0;  // roofline.h
  // The plan's schedule's per-SM bounds (schedule_report.h); bound_us 0 when
  // they could not be computed (a warning says why).
  SmBounds bounds;
  double rel_err = 0;
  bool passed = false;
  bool checked = false;  // compared with the CPU reference (not under --no-check)
  int copies = 1;
  std::string plan_json;         // mlajit_plan_describe_json of the timed plan
  std::vector<double> times_us;  // every per-call time in call order; call i used copy i % copies
  ClockSummary clocks;           // over the per-call timed runs (the median's window)
  std::optional<PowerWindow> power;  // --power: calls back to back, power.h
};

// A power window of the bench's own work (--power): the waiting SMs and
// each ceiling's kernel, by name.
struct NamedPowerWindow {
  std::string name;
  PowerWindow window;
};

// The JSON object of a case's clock summary ("null" without NVML).
std::string ClocksJson(const ClockSummary& k);

// The table: a header, one row per result and, after each suite's rows, its
// geometric means (bound_us only when every case of the suite has one).
// `checked`: the results were checked against the CPU reference ("ok").
std::string ResultsTable(const std::vector<CaseResult>& results, bool checked);

// The --json document: the ceilings, the launch and chain floors when
// measured, the power windows of the bench's own kernels when measured, and
// every case with its per-call times and plan.
std::string ResultsJson(const Ceilings& ceilings, const std::optional<LaunchFloor>& floor,
                        const std::vector<ChainFloor>& chains, int runs, double warmup_ms,
                        const std::vector<CaseResult>& results,
                        const std::vector<NamedPowerWindow>& power = {});

}  // namespace mlajit::bench

#endif  // MLAJIT_TOOLS_BENCH_BENCH_REPORT_H_
