#include "tools/bench/step_graph.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "src/base/mla_types.h"
#include "src/base/status_macros.h"
#include "tools/bench/device_timing.h"

namespace mlajit::bench {
namespace {

using harness::DeviceBuffer;
using harness::FromC;

template <typename T>
absl::StatusOr<DeviceBuffer> Upload(gpu::Backend* b, int dev, const std::vector<T>& v) {
  MLAJIT_ASSIGN_OR_RETURN(DeviceBuffer d, DeviceBuffer::Allocate(b, dev, v.size() * sizeof(T)));
  if (!v.empty()) {
    MLAJIT_RETURN_IF_ERROR(b->MemcpyHtoD(dev, d.ptr(), v.data(), v.size() * sizeof(T), nullptr));
  }
  return d;
}

// The plan's tile rows, from its description.
absl::StatusOr<int> PlanBlockM(mlajit_plan_t plan) {
  char* json = nullptr;
  MLAJIT_RETURN_IF_ERROR(FromC(mlajit_plan_describe_json(plan, &json)));
  const std::string text(json);
  mlajit_free(json);
  const std::string field = "\"block_m\":";
  const size_t at = text.find(field);
  int block_m = 0;
  if (at == std::string::npos ||
      !absl::SimpleAtoi(text.substr(at + field.size(), text.find(',', at) - at - field.size()),
                        &block_m)) {
    return absl::InternalError(absl::StrCat("no block_m in the plan's description: ", text));
  }
  return block_m;
}

}  // namespace

absl::Status RunStepGraph(harness::DecodeHarness& h, const reference::BatchConfig& config,
                          int layers, int replays, int kv_len_hint) {
  gpu::Backend* b = h.backend();
  const int dev = h.device();
  const reference::Batch batch = reference::GenerateBatch(config);
  const int batch_size = static_cast<int>(batch.qo_indptr.size()) - 1;

  const mlajit_plan_config_t pc = harness::PlanConfigFor(config, batch.sm_scale, false);
  mlajit_plan_limits_t lim = MLAJIT_PLAN_LIMITS_INIT;
  lim.max_batch_size = batch_size;
  lim.max_q_len = config.q_len;
  lim.kv_len_hint = kv_len_hint;
  mlajit_plan_t plan = nullptr;
  MLAJIT_RETURN_IF_ERROR(FromC(mlajit_plan_create_device(h.runtime(), &pc, &lim, &plan)));
  struct PlanFree {
    mlajit_plan_t p;
    ~PlanFree() { mlajit_plan_free(p); }
  } plan_free{plan};
  MLAJIT_ASSIGN_OR_RETURN(const int block_m, PlanBlockM(plan));

  MLAJIT_ASSIGN_OR_RETURN(DeviceBuffer qo, Upload(b, dev, batch.qo_indptr));
  MLAJIT_ASSIGN_OR_RETURN(DeviceBuffer kv_indptr, Upload(b, dev, batch.kv_indptr));
  MLAJIT_ASSIGN_OR_RETURN(DeviceBuffer kv_lens, Upload(b, dev, batch.kv_lens));
  MLAJIT_ASSIGN_OR_RETURN(DeviceBuffer kv_indices, Upload(b, dev, batch.kv_indices));
  // One Q, KV cache and output per layer, as in a model (and far beyond L2).
  std::vector<DeviceBuffer> qs, kvs, outs;
  std::vector<mlajit_decode_args_t> args(layers);
  const size_t out_bytes = static_cast<size_t>(batch.total_q()) * config.num_heads * kHeadDimV * 2;
  for (int l = 0; l < layers; ++l) {
    MLAJIT_ASSIGN_OR_RETURN(DeviceBuffer q, Upload(b, dev, batch.q));
    MLAJIT_ASSIGN_OR_RETURN(DeviceBuffer kv, Upload(b, dev, batch.kv));
    MLAJIT_ASSIGN_OR_RETURN(DeviceBuffer out, DeviceBuffer::Allocate(b, dev, out_bytes));
    mlajit_decode_args_t& a = args[l];
    a = MLAJIT_DECODE_ARGS_INIT;
    a.q = q.get();
    a.kv = kv.get();
    a.kv_scale = batch.kv_scale;
    a.kv_indices = config.page_size > 0 ? static_cast<const int32_t*>(kv_indices.get()) : nullptr;
    a.out = out.get();
    qs.push_back(std::move(q));
    kvs.push_back(std::move(kv));
    outs.push_back(std::move(out));
  }
  MLAJIT_RETURN_IF_ERROR(b->StreamSynchronize(dev, nullptr));
  MLAJIT_ASSIGN_OR_RETURN(gpu::StreamHandle stream, b->CreateStream(dev));
  MLAJIT_ASSIGN_OR_RETURN(gpu::EventHandle start, b->CreateEvent(dev));
  MLAJIT_ASSIGN_OR_RETURN(gpu::EventHandle end, b->CreateEvent(dev));
  const int32_t* lens = config.page_size > 0 ? static_cast<const int32_t*>(kv_lens.get()) : nullptr;
  auto enqueue_step = [&]() -> absl::Status {
    MLAJIT_RETURN_IF_ERROR(FromC(
        mlajit_plan_update_async(plan, batch_size, static_cast<const int32_t*>(qo.get()),
                                 static_cast<const int32_t*>(kv_indptr.get()), lens, stream)));
    for (const mlajit_decode_args_t& a : args) {
      MLAJIT_RETURN_IF_ERROR(FromC(mlajit_decode(plan, &a, stream)));
    }
    return absl::OkStatus();
  };
  auto timed = [&](auto&& body) -> absl::StatusOr<double> {
    MLAJIT_RETURN_IF_ERROR(b->RecordEvent(dev, start, stream));
    MLAJIT_RETURN_IF_ERROR(body());
    MLAJIT_RETURN_IF_ERROR(b->RecordEvent(dev, end, stream));
    MLAJIT_RETURN_IF_ERROR(b->StreamSynchronize(dev, stream));
    MLAJIT_ASSIGN_OR_RETURN(float ms, b->ElapsedMs(start, end));
    return ms * 1e3;
  };

  // Eager: the step's calls one by one (device time and host enqueue time).
  MLAJIT_RETURN_IF_ERROR(enqueue_step());  // warm-up
  std::vector<double> eager_us, host_us, graph_us;
  for (int r = 0; r < replays; ++r) {
    std::chrono::steady_clock::time_point t0, t1;
    MLAJIT_ASSIGN_OR_RETURN(double us, timed([&]() -> absl::Status {
                              t0 = std::chrono::steady_clock::now();
                              absl::Status s = enqueue_step();
                              t1 = std::chrono::steady_clock::now();
                              return s;
                            }));
    eager_us.push_back(us);
    host_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  MLAJIT_RETURN_IF_ERROR(FromC(mlajit_plan_check_update(plan, stream)));

  // Captured once, replayed.
  MLAJIT_RETURN_IF_ERROR(b->BeginCapture(dev, stream));
  const absl::Status captured = enqueue_step();
  absl::StatusOr<gpu::GraphHandle> step = b->EndCapture(dev, stream);
  MLAJIT_RETURN_IF_ERROR(captured);
  if (!step.ok()) return step.status();
  absl::Status s = b->LaunchGraph(dev, *step, stream);  // uploads the graph
  for (int r = 0; r < replays && s.ok(); ++r) {
    absl::StatusOr<double> us = timed([&] { return b->LaunchGraph(dev, *step, stream); });
    if (!us.ok()) {
      s = us.status();
    } else {
      graph_us.push_back(*us);
    }
  }
  const absl::Status destroyed = b->DestroyGraph(dev, *step);
  (void)b->DestroyEvent(dev, start);
  (void)b->DestroyEvent(dev, end);
  (void)b->DestroyStream(dev, stream);
  MLAJIT_RETURN_IF_ERROR(s);
  MLAJIT_RETURN_IF_ERROR(destroyed);

  const double graph = Median(graph_us), eager = Median(eager_us), host = Median(host_us);
  const std::string hint =
      kv_len_hint > 0 ? absl::StrCat("kv_len_hint ", kv_len_hint) : std::string("no hint");
  std::printf(
      "step of %d layers (%d,%d,%d,%d) %s%s, %s, %d-row tiles: graph replay %.1f us (%.2f "
      "us/layer), eager %.1f us, host enqueue %.1f us (%.2f us/call), medians of %d\n",
      layers, config.batch_size, config.q_len, config.kv_len, config.num_heads,
      std::string(KvFormatName(config.kv_format)).c_str(),
      config.page_size ? absl::StrCat(" p", config.page_size).c_str() : "", hint.c_str(), block_m,
      graph, graph / layers, eager, host, host / (layers + 1), replays);
  return absl::OkStatus();
}

}  // namespace mlajit::bench
