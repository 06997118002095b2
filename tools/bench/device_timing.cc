#include "tools/bench/device_timing.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "src/base/status_macros.h"

namespace mlajit::bench {

EventPair::~EventPair() {
  for (gpu::EventHandle e : {start_, end_}) {
    if (e != 0) (void)b_->DestroyEvent(device_, e);
  }
}

absl::Status EventPair::Create() {
  MLAJIT_ASSIGN_OR_RETURN(start_, b_->CreateEvent(device_));
  MLAJIT_ASSIGN_OR_RETURN(end_, b_->CreateEvent(device_));
  return absl::OkStatus();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

absl::StatusOr<int> WarmUp(gpu::Backend* backend, int device, gpu::StreamHandle stream,
                           const EnqueueCall& enqueue, int min_calls, double min_ms) {
  EventPair events(backend, device);
  MLAJIT_RETURN_IF_ERROR(events.Create());
  int calls = 0;
  double elapsed_ms = 0;
  int batch = std::max(1, min_calls);
  while (true) {
    MLAJIT_RETURN_IF_ERROR(backend->RecordEvent(device, events.start(), stream));
    for (int i = 0; i < batch; ++i) MLAJIT_RETURN_IF_ERROR(enqueue(calls + i));
    MLAJIT_RETURN_IF_ERROR(backend->RecordEvent(device, events.end(), stream));
    MLAJIT_RETURN_IF_ERROR(backend->StreamSynchronize(device, stream));
    MLAJIT_ASSIGN_OR_RETURN(float ms, backend->ElapsedMs(events.start(), events.end()));
    calls += batch;
    elapsed_ms += ms;
    if (elapsed_ms >= min_ms) return calls;
    // Enough calls for the rest at the rate seen so far (at least one), in
    // batches of at most 100 ms so that a first estimate far off costs little.
    const double per_call = std::max(elapsed_ms / calls, 1e-4);
    const double rest = std::min(min_ms - elapsed_ms, 100.0);
    batch = static_cast<int>(std::clamp(std::ceil(rest / per_call), 1.0, 1e6));
  }
}

absl::StatusOr<std::vector<double>> DeviceTimesMs(gpu::Backend* backend, int device,
                                                  gpu::StreamHandle stream,
                                                  const EnqueueCall& enqueue, int runs,
                                                  const EnqueueCall& before) {
  std::vector<gpu::EventHandle> events;
  absl::Status status;
  for (int i = 0; i < 2 * runs && status.ok(); ++i) {
    absl::StatusOr<gpu::EventHandle> e = backend->CreateEvent(device);
    if (e.ok()) events.push_back(*e);
    status = e.status();
  }
  for (int i = 0; i < runs && status.ok(); ++i) {
    if (before) status = before(i);
    if (status.ok()) status = backend->RecordEvent(device, events[2 * i], stream);
    if (status.ok()) status = enqueue(i);
    if (status.ok()) status = backend->RecordEvent(device, events[2 * i + 1], stream);
  }
  if (status.ok()) status = backend->StreamSynchronize(device, stream);
  std::vector<double> ms;
  for (int i = 0; i < runs && status.ok(); ++i) {
    absl::StatusOr<float> t = backend->ElapsedMs(events[2 * i], events[2 * i + 1]);
    if (t.ok()) ms.push_back(*t);
    status = t.status();
  }
  for (gpu::EventHandle e : events) (void)backend->DestroyEvent(device, e);
  MLAJIT_RETURN_IF_ERROR(status);
  if (ms.empty()) return absl::InvalidArgumentError("DeviceTimesMs: runs must be positive");
  return ms;
}

absl::StatusOr<double> MedianDeviceMs(gpu::Backend* backend, int device, gpu::StreamHandle stream,
                                      const EnqueueCall& enqueue, int runs,
                                      const EnqueueCall& before) {
  MLAJIT_ASSIGN_OR_RETURN(std::vector<double> ms,
                          DeviceTimesMs(backend, device, stream, enqueue, runs, before));
  return Median(std::move(ms));
}

absl::StatusOr<double> WarmedMedianUs(gpu::Backend* backend, int device, gpu::StreamHandle stream,
                                      const EnqueueCall& enqueue, int runs, double warmup_ms,
                                      const EnqueueCall& before) {
  MLAJIT_RETURN_IF_ERROR(WarmUp(backend, device, stream, enqueue, 20, warmup_ms).status());
  MLAJIT_ASSIGN_OR_RETURN(double ms,
                          MedianDeviceMs(backend, device, stream, enqueue, runs, before));
  return ms * 1e3;
}

}  // namespace mlajit::bench
