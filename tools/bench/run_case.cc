#include "tools/bench/run_case.h"

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "mlajit/mlajit.h"
#include "src/base/mla_types.h"
#include "src/base/status_macros.h"
#include "tools/bench/device_timing.h"
#include "tools/bench/power.h"
#include "tools/bench/roofline.h"
#include "tools/bench/schedule_report.h"

namespace mlajit::bench {
namespace {

using harness::DecodeHarness;
using harness::DeviceBatch;
using harness::DeviceBuffer;
using reference::BatchConfig;

constexpr double kL2Bytes = 60e6;

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

}  // namespace

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
  MLAJIT_ASSIGN_OR_RETURN(r.graph_us, GraphReplayUs(b, dev, stream, db->plan, db->args, runs, ev[0],
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

}  // namespace mlajit::bench
