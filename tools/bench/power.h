// What a GPU draws while it runs one piece of work back to back, from NVML's
// energy counter (gpu_clocks.h), for `mlajit_bench --power`.
//
// Why the bench needs it: the long compute-bound cases run at the board's
// power limit (700 W on an H100 or H200 SXM), where the clock is whatever the
// limit allows (RESULTS.md v25, v76, v80), so such a case is as fast as the
// energy it takes per call lets it be. The energy a call takes, beside the
// watts of the cublasLt products and of the streaming read at their own
// ceilings and of SMs that only wait, says how much of a call's energy its
// products and its bytes account for and how much is the kernel's own.
//
//   PowerWindow w;
//   MLAJIT_RETURN_IF_ERROR(MeasurePower(b, dev, stream, enqueue, monitor, 1000.0, &w));
//   std::printf("%s\n", FormatPowerWindow("my kernel", w).c_str());
#ifndef MLAJIT_TOOLS_BENCH_POWER_H_
#define MLAJIT_TOOLS_BENCH_POWER_H_

#include <string>

#include "absl/status/statusor.h"
#include "src/gpu/backend.h"
#include "tools/bench/device_timing.h"
#include "tools/bench/gpu_clocks.h"

namespace mlajit::bench {

struct PowerWindow {
  double watts = 0;      // average over the window
  double device_ms = 0;  // the window's device time (events around all its calls)
  int calls = 0;         // in the window
  int enqueued = 0;      // every call made, the window's and a few before it to size its chunks
  ClockSummary clocks;   // over the window
  double JoulesPerCall() const { return calls > 0 ? watts * device_ms * 1e-3 / calls : 0; }
  double UsPerCall() const { return calls > 0 ? device_ms * 1e3 / calls : 0; }
};

// Calls of `enqueue` back to back on `stream`, in chunks of about 20 ms with a
// synchronisation between chunks, until `window_ms` of host time has passed;
// `sampler` (a ClockMonitor) samples the whole window. kFailedPrecondition when the energy
// counter did not change at least twice in it (no counter, or a window too
// short for the driver's update steps). `out->enqueued` counts the calls made
// on every path, errors included (the read ceiling's checksum needs it).
absl::Status MeasurePower(gpu::Backend* backend, int device, gpu::StreamHandle stream,
                          const EnqueueCall& enqueue, WindowSampler* sampler, double window_ms,
                          PowerWindow* out);

// The same for kernels in which every SM only waits on the global timer (four
// warps an SM, 2 ms a launch): the clocks up, next to nothing issued. What the
// board draws busy before any work.
absl::Status MeasureWaitingPower(gpu::Backend* backend, int device, WindowSampler* sampler,
                                 double window_ms, PowerWindow* out);

// "NAME: 612 W at 1545 MHz (power cap 100 % of the window), 1.520 ms a call,
// 0.930 J a call".
std::string FormatPowerWindow(const std::string& name, const PowerWindow& w);

// The JSON object of a window ("null" for none measured).
std::string PowerWindowJson(const PowerWindow* w);

}  // namespace mlajit::bench

#endif  // MLAJIT_TOOLS_BENCH_POWER_H_
