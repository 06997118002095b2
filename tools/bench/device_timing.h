// Device-event timing shared by the benchmark's cases and its ceilings.
//
// Why a warm-up measured in time, not calls: under sustained load the H200
// holds its SM clock at 1980 MHz for about 60 ms, then the power cap steps it
// down (compute-bound decode cases run 11-14 % slower from then on,
// tools/bench/RESULTS.md v25). A window of a fixed number of calls straddles
// that step by a different share for every case and every run. Timing after
// enough warm-up time puts every window in the sustained state.
//
//   MLAJIT_RETURN_IF_ERROR(WarmUp(b, dev, stream, enqueue, 20, 200.0));
//   MLAJIT_ASSIGN_OR_RETURN(double ms, MedianDeviceMs(b, dev, stream, enqueue, 20));
#ifndef MLAJIT_TOOLS_BENCH_DEVICE_TIMING_H_
#define MLAJIT_TOOLS_BENCH_DEVICE_TIMING_H_

#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/gpu/backend.h"

namespace mlajit::bench {

// Two events on `device`, destroyed on every path.
//
//   EventPair ev(b, dev);
//   MLAJIT_RETURN_IF_ERROR(ev.Create());
//   ... RecordEvent(dev, ev.start(), s) ... RecordEvent(dev, ev.end(), s) ...
class EventPair {
 public:
  EventPair(gpu::Backend* b, int device) : b_(b), device_(device) {}
  ~EventPair();
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  absl::Status Create();
  gpu::EventHandle start() const { return start_; }
  gpu::EventHandle end() const { return end_; }

 private:
  gpu::Backend* b_;
  int device_;
  gpu::EventHandle start_ = 0, end_ = 0;
};

// Enqueues call number i (callers may rotate inputs by it).
using EnqueueCall = std::function<absl::Status(int i)>;

// At least `min_calls` calls of `enqueue`, then more until `min_ms` of device
// time has passed since the first; returns the number of calls made.
absl::StatusOr<int> WarmUp(gpu::Backend* backend, int device, gpu::StreamHandle stream,
                           const EnqueueCall& enqueue, int min_calls, double min_ms);

// The upper median of `v` (0 for none): what every timing of the bench reports.
double Median(std::vector<double> v);

// The device time (ms) of each of `runs` calls of `enqueue` on `stream`, in
// call order, each between its own pair of events. `before(i)`, when given,
// is enqueued ahead of call i's start event, outside its window (a
// StreamHold, stream_hold.h).
absl::StatusOr<std::vector<double>> DeviceTimesMs(gpu::Backend* backend, int device,
                                                  gpu::StreamHandle stream,
                                                  const EnqueueCall& enqueue, int runs,
                                                  const EnqueueCall& before = nullptr);

// The median of DeviceTimesMs.
absl::StatusOr<double> MedianDeviceMs(gpu::Backend* backend, int device, gpu::StreamHandle stream,
                                      const EnqueueCall& enqueue, int runs,
                                      const EnqueueCall& before = nullptr);

// WarmUp (20 calls and `warmup_ms`), then MedianDeviceMs, in microseconds: how
// the launch and chain floors time each of their kernels.
absl::StatusOr<double> WarmedMedianUs(gpu::Backend* backend, int device, gpu::StreamHandle stream,
                                      const EnqueueCall& enqueue, int runs, double warmup_ms,
                                      const EnqueueCall& before = nullptr);

}  // namespace mlajit::bench

#endif  // MLAJIT_TOOLS_BENCH_DEVICE_TIMING_H_
