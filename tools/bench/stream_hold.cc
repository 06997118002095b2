#include "tools/bench/stream_hold.h"

#include <cmath>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"

namespace mlajit::bench {
namespace {

// NVIDIA: %globaltimer counts nanoseconds. AMD: wall_clock64() counts at the
// wall clock's rate, 100 MHz on CDNA2/3, so one tick is 10 ns there.
constexpr const char* kStreamHoldSource = R"(
extern "C" __global__ void mlajit_stream_hold(unsigned long long ns) {
#if defined(__HIPCC_RTC__)
  const unsigned long long ticks = ns / 10, t0 = wall_clock64();
  while (wall_clock64() - t0 < ticks) {
  }
#else
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
#endif
}
)";

}  // namespace

const char* StreamHoldKernelSource() { return kStreamHoldSource; }

absl::StatusOr<std::unique_ptr<StreamHold>> StreamHold::Load(gpu::Backend* backend, int device) {
  MLAJIT_ASSIGN_OR_RETURN(std::unique_ptr<BenchKernel> kernel,
                          BenchKernel::Load(backend, device, "mlajit_stream_hold",
                                            kStreamHoldSource));
  return std::unique_ptr<StreamHold>(new StreamHold(backend, device, std::move(kernel)));
}

absl::Status StreamHold::Enqueue(gpu::StreamHandle stream, double us) const {
  if (!(us >= 0 && us < 1e6)) {
    return absl::InvalidArgumentError(
        absl::StrCat("StreamHold: us=", us, ": expected microseconds in [0, 1e6)"));
  }
  uint64_t ns = static_cast<uint64_t>(std::llround(us * 1e3));
  void* args[] = {&ns};
  gpu::LaunchConfig config;  // one thread
  return backend_->Launch(device_, kernel_->function(), config, args, stream);
}

}  // namespace mlajit::bench
