#include "tools/bench/launch_floor.h"

#include <cstdint>
#include <memory>

#include "absl/strings/str_format.h"
#include "src/base/status_macros.h"
#include "tools/bench/bench_kernel.h"
#include "tools/bench/device_timing.h"
#include "tools/bench/stream_hold.h"
#include "tools/harness/decode_harness.h"

namespace mlajit::bench {
namespace {

constexpr const char* kLaunchFloorSource = R"(
extern "C" __global__ void mlajit_launch_floor(unsigned* launches) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(__HIPCC_RTC__)
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
  if (blockIdx.x == 0 && threadIdx.x == 0) *launches += 1;
}
)";

constexpr unsigned kBlock = 128;  // the swap-AB decode's CTA
constexpr int kBurstPairs = 200;
// Longer than the host takes to enqueue three empty kernels and two events.
constexpr double kHoldUs = 30;

}  // namespace

const char* LaunchFloorKernelSource() { return kLaunchFloorSource; }

absl::StatusOr<LaunchFloor> MeasureLaunchFloor(gpu::Backend* backend, int device, double warmup_ms,
                                               int runs) {
  MLAJIT_ASSIGN_OR_RETURN(gpu::DeviceProperties props, backend->GetDeviceProperties(device));
  MLAJIT_ASSIGN_OR_RETURN(
      std::unique_ptr<BenchKernel> empty,
      BenchKernel::Load(backend, device, "mlajit_launch_floor", kLaunchFloorSource));
  const gpu::FunctionHandle kernel = empty->function();

  MLAJIT_ASSIGN_OR_RETURN(harness::DeviceBuffer counter,
                          harness::DeviceBuffer::Allocate(backend, device, sizeof(uint32_t)));
  gpu::ScopedStream stream(backend, device);
  MLAJIT_RETURN_IF_ERROR(stream.Create());
  MLAJIT_RETURN_IF_ERROR(backend->MemsetD8(device, counter.ptr(), 0, 4, stream.get()));
  gpu::DevicePtr counter_ptr = counter.ptr();
  void* args[] = {&counter_ptr};

  LaunchFloor f;
  f.grid = 2 * props.sm_count;
  // sm_90+ (the kernel's griddepcontrol); elsewhere the flag is ignored.
  f.dependent_launch = DependentLaunchOn(props);
  uint64_t launches = 0;
  auto launch = [&](unsigned grid, bool dependent) {
    gpu::LaunchConfig config;
    config.grid_x = grid;
    config.block_x = kBlock;
    config.programmatic_dependent = dependent && f.dependent_launch;
    ++launches;
    return backend->Launch(device, kernel, config, args, stream.get());
  };
  // A call of `kernels` launches; the first is not a dependent of the
  // previous call (the events sit between them), the others are if `chained`.
  auto call = [&](unsigned grid, int kernels, bool chained = true) {
    return [&launch, grid, kernels, chained](int) -> absl::Status {
      for (int k = 0; k < kernels; ++k) MLAJIT_RETURN_IF_ERROR(launch(grid, chained && k > 0));
      return absl::OkStatus();
    };
  };
  MLAJIT_ASSIGN_OR_RETURN(std::unique_ptr<StreamHold> hold, StreamHold::Load(backend, device));
  const EnqueueCall held = [&](int) { return hold->Enqueue(stream.get(), kHoldUs); };
  auto median_us = [&](const EnqueueCall& enqueue, const EnqueueCall& before = nullptr) {
    return WarmedMedianUs(backend, device, stream.get(), enqueue, runs, warmup_ms, before);
  };
  const unsigned grid = static_cast<unsigned>(f.grid);
  MLAJIT_ASSIGN_OR_RETURN(f.one_cta_us, median_us(call(1, 1)));
  MLAJIT_ASSIGN_OR_RETURN(f.full_grid_us, median_us(call(grid, 1)));
  MLAJIT_ASSIGN_OR_RETURN(f.two_chained_us, median_us(call(grid, 2)));
  MLAJIT_ASSIGN_OR_RETURN(f.three_chained_us, median_us(call(grid, 3)));
  MLAJIT_ASSIGN_OR_RETURN(f.two_plain_us, median_us(call(grid, 2, false)));
  MLAJIT_ASSIGN_OR_RETURN(f.three_plain_us, median_us(call(grid, 3, false)));
  MLAJIT_ASSIGN_OR_RETURN(f.held_one_cta_us, median_us(call(1, 1), held));
  MLAJIT_ASSIGN_OR_RETURN(f.held_full_grid_us, median_us(call(grid, 1), held));
  MLAJIT_ASSIGN_OR_RETURN(f.held_two_chained_us, median_us(call(grid, 2), held));
  MLAJIT_ASSIGN_OR_RETURN(f.held_three_chained_us, median_us(call(grid, 3), held));
  // Back to back: every launch after the first a dependent (or not), as
  // consecutive decode calls run in an engine.
  auto pairs = [&](bool chained) {
    return [&launch, grid, chained](int) -> absl::Status {
      for (int k = 0; k < 2 * kBurstPairs; ++k) {
        MLAJIT_RETURN_IF_ERROR(launch(grid, chained && k > 0));
      }
      return absl::OkStatus();
    };
  };
  MLAJIT_ASSIGN_OR_RETURN(double burst_us, median_us(pairs(true)));
  f.two_burst_us = burst_us / kBurstPairs;
  MLAJIT_ASSIGN_OR_RETURN(double burst_plain_us, median_us(pairs(false)));
  f.two_burst_plain_us = burst_plain_us / kBurstPairs;

  MLAJIT_RETURN_IF_ERROR(
      CheckLaunchCount(backend, device, stream.get(), counter.ptr(), launches, "launch floor"));
  return f;
}

std::string FormatLaunchFloor(const LaunchFloor& f) {
  return absl::StrFormat(
      "launch floor (empty kernels, event-timed medians, host-paced): 1 CTA %.2f us, %d CTAs %.2f "
      "us, "
      "2 chained %.2f us, 3 chained %.2f us; back to back %.2f us per pair (%s); "
      "in plain stream order: 2 %.2f us, 3 %.2f us, back to back %.2f us per pair; "
      "stream held before each call (device only): 1 CTA %.2f us, %d CTAs %.2f us, "
      "2 chained %.2f us, 3 chained %.2f us",
      f.one_cta_us, f.grid, f.full_grid_us, f.two_chained_us, f.three_chained_us, f.two_burst_us,
      f.dependent_launch ? "chained kernels are programmatic dependents"
                         : "no programmatic dependent launch",
      f.two_plain_us, f.three_plain_us, f.two_burst_plain_us, f.held_one_cta_us, f.grid,
      f.held_full_grid_us, f.held_two_chained_us, f.held_three_chained_us);
}

}  // namespace mlajit::bench
