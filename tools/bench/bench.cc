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
#include <chrono>
#include <cmath>
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
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "mlajit/mlajit.h"
#include "src/base/mla_types.h"
#include "src/base/status_macros.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/ceilings.h"
#include "tools/bench/chain_floor.h"
#include "tools/bench/custom_case.h"
#include "tools/bench/device_timing.h"
#include "tools/bench/gpu_clocks.h"
#include "tools/bench/launch_floor.h"
#include "tools/bench/power.h"
#include "tools/bench/roofline.h"
#include "tools/bench/schedule_report.h"
#include "tools/bench/sm_exchange.h"
#include "tools/bench/sm_fill.h"
#include "tools/bench/step_graph.h"
#include "tools/bench/stream_hold.h"
#include "tools/harness/decode_harness.h"

namespace mlajit::bench {
namespace {

using harness::DecodeHarness;
using harness::DeviceBatch;
using harness::DeviceBuffer;
using reference::BatchConfig;
using reference::LengthDistribution;

constexpr double kL2Bytes = 60e6;

BatchConfig Make(int bs, int q_len, int kv_len, int heads, KvFormat f) {
  BatchConfig c;
  c.batch_size = bs;
  c.q_len = q_len;
  c.kv_len = kv_len;
  c.num_heads = heads;
  c.kv_format = f;
  c.lengths = LengthDistribution::kFixed;
  c.seed = 1234;
  return c;
}

// The public 8-case MI355X decode suite: (batch, q_len, kv_len, heads).
const int kSuite[8][4] = {{4, 1, 1024, 32},   {4, 4, 8192, 32},  {32, 1, 8192, 16},
                          {32, 4, 1024, 16},  {32, 1, 1024, 32}, {32, 4, 8192, 32},
                          {128, 1, 8192, 16}, {128, 4, 8192, 16}};

std::vector<Case> SuiteCases(const std::string& name) {
  std::vector<Case> cases;
  auto add_suite = [&](KvFormat f, int page) {
    for (const auto& s : kSuite) {
      BatchConfig c = Make(s[0], s[1], s[2], s[3], f);
      c.page_size = page;
      cases.push_back({name, c});
    }
  };
  if (name == "default" || name == "fp8") add_suite(KvFormat::kFp8E4m3, 0);
  if (name == "bf16") add_suite(KvFormat::kBf16, 0);
  if (name == "a8") {  // fp8 KV with Q quantised per call to fp8 as well
    add_suite(KvFormat::kFp8E4m3, 0);
    for (Case& c : cases) c.config.q_mode = QMode::kFp8;
  }
  if (name == "mxfp4") add_suite(KvFormat::kMxfp4, 0);
  if (name == "paged64") add_suite(KvFormat::kFp8E4m3, 64);
  if (name == "paged1") add_suite(KvFormat::kFp8E4m3, 1);
  if (name == "heads128") {
    for (KvFormat f : {KvFormat::kFp8E4m3, KvFormat::kBf16}) {
      cases.push_back({name, Make(64, 1, 8192, 128, f)});
      cases.push_back({name, Make(16, 2, 8192, 128, f)});
    }
  }
  if (name == "skewed") {
    for (KvFormat f : {KvFormat::kFp8E4m3, KvFormat::kMxfp4}) {
      BatchConfig c = Make(64, 1, 65536, 16, f);
      c.lengths = LengthDistribution::kSkewed;
      cases.push_back({name, c});
      c = Make(64, 2, 16384, 32, f);
      c.lengths = LengthDistribution::kUniform;
      c.zero_length_fraction = 0.1;
      cases.push_back({name, c});
    }
  }
  return cases;
}

// Bytes that must move (KV read once, Q read once, out written once), the
// FLOPs of both products over the visible tokens, and the floors from them
// (roofline.h).
void CountWork(const DeviceBatch& db, const Ceilings& ceilings, CaseResult* r) {
  const reference::Batch& b = db.batch;
  const BatchConfig& c = b.config;
  const int batch = static_cast<int>(b.qo_indptr.size()) - 1;
  double kv_tokens = 0, qk_pairs = 0;
  for (int s = 0; s < batch; ++s) {
    const int64_t kv_len = b.kv_len(s);
    const int q_len = b.qo_indptr[s + 1] - b.qo_indptr[s];
    kv_tokens += static_cast<double>(kv_len);
    for (int t = 0; t < q_len; ++t) {
      const int64_t vis =
          c.causal ? std::clamp<int64_t>(kv_len - q_len + t + 1, 0, kv_len) : kv_len;
      qk_pairs += static_cast<double>(vis) * c.num_heads;
    }
  }
  const double rows = static_cast<double>(b.total_q()) * c.num_heads;
  CaseWork work;
  work.bytes = kv_tokens * KvBytesPerToken(c.kv_format) + rows * (kHeadDimQk + kHeadDimV) * 2;
  work.s_flops = qk_pairs * 2.0 * kHeadDimQk;
  work.pv_flops = qk_pairs * 2.0 * kHeadDimV;
  const CaseFloors floors = RooflineFloors(work, c.kv_format, c.q_mode, ceilings);
  r->bytes = work.bytes;
  r->flops = work.s_flops + work.pv_flops;
  r->floor_us = floors.floor_us;
  r->contract_floor_us = floors.contract_floor_us;
}

// Device time per replay of a graph holding one mlajit_decode call with `args`,
// over `runs` replays between `start` and `end`; 0 (after a warning on stderr)
// when the call cannot be captured. Errors other than capture ones are returned.
absl::StatusOr<double> GraphReplayUs(gpu::Backend* b, int dev, gpu::StreamHandle stream,
                                     mlajit_plan_t plan, mlajit_decode_args_t args, int runs,
                                     gpu::EventHandle start, gpu::EventHandle end,
                                     const std::string& name) {
  auto warn = [&](absl::string_view what, const absl::Status& s) {
    const std::string message = absl::StrReplaceAll(s.message(), {{"\n", " "}});
    std::fprintf(stderr, "mlajit_bench: %s: graph_us skipped: %s: %s\n", name.c_str(),
                 std::string(what).c_str(), message.c_str());
    return 0.0;
  };
  if (absl::Status s = b->BeginCapture(dev, stream); !s.ok()) return warn("BeginCapture", s);
  const absl::Status decode = harness::FromC(mlajit_decode(plan, &args, stream));
  // Ended even when the decode failed, so that the stream leaves capture mode.
  absl::StatusOr<gpu::GraphHandle> graph = b->EndCapture(dev, stream);
  if (!decode.ok()) {
    if (graph.ok()) (void)b->DestroyGraph(dev, *graph);
    return warn("mlajit_decode while capturing", decode);
  }
  if (!graph.ok()) return warn("EndCapture", graph.status());
  // The first replay uploads the graph to the device; keep it out of the timing.
  absl::Status s = b->LaunchGraph(dev, *graph, stream);
  if (s.ok()) s = b->RecordEvent(dev, start, stream);
  for (int i = 0; i < runs && s.ok(); ++i) s = b->LaunchGraph(dev, *graph, stream);
  if (s.ok()) s = b->RecordEvent(dev, end, stream);
  if (s.ok()) s = b->StreamSynchronize(dev, stream);
  absl::StatusOr<float> ms = s.ok() ? b->ElapsedMs(start, end) : absl::StatusOr<float>(s);
  const absl::Status destroyed = b->DestroyGraph(dev, *graph);
  if (!ms.ok()) return ms.status();
  MLAJIT_RETURN_IF_ERROR(destroyed);
  return *ms * 1e3 / runs;
}

// NVML on the bench's device, or null (with the reason on stderr): the
// figures are the same either way, only the clock columns read "-".
std::unique_ptr<ClockMonitor> OpenClockMonitor(DecodeHarness& h) {
  absl::StatusOr<gpu::DeviceProperties> props = h.backend()->GetDeviceProperties(h.device());
  absl::StatusOr<std::unique_ptr<ClockMonitor>> m =
      props.ok() ? ClockMonitor::Open(props->pci_bus_id) : props.status();
  if (!m.ok()) {
    std::fprintf(stderr, "clocks: not reported: %s\n", std::string(m.status().message()).c_str());
    return nullptr;
  }
  std::fprintf(stderr, "clocks: %s\n", (*m)->Describe().c_str());
  return *std::move(m);
}

// mlajit_tune on the case's layout; the chosen shape and both timings go to
// stderr, the record to the cache directory.
absl::Status TuneCase(DecodeHarness& h, const Case& c) {
  const reference::Batch layout = reference::GenerateBatch(c.config);
  const mlajit_plan_config_t pc = harness::PlanConfigFor(c.config, layout.sm_scale, false);
  char* json = nullptr;
  MLAJIT_RETURN_IF_ERROR(harness::FromC(mlajit_tune(
      h.runtime(), &pc, c.config.batch_size, layout.qo_indptr.data(), layout.kv_indptr.data(),
      c.config.page_size != 0 ? layout.kv_lens.data() : nullptr, nullptr, &json)));
  std::fprintf(stderr, "tuned %s: %s\n", CaseName(c.config).c_str(), json);
  mlajit_free(json);
  return absl::OkStatus();
}

// The per-SM bounds of the schedule the plan described by `plan_json` runs
// on the device (schedule_report.h), DRAM at the read ceiling the floor uses.
absl::StatusOr<SmBounds> PlanBounds(DecodeHarness& h, const DeviceBatch& db,
                                    const BatchConfig& config, const std::string& plan_json,
                                    double read_bytes_per_second) {
  MLAJIT_ASSIGN_OR_RETURN(const gpu::DeviceProperties props,
                          h.backend()->GetDeviceProperties(h.device()));
  MLAJIT_ASSIGN_OR_RETURN(const plan::ScheduleConfig sc, ScheduleConfigOfPlan(plan_json));
  const reference::BatchLayout layout{db.batch.qo_indptr, db.batch.kv_indptr, db.batch.kv_lens};
  return ScheduleBounds(config, layout, sc, props.sm_count, read_bytes_per_second);
}

absl::StatusOr<CaseResult> RunCase(DecodeHarness& h, const Case& c, const Ceilings& ceilings,
                                   int runs, double warmup_ms, bool check, const StreamHold& hold,
                                   ClockMonitor* clocks, double power_ms) {
  CaseResult r;
  r.c = c;
  MLAJIT_ASSIGN_OR_RETURN(std::unique_ptr<DeviceBatch> db, h.Upload(c.config, false));
  CountWork(*db, ceilings, &r);
  char* plan_json = nullptr;
  MLAJIT_RETURN_IF_ERROR(harness::FromC(mlajit_plan_describe_json(db->plan, &plan_json)));
  r.plan_json = plan_json;
  mlajit_free(plan_json);
  if (absl::StatusOr<SmBounds> bounds =
          PlanBounds(h, *db, c.config, r.plan_json, ceilings.read.value);
      bounds.ok()) {
    r.bounds = *bounds;
  } else {
    std::fprintf(stderr, "mlajit_bench: %s: bound_us skipped: %s\n", CaseName(c.config).c_str(),
                 std::string(bounds.status().message()).c_str());
  }
  if (check) {
    MLAJIT_ASSIGN_OR_RETURN(harness::CaseResult cr, h.Check(*db, {false, 1, nullptr}));
    r.rel_err = cr.out.rel_l2;
    r.passed = cr.out.Passes(harness::OutputTolerance(c.config));
    r.checked = true;
  }
  gpu::Backend* b = h.backend();
  const int dev = h.device();
  // Rotate over copies of q and kv until the working set exceeds the L2 cache
  // four times over, so that no call finds its inputs cached by the previous.
  const double per_copy = static_cast<double>(db->batch.kv.size() + db->batch.q.size() * 2);
  r.copies = static_cast<int>(std::clamp(std::ceil(4 * kL2Bytes / per_copy), 1.0, 64.0));
  std::vector<DeviceBuffer> qs, kvs;
  for (int i = 1; i < r.copies; ++i) {
    MLAJIT_ASSIGN_OR_RETURN(DeviceBuffer q, DeviceBuffer::Allocate(b, dev, db->q.bytes()));
    MLAJIT_ASSIGN_OR_RETURN(DeviceBuffer kv, DeviceBuffer::Allocate(b, dev, db->kv.bytes()));
    MLAJIT_RETURN_IF_ERROR(b->MemcpyHtoD(dev, q.ptr(), db->batch.q.data(), db->q.bytes(), nullptr));
    MLAJIT_RETURN_IF_ERROR(
        b->MemcpyHtoD(dev, kv.ptr(), db->batch.kv.data(), db->kv.bytes(), nullptr));
    qs.push_back(std::move(q));
    kvs.push_back(std::move(kv));
  }
  auto args_for = [&](int i) {
    mlajit_decode_args_t a = db->args;
    const int k = i % r.copies;
    if (k > 0) {
      a.q = qs[k - 1].get();
      a.kv = kvs[k - 1].get();
    }
    return a;
  };
  gpu::StreamHandle stream = nullptr;
  MLAJIT_ASSIGN_OR_RETURN(stream, b->CreateStream(dev));
  std::vector<gpu::EventHandle> ev(2);  // the burst and the graph replays
  for (auto& e : ev) {
    MLAJIT_ASSIGN_OR_RETURN(e, b->CreateEvent(dev));
  }
  // Warm-up: at least 20 calls and warmup_ms of device time, so that the timed
  // calls run in the sustained clock state (device_timing.h).
  auto decode = [&](int i) {
    mlajit_decode_args_t a = args_for(i);
    return harness::FromC(mlajit_decode(db->plan, &a, stream));
  };
  MLAJIT_RETURN_IF_ERROR(WarmUp(b, dev, stream, decode, 20, warmup_ms).status());
  // Host cost per call; the stream is drained before each burst so that every
  // burst starts with an empty launch queue. Measured first: it sizes the hold.
  const int host_calls = std::min(runs, 100);
  std::vector<double> host_us(5);
  for (double& per_call : host_us) {
    MLAJIT_RETURN_IF_ERROR(b->StreamSynchronize(dev, stream));
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < host_calls; ++i) {
      mlajit_decode_args_t a = args_for(i);
      MLAJIT_RETURN_IF_ERROR(harness::FromC(mlajit_decode(db->plan, &a, stream)));
    }
    const auto t1 = std::chrono::steady_clock::now();
    per_call = std::chrono::duration<double, std::micro>(t1 - t0).count() / host_calls;
  }
  r.host_us = Median(host_us);
  r.hold_us = StreamHold::UsFor(r.host_us);
  // Per-call times, each call's kernels enqueued before its start event is
  // reached (stream_hold.h). The clock is sampled from the first enqueue
  // until the last call is done: the GPU runs behind the host, so the window
  // covers all timed calls.
  const EnqueueCall held = [&](int) { return hold.Enqueue(stream, r.hold_us); };
  auto timed_calls = [&](const EnqueueCall& before) -> absl::StatusOr<std::vector<double>> {
    MLAJIT_ASSIGN_OR_RETURN(std::vector<double> ms,
                            DeviceTimesMs(b, dev, stream, decode, runs, before));
    for (double& t : ms) t *= 1e3;
    return ms;
  };
  if (clocks != nullptr) clocks->Start();
  MLAJIT_ASSIGN_OR_RETURN(r.times_us, timed_calls(held));
  if (clocks != nullptr) r.clocks = clocks->Stop();
  r.median_us = Median(r.times_us);
  r.min_us = *std::min_element(r.times_us.begin(), r.times_us.end());
  // The same calls host-paced, as median_us was timed until RESULTS.md v33.
  MLAJIT_ASSIGN_OR_RETURN(std::vector<double> paced, timed_calls(nullptr));
  r.paced_us = Median(paced);
  // Burst: one pair of events around all calls; hides host launch gaps.
  MLAJIT_RETURN_IF_ERROR(b->RecordEvent(dev, ev[0], stream));
  for (int i = 0; i < runs; ++i) {
    mlajit_decode_args_t a = args_for(i);
    MLAJIT_RETURN_IF_ERROR(harness::FromC(mlajit_decode(db->plan, &a, stream)));
  }
  MLAJIT_RETURN_IF_ERROR(b->RecordEvent(dev, ev[1], stream));
  MLAJIT_RETURN_IF_ERROR(b->StreamSynchronize(dev, stream));
  MLAJIT_ASSIGN_OR_RETURN(float burst_ms, b->ElapsedMs(ev[0], ev[1]));
  r.burst_us = burst_ms * 1e3 / runs;
  // Graph replays; the burst's events have been read and may be recorded again.
  MLAJIT_ASSIGN_OR_RETURN(r.graph_us,
                          GraphReplayUs(b, dev, stream, db->plan, db->args, runs, ev[0],
                                        ev[1], CaseName(c.config)));
  // Power: calls back to back for power_ms, after everything timed above.
  if (power_ms > 0) {
    PowerWindow w;
    if (absl::Status s = MeasurePower(b, dev, stream, decode, clocks, power_ms, &w); s.ok()) {
      r.power = w;
    } else {
      std::fprintf(stderr, "%s: power: %s\n", CaseName(c.config).c_str(),
                   std::string(s.message()).c_str());
    }
  }
  for (auto e : ev) (void)b->DestroyEvent(dev, e);
  (void)b->DestroyStream(dev, stream);
  return r;
}

// Where a decode call's host time goes: the driver queries behind its device
// checks, timed on their own (µs per query, median of 5 bursts of 1000).
void HostCostBreakdown(DecodeHarness& h) {
  gpu::Backend* b = h.backend();
  const int dev = h.device();
  auto buffer = DeviceBuffer::Allocate(b, dev, 4096);
  auto stream = b->CreateStream(dev);
  if (!buffer.ok() || !stream.ok()) return;
  auto per_call_us = [](auto&& body) {
    std::vector<double> us(5);
    for (double& u : us) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 1000; ++i) body();
      u = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
          1000;
    }
    return Median(us);
  };
  volatile int sink = 0;
  const double pointer = per_call_us([&] { sink = sink + b->PointerDevice(buffer->get()); });
  const double stream_check = per_call_us([&] { sink = sink + b->CheckStream(dev, *stream).ok(); });
  const double restore = per_call_us([&] {
    gpu::ScopedDeviceRestore r(b);
    sink = sink + b->SetCurrentDevice(dev).ok();
  });
  std::printf(
      "host cost of the checks: pointer query %.3f us (5 per decode), stream check %.3f us, "
      "device bind + restore %.3f us\n",
      pointer, stream_check, restore);
  (void)b->DestroyStream(dev, *stream);
}

// Cold compile and warm disk load of the first case's kernel, in fresh runtimes
// over a fresh cache directory (so neither figure touches the steady state).
void FirstCallCosts(const Case& c) {
  char dir_template[] = "/tmp/mlajit-bench-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) return;
  reference::Batch batch = reference::GenerateBatch(c.config);
  auto time_plan = [&]() -> double {
    mlajit_cache_options_t co = MLAJIT_CACHE_OPTIONS_INIT;
    co.cache_dir = dir;
    mlajit_runtime_options_t ro = MLAJIT_RUNTIME_OPTIONS_INIT;
    ro.cache = &co;
    mlajit_runtime_t rt = nullptr;
    if (mlajit_runtime_create(&ro, &rt) != MLAJIT_STATUS_OK) return -1;
    mlajit_plan_config_t pc = MLAJIT_PLAN_CONFIG_INIT;
    pc.num_heads = c.config.num_heads;
    pc.kv_format = static_cast<mlajit_kv_format_t>(c.config.kv_format);
    pc.sm_scale = batch.sm_scale;
    mlajit_plan_t plan = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    const mlajit_status_t s =
        mlajit_plan_create(rt, &pc, c.config.batch_size, batch.qo_indptr.data(),
                           batch.kv_indptr.data(), nullptr, &plan);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    mlajit_plan_free(plan);
    mlajit_runtime_free(rt);
    return s == MLAJIT_STATUS_OK ? ms : -1;
  };
  const double cold = time_plan();
  const double warm = time_plan();
  std::printf("first call %s: cold compile + load %.1f ms, warm disk load %.1f ms\n",
              CaseName(c.config).c_str(), cold, warm);
}

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
      const std::string ms = next();
      if (!absl::SimpleAtod(ms, &warmup_ms) || !(warmup_ms >= 0 && warmup_ms <= 60000)) {
        std::fprintf(stderr, "mlajit_bench: --warmup-ms '%s': expected milliseconds in 0..60000\n",
                     ms.c_str());
        return 2;
      }
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
      const std::string ms = next();
      if (!absl::SimpleAtod(ms, &power_ms) || !(power_ms >= 100 && power_ms <= 60000)) {
        std::fprintf(stderr, "mlajit_bench: --power-ms '%s': expected milliseconds in 100..60000\n",
                     ms.c_str());
        return 2;
      }
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
  if (suites == "all") suites = "default,bf16,a8,mxfp4,paged64,paged1,heads128,skewed";
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
