#include "tools/bench/power.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/base/status_macros.h"
#include "tools/bench/bench_kernel.h"
#include "tools/bench/stream_hold.h"

namespace mlajit::bench {
namespace {

constexpr double kChunkMs = 20;     // device time between the window's synchronisations
constexpr int kWaitWarpsPerSm = 4;  // MeasureWaitingPower's kernel
constexpr double kWaitLaunchUs = 2000;

}  // namespace

absl::Status MeasurePower(gpu::Backend* backend, int device, gpu::StreamHandle stream,
                          const EnqueueCall& enqueue, WindowSampler* sampler, double window_ms,
                          PowerWindow* out) {
  *out = PowerWindow{};
  PowerWindow& w = *out;
  if (sampler == nullptr) {
    return absl::FailedPreconditionError("no NVML monitor: power is not measured");
  }
  if (!(window_ms >= 100 && window_ms <= 60000)) {
    return absl::InvalidArgumentError(
        absl::StrCat("power window ", window_ms, " ms: expected 100..60000"));
  }
  EventPair ev(backend, device);
  MLAJIT_RETURN_IF_ERROR(ev.Create());
  // Size the chunks from a few calls.
  constexpr int kProbeCalls = 4;
  MLAJIT_RETURN_IF_ERROR(backend->StreamSynchronize(device, stream));
  MLAJIT_RETURN_IF_ERROR(backend->RecordEvent(device, ev.start(), stream));
  for (int i = 0; i < kProbeCalls; ++i) {
    MLAJIT_RETURN_IF_ERROR(enqueue(i));
    ++w.enqueued;
  }
  MLAJIT_RETURN_IF_ERROR(backend->RecordEvent(device, ev.end(), stream));
  MLAJIT_RETURN_IF_ERROR(backend->StreamSynchronize(device, stream));
  MLAJIT_ASSIGN_OR_RETURN(float probe_ms, backend->ElapsedMs(ev.start(), ev.end()));
  const double per_call_ms = std::max(1e-4, static_cast<double>(probe_ms) / kProbeCalls);
  const int chunk = static_cast<int>(std::clamp(std::ceil(kChunkMs / per_call_ms), 1.0, 4096.0));

  sampler->Start();
  const auto t0 = std::chrono::steady_clock::now();
  absl::Status s = backend->RecordEvent(device, ev.start(), stream);
  while (s.ok()) {
    for (int i = 0; i < chunk && s.ok(); ++i) {
      s = enqueue(w.calls + i);
      w.enqueued += s.ok();
    }
    if (!s.ok()) break;
    w.calls += chunk;
    s = backend->StreamSynchronize(device, stream);
    if (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() >=
        window_ms) {
      break;
    }
  }
  if (s.ok()) s = backend->RecordEvent(device, ev.end(), stream);
  if (s.ok()) s = backend->StreamSynchronize(device, stream);
  w.clocks = sampler->Stop();
  MLAJIT_RETURN_IF_ERROR(s);
  MLAJIT_ASSIGN_OR_RETURN(float ms, backend->ElapsedMs(ev.start(), ev.end()));
  w.device_ms = ms;
  w.watts = w.clocks.watts;
  if (w.clocks.energy_steps < 2 || w.watts <= 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "NVML's energy counter changed %d times in a %.0f ms window: no power figure (a driver "
        "without the counter, or a window too short for its steps)",
        w.clocks.energy_steps, window_ms));
  }
  return absl::OkStatus();
}

absl::Status MeasureWaitingPower(gpu::Backend* backend, int device, WindowSampler* sampler,
                                 double window_ms, PowerWindow* out) {
  MLAJIT_ASSIGN_OR_RETURN(gpu::DeviceProperties props, backend->GetDeviceProperties(device));
  MLAJIT_ASSIGN_OR_RETURN(
      std::unique_ptr<BenchKernel> wait,
      BenchKernel::Load(backend, device, "mlajit_stream_hold", StreamHoldKernelSource()));
  gpu::ScopedStream stream(backend, device);
  MLAJIT_RETURN_IF_ERROR(stream.Create());
  uint64_t ns = static_cast<uint64_t>(kWaitLaunchUs * 1e3);
  void* args[] = {&ns};
  gpu::LaunchConfig config;
  config.grid_x = props.sm_count;
  config.block_x = 32 * kWaitWarpsPerSm;
  const gpu::FunctionHandle f = wait->function();
  auto launch = [&](int) { return backend->Launch(device, f, config, args, stream.get()); };
  return MeasurePower(backend, device, stream.get(), launch, sampler, window_ms, out);
}

std::string FormatPowerWindow(const std::string& name, const PowerWindow& w) {
  const ClockSummary& k = w.clocks;
  return absl::StrFormat(
      "%s: %.0f W at %u MHz (%u-%u; slowed %.0f %% of the window: %s), %.3f ms a call, "
      "%.4f J a call, %d calls in %.0f ms",
      name, w.watts, k.sm_mhz_median, k.sm_mhz_min, k.sm_mhz_max, 100 * k.slowed,
      ClockReasonNames(k.reasons), w.UsPerCall() * 1e-3, w.JoulesPerCall(), w.calls, w.device_ms);
}

std::string PowerWindowJson(const PowerWindow* w) {
  if (w == nullptr) return "null";
  return absl::StrFormat(
      "{\"watts\":%.2f,\"device_ms\":%.3f,\"calls\":%d,\"us_per_call\":%.4f,"
      "\"joules_per_call\":%.6g,\"sm_mhz_median\":%u,\"slowed\":%.4f,\"energy_steps\":%d}",
      w->watts, w->device_ms, w->calls, w->UsPerCall(), w->JoulesPerCall(), w->clocks.sm_mhz_median,
      w->clocks.slowed, w->clocks.energy_steps);
}

}  // namespace mlajit::bench
