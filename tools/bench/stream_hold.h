// Holds a stream busy for a while with a one-thread kernel, so that the host
// has enqueued a timed call's kernels before the stream reaches the call's
// start event. The events around the call then time the device alone.
//
// Why: the bench enqueues a call between two events. When the device finishes
// a call sooner than the host enqueues the next (small cases: a call takes
// 10-13 us on the device, its two launches and two events take several us on
// the host), the start event completes at once and the kernels arrive later,
// so the event-timed figure adds the host's enqueueing to the device's work
// (about 3 us, tools/bench/RESULTS.md v25). A hold before every start event
// keeps the host ahead, as nvbench's blocking kernel and the L2 flush between
// triton.testing.do_bench's calls do for their figures.
//
//   MLAJIT_ASSIGN_OR_RETURN(std::unique_ptr<StreamHold> hold, StreamHold::Load(b, 0));
//   MLAJIT_RETURN_IF_ERROR(hold->Enqueue(stream, 20.0));  // then: event, call, event
#ifndef MLAJIT_TOOLS_BENCH_STREAM_HOLD_H_
#define MLAJIT_TOOLS_BENCH_STREAM_HOLD_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/gpu/backend.h"
#include "tools/bench/bench_kernel.h"

namespace mlajit::bench {

class StreamHold {
 public:
  static absl::StatusOr<std::unique_ptr<StreamHold>> Load(gpu::Backend* backend, int device);

  // Enqueues one kernel of one thread that returns `us` microseconds after it
  // starts (by the device's global timer).
  absl::Status Enqueue(gpu::StreamHandle stream, double us) const;

  // How long a hold must be to keep the host ahead of calls costing the host
  // `host_us` each: the call, its two events and the hold's own launch, with
  // room for the host's jitter.
  static double UsFor(double host_us) { return 2 * host_us + 10; }

 private:
  StreamHold(gpu::Backend* backend, int device, std::unique_ptr<BenchKernel> kernel)
      : backend_(backend), device_(device), kernel_(std::move(kernel)) {}
  gpu::Backend* backend_;
  int device_;
  std::unique_ptr<BenchKernel> kernel_;
};

// The hold kernel's source (compiled by the CPU tests too).
const char* StreamHoldKernelSource();

}  // namespace mlajit::bench

#endif  // MLAJIT_TOOLS_BENCH_STREAM_HOLD_H_
