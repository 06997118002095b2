// mlajit_bench: times MLA decode on the GPU against the roofline floor.
//
//   mlajit_bench                       # the 8-case MI355X decode suite, fp8 KV
//   mlajit_bench --suite all --json results.json
//   mlajit_bench --suite bf16,mxfp4 --runs 500
//   mlajit_bench --case 128,2,8192,16,mxfp4   # any shape (custom_case.h)
//
// Per case: correctness against the CPU reference (relative L2 error), then the
// median and min of per-call device-event times over --runs calls, after
// --warmup-ms (200) of device time spent calling it (so that every case is
// timed in the sustained clock state, device_timing.h), calls that rotate
// over enough copies of the inputs to exceed the L2 cache, each call's
// kernels enqueued before the stream reaches its start event (stream_hold.h:
// the device's time alone), the same median host-paced (paced_us: no hold,
// so small cases add the host's enqueueing), the mean of a back-to-back
// burst (launch gaps hidden), effective TB/s and TFLOP/s, and the
// floor: max(bytes / read bandwidth, FLOPs / tensor rate), and the floor with
// each product at the rate the accuracy contract allows (contract_us,
// roofline.h), and the largest of the plan's schedule's per-SM bounds
// (bound_us: the bytes into the busiest SM at its fill rate, its products at
// the tensor cores' peak, the call's bytes at DRAM's; schedule_report.h).
// Both ceilings are
// measured at start (ceilings.h: a streaming-read kernel, cublasLt products),
// or taken from DESIGN.md with --ceilings assumed. First-call costs (cold
// compile, warm disk load) are measured separately, never mixed in. With
// --launch-floor, empty kernels launched as a call's one, two or three
// kernels are timed the same way first (launch_floor.h): the least a call
// can take on this device; and so are two small split cases' chains of
// dependent memory accesses with no arithmetic, with fp8 and with bf16 KV
// (chain_floor.h). With
// --sm-fill, how fast bulk copies fill one SM's shared memory, from L2 and
// from DRAM, at 1 to every SM busy (sm_fill.h): the ceiling of kernels that
// stream whole tiles into shared memory; and whether a tile split between
// L2 and the other SM of a cluster fills faster (sm_exchange.h). With
// --power, the average power of a second of each case's calls back to back,
// of each ceiling's kernel and of SMs that only wait (power.h: NVML's energy
// counter), and the energy a call takes: where a case runs at the board's
// power limit, its speed is what its energy a call allows.
//
// Two figures about launch overhead sit next to the device times:
//  - graph_us: one call captured into a graph, replayed --runs times back to
//    back between one pair of events (mean per replay). The replays read the
//    same inputs, so small cases may be served from L2, unlike burst_us. "-"
//    when the call cannot be captured (a warning says why on stderr).
//  - host_us: host wall time per mlajit_decode call (validation and enqueue,
//    not the kernel): median of 5 bursts of min(--runs, 100) calls, few enough
//    that the launch queue never fills and blocks the host.
// And the state the median was measured in (gpu_clocks.h; "-" without NVML):
//  - sm_MHz: median SM clock sampled every millisecond over the timed calls;
//  - slow%: share of those samples in which the driver held the clock down
//    (power cap, thermal or hardware slowdown). The JSON adds the clock's
//    range, the reasons seen and every per-call time in call order.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "mlajit/mlajit.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/ceilings.h"
#include "tools/bench/chain_floor.h"
#include "tools/bench/custom_case.h"
#include "tools/bench/device_timing.h"
#include "tools/bench/gpu_clocks.h"
#include "tools/bench/launch_floor.h"
#include "tools/bench/power.h"
#include "tools/bench/run_case.h"
#include "tools/bench/schedule_report.h"
#include "tools/bench/sm_exchange.h"
#include "tools/bench/sm_fill.h"
#include "tools/bench/step_graph.h"
#include "tools/bench/stream_hold.h"
#include "tools/bench/suites.h"
#include "tools/harness/decode_harness.h"

namespace mlajit::bench {
namespace {

using harness::DecodeHarness;
using reference::BatchConfig;

int Main(int argc, char** argv) {
  std::string suites = "default", json_path, only;
  std::vector<BatchConfig> custom;  // --case: run these instead of the suites
  int runs = 300;
  int step_layers = 0;          // > 0: also time a captured step of that many layers per case
  std::string schedule_target;  // non-empty: print host schedules, no GPU
  bool check = true;
  bool tune = false;  // mlajit_tune each case first (records kept in the cache directory)
  bool measure_ceilings = true;
  bool launch_floor = false;  // also time empty kernels launched like a call (launch_floor.h)
  bool sm_fill = false;       // also measure one SM's fill rate by bulk copies (sm_fill.h)
  double power_ms = 0;        // > 0: also each case's and each ceiling's power (power.h)
  double warmup_ms = 200;  // device time before each case's (and ceiling's) timed calls
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    // The next argument as milliseconds in least..60000 into *out; false
    // after saying what was wrong.
    auto milliseconds = [&](double* out, double least) {
      const std::string ms = next();
      if (absl::SimpleAtod(ms, out) && *out >= least && *out <= 60000) return true;
      std::fprintf(stderr, "mlajit_bench: %s '%s': expected milliseconds in %g..60000\n", a.c_str(),
                   ms.c_str(), least);
      return false;
    };
    if (a == "--suite") {
      suites = next();
    } else if (a == "--json") {
      json_path = next();
    } else if (a == "--runs") {
      runs = std::max(1, std::atoi(next().c_str()));
    } else if (a == "--only") {
      only = next();
    } else if (a == "--case") {
      absl::StatusOr<BatchConfig> c = ParseCustomCase(next());
      if (!c.ok()) {
        std::fprintf(stderr, "mlajit_bench: %s\n", std::string(c.status().message()).c_str());
        return 2;
      }
      custom.push_back(*c);
    } else if (a == "--no-check") {
      check = false;
    } else if (a == "--warmup-ms") {
      if (!milliseconds(&warmup_ms, 0)) return 2;
    } else if (a == "--ceilings") {
      const std::string how = next();
      if (how != "measured" && how != "assumed") {
        std::fprintf(stderr, "mlajit_bench: --ceilings '%s': expected measured or assumed\n",
                     how.c_str());
        return 2;
      }
      measure_ceilings = how == "measured";
    } else if (a == "--tune") {
      tune = true;
    } else if (a == "--launch-floor") {
      launch_floor = true;
    } else if (a == "--sm-fill") {
      sm_fill = true;
    } else if (a == "--power") {
      power_ms = 1000;
    } else if (a == "--power-ms") {
      if (!milliseconds(&power_ms, 100)) return 2;
    } else if (a == "--schedule") {
      schedule_target = next();
      if (schedule_target.empty()) {
        std::fprintf(stderr, "mlajit_bench: --schedule needs ARCH or ARCH:SM_COUNT\n");
        return 2;
      }
    } else if (a == "--step-layers") {
      step_layers = std::max(0, std::atoi(next().c_str()));
    } else if (a == "--help" || a == "-h") {
      std::printf(
          "usage: mlajit_bench [--suite "
          "default|bf16|a8|mxfp4|paged64|paged1|heads128|skewed|all[,..]]\n"
          "                    [--runs N] [--json FILE] [--no-check] [--only CASE_SUBSTRING]\n"
          "                    [--case "
          "B,Q_LEN,KV_LEN,HEADS[,FORMAT[,PAGE[,a8][,uniform|skewed]]]]...\n"
          "                                (these shapes instead of the suites; FORMAT bf16,\n"
          "                                fp8_e4m3 or mxfp4; PAGE 0 = flat; KV lengths fixed\n"
          "                                unless uniform or skewed)\n"
          "                    [--ceilings measured|assumed]  (the floor's read bandwidth and\n"
          "                                tensor rates: measured at start (default), or\n"
          "                                DESIGN.md's H200 figures)\n"
          "                    [--warmup-ms MS]  (device time each case and ceiling runs\n"
          "                                before its timed calls; default 200)\n"
          "                    [--launch-floor]  (also time empty kernels launched as a call's\n"
          "                                one, two or three kernels are: the least a call\n"
          "                                can take here; and the dependent loads and stores\n"
          "                                of two small split cases with no arithmetic)\n"
          "                    [--sm-fill]  (also: how fast bulk copies fill one SM's shared\n"
          "                                memory from L2 and from DRAM, 1 to every SM busy,\n"
          "                                and with part of a tile from the cluster's other SM)\n"
          "                    [--power | --power-ms MS]  (also: the average power, from\n"
          "                                NVML's energy counter, of MS ms (default 1000) of\n"
          "                                each case's calls back to back, of each ceiling's\n"
          "                                kernel and of SMs that only wait; J a call)\n"
          "                    [--tune]   (mlajit_tune each case first; the timed plans then\n"
          "                                use the recorded shapes)\n"
          "                    [--step-layers L]   (also: a device-planned step of L decode\n"
          "                                         calls per case, captured in a graph; once\n"
          "                                         without and once with the case's kv_len\n"
          "                                         as the plan's kv_len_hint)\n"
          "                    [--schedule ARCH[:SMS]]  (no GPU: print each case's host\n"
          "                                         schedule for that target instead)\n");
      return 0;
    } else {
      std::fprintf(stderr, "mlajit_bench: unknown argument %s (see --help)\n", a.c_str());
      return 2;
    }
  }
  if (suites == "all") suites = kAllSuites;
  std::vector<Case> cases;
  for (const BatchConfig& c : custom) cases.push_back({"custom", c});
  for (absl::string_view s : absl::StrSplit(custom.empty() ? suites : "", ',', absl::SkipEmpty())) {
    auto more = SuiteCases(std::string(s));
    if (more.empty()) {
      std::fprintf(stderr, "mlajit_bench: unknown suite '%s'\n", std::string(s).c_str());
      return 2;
    }
    for (const Case& c : more) {
      if (only.empty() || CaseName(c.config).find(only) != std::string::npos) cases.push_back(c);
    }
  }
  if (cases.empty()) {
    std::fprintf(stderr, "mlajit_bench: no case matches --only '%s'\n", only.c_str());
    return 2;
  }
  if (!schedule_target.empty()) {
    std::vector<std::pair<std::string, BatchConfig>> named;
    for (const Case& c : cases) named.push_back({c.suite + " " + CaseName(c.config), c.config});
    const absl::Status s = PrintSchedules(schedule_target, named);
    if (!s.ok()) std::fprintf(stderr, "mlajit_bench: %s\n", std::string(s.message()).c_str());
    return s.ok() ? 0 : 2;
  }
  auto h = DecodeHarness::Create(0);
  if (!h.ok()) {
    std::fprintf(stderr, "mlajit_bench: no GPU: %s\n", std::string(h.status().message()).c_str());
    return 1;
  }
  FirstCallCosts(cases.front());
  HostCostBreakdown(**h);
  std::unique_ptr<ClockMonitor> clocks = OpenClockMonitor(**h);
  std::vector<NamedPowerWindow> power;  // the waiting SMs' and the ceilings' windows
  AfterCeiling power_of_ceiling = nullptr;
  if (power_ms > 0) {
    PowerWindow w;
    if (absl::Status s =
            MeasureWaitingPower((*h)->backend(), (*h)->device(), clocks.get(), power_ms, &w);
        s.ok()) {
      power.push_back({"waiting", w});
      std::printf("power: %s\n", FormatPowerWindow("every SM waiting on its clock", w).c_str());
    } else {
      std::fprintf(stderr, "power: waiting SMs: %s\n", std::string(s.message()).c_str());
    }
    power_of_ceiling = [&](const char* name, gpu::StreamHandle stream,
                           const EnqueueCall& enqueue) -> absl::StatusOr<int> {
      PowerWindow w;
      const absl::Status s = MeasurePower((*h)->backend(), (*h)->device(), stream, enqueue,
                                          clocks.get(), power_ms, &w);
      if (s.ok()) {
        power.push_back({name, w});
        std::printf("power: %s\n", FormatPowerWindow(absl::StrCat(name, " ceiling"), w).c_str());
      } else {
        std::fprintf(stderr, "power: %s ceiling: %s\n", name, std::string(s.message()).c_str());
      }
      return w.enqueued;
    };
  }
  const Ceilings ceilings =
      measure_ceilings
          ? MeasureCeilings((*h)->backend(), (*h)->device(), warmup_ms, power_of_ceiling)
          : AssumedCeilings("assumed (DESIGN.md, H200): --ceilings assumed");
  std::printf("ceilings: read %.3f TB/s, %s\n", ceilings.read.value * 1e-12,
              ceilings.read.how.c_str());
  std::printf("ceilings: fp8 %.0f TFLOP/s, %s\n", ceilings.fp8.value * 1e-12,
              ceilings.fp8.how.c_str());
  std::printf("ceilings: bf16 %.0f TFLOP/s, %s\n", ceilings.bf16.value * 1e-12,
              ceilings.bf16.how.c_str());
  std::optional<LaunchFloor> floor;
  std::vector<ChainFloor> chains;
  if (launch_floor) {
    absl::StatusOr<LaunchFloor> f =
        MeasureLaunchFloor((*h)->backend(), (*h)->device(), warmup_ms, runs);
    if (!f.ok()) {
      std::fprintf(stderr, "mlajit_bench: launch floor: %s\n",
                   std::string(f.status().message()).c_str());
      return 1;
    }
    floor = *f;
    std::printf("%s\n", FormatLaunchFloor(*floor).c_str());
    for (const ChainShape& shape :
         {SmallestCaseChain(), BatchOf32Chain(), SmallestCaseChainBf16(), BatchOf32ChainBf16()}) {
      absl::StatusOr<ChainFloor> c =
          MeasureChainFloor((*h)->backend(), (*h)->device(), shape, warmup_ms, runs);
      if (!c.ok()) {
        std::fprintf(stderr, "mlajit_bench: chain floor: %s\n",
                     std::string(c.status().message()).c_str());
        return 1;
      }
      chains.push_back(*c);
      std::printf("%s\n", FormatChainFloor(*c).c_str());
    }
  }
  if (sm_fill) {
    absl::StatusOr<std::vector<SmFill>> fills = MeasureSmFill((*h)->backend(), (*h)->device());
    if (!fills.ok()) {
      std::fprintf(stderr, "mlajit_bench: sm fill: %s\n",
                   std::string(fills.status().message()).c_str());
      return 1;
    }
    for (const SmFill& f : *fills) std::printf("%s\n", FormatSmFill(f).c_str());
    absl::StatusOr<std::vector<SmExchange>> exchanges =
        MeasureSmExchange((*h)->backend(), (*h)->device());
    if (!exchanges.ok()) {
      std::fprintf(stderr, "mlajit_bench: sm exchange: %s\n",
                   std::string(exchanges.status().message()).c_str());
      return 1;
    }
    for (const SmExchange& e : *exchanges) std::printf("%s\n", FormatSmExchange(e).c_str());
  }
  absl::StatusOr<std::unique_ptr<StreamHold>> hold =
      StreamHold::Load((*h)->backend(), (*h)->device());
  if (!hold.ok()) {
    std::fprintf(stderr, "mlajit_bench: stream hold: %s\n",
                 std::string(hold.status().message()).c_str());
    return 1;
  }
  std::vector<CaseResult> results;
  for (const Case& c : cases) {
    if (tune) {
      if (absl::Status s = TuneCase(**h, c); !s.ok()) {
        std::fprintf(stderr, "%s: tune: %s\n", CaseName(c.config).c_str(),
                     std::string(s.message()).c_str());
        return 1;
      }
    }
    auto r = RunCase(**h, c, ceilings, runs, warmup_ms, check, **hold, clocks.get(), power_ms);
    if (!r.ok()) {
      std::fprintf(stderr, "%s: %s\n", CaseName(c.config).c_str(),
                   std::string(r.status().message()).c_str());
      return 1;
    }
    results.push_back(*r);
    // Progress on stderr (one line per case): the table comes at the end.
    std::fprintf(stderr, "[%zu/%zu] %s %s: %.2f us median%s %s\n", results.size(), cases.size(),
                 c.suite.c_str(), CaseName(c.config).c_str(), r->median_us,
                 check && !r->passed ? " (MISMATCH)" : "", r->plan_json.c_str());
  }
  std::printf("%s", ResultsTable(results, check).c_str());
  if (power_ms > 0) {
    std::printf("\n");
    for (const CaseResult& r : results) {
      if (!r.power) continue;
      std::printf(
          "power: %s\n",
          FormatPowerWindow(absl::StrCat(r.c.suite, " ", CaseName(r.c.config)), *r.power).c_str());
    }
  }
  if (step_layers > 0) {
    std::printf("\n");
    // Each case twice: as a plan sized by limits alone, and as one given the
    // case's length as kv_len_hint (the tiles a host plan of the batch takes).
    for (const Case& c : cases) {
      for (const int hint : {0, c.config.kv_len}) {
        if (absl::Status s = RunStepGraph(**h, c.config, step_layers, 30, hint); !s.ok()) {
          std::fprintf(stderr, "%s: step graph: %s\n", CaseName(c.config).c_str(),
                       std::string(s.message()).c_str());
          return 1;
        }
      }
    }
  }
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << ResultsJson(ceilings, floor, chains, runs, warmup_ms, results, power) << "\n";
  }
  bool all_ok = true;
  for (const CaseResult& r : results) all_ok &= !check || r.passed;
  return all_ok ? 0 : 1;
}

}  // namespace
}  // namespace mlajit::bench

int main(int argc, char** argv) { return mlajit::bench::Main(argc, argv); }
