#include "tools/bench/ceilings.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/base/status_macros.h"
#include "tools/bench/bench_kernel.h"
#include "tools/bench/design_rates.h"
#include "tools/bench/device_timing.h"
#include "tools/harness/decode_harness.h"

namespace mlajit::bench {
namespace {

constexpr int kWarmupCalls = 3;
constexpr int kTimedRuns = 20;
constexpr uint64_t kMaxReadBytes = uint64_t{2} << 30;
constexpr unsigned kReadBlock = 512;

// Every 16-byte word of `data` is read once, four loads in flight per thread;
// the 32-bit sum of all words goes to `checksum` (shared-memory atomics per
// block, then one global atomic per block), which keeps the loads alive and
// lets the host check that nothing was skipped. Plain C++ without headers, so
// that NVRTC and hiprtc both take it.
constexpr const char* kStreamReadSource = R"(
struct alignas(16) Words { unsigned x, y, z, w; };

__device__ __forceinline__ unsigned Sum(const Words& v) { return v.x + v.y + v.z + v.w; }

extern "C" __global__ void mlajit_stream_read(const Words* __restrict__ data,
                                              unsigned long long count,
                                              unsigned* __restrict__ checksum) {
  __shared__ unsigned block_sum;
  if (threadIdx.x == 0) block_sum = 0;
  __syncthreads();
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  unsigned sum = 0;
  for (; i + 3 * stride < count; i += 4 * stride) {
    const Words a = data[i], b = data[i + stride], c = data[i + 2 * stride],
                d = data[i + 3 * stride];
    sum += Sum(a) + Sum(b) + Sum(c) + Sum(d);
  }
  for (; i < count; i += stride) sum += Sum(data[i]);
  atomicAdd(&block_sum, sum);
  __syncthreads();
  if (threadIdx.x == 0) atomicAdd(checksum, block_sum);
}
)";

}  // namespace

Ceilings AssumedCeilings(const std::string& why) {
  Ceilings c;
  c.read = {kDesignReadBytesPerSecond, false, why};
  c.fp8 = {kDesignFp8FlopsPerSecond, false, why};
  c.bf16 = {kDesignBf16FlopsPerSecond, false, why};
  return c;
}

const char* StreamReadKernelSource() { return kStreamReadSource; }

uint32_t ExpectedReadChecksum(uint64_t bytes, uint8_t fill, int passes) {
  const uint32_t word = uint32_t{fill} * 0x01010101u;
  // Unsigned arithmetic wraps modulo 2^32, as the device's atomics do.
  return static_cast<uint32_t>(bytes / 4) * word * static_cast<uint32_t>(passes);
}

absl::StatusOr<Ceiling> MeasureReadBandwidth(gpu::Backend* backend, int device, double warmup_ms,
                                             const AfterCeiling& after) {
  MLAJIT_ASSIGN_OR_RETURN(gpu::DeviceProperties props, backend->GetDeviceProperties(device));
  MLAJIT_ASSIGN_OR_RETURN(
      std::unique_ptr<BenchKernel> read,
      BenchKernel::Load(backend, device, "mlajit_stream_read", kStreamReadSource));
  const gpu::FunctionHandle kernel = read->function();

  // A multiple of one grid-wide pass of 16-byte loads, so every thread takes
  // the unrolled loop the same number of times.
  const unsigned threads_per_sm = std::max(props.max_threads_per_sm, static_cast<int>(kReadBlock));
  const unsigned grid = props.sm_count * (threads_per_sm / kReadBlock);
  const uint64_t pass_bytes = uint64_t{grid} * kReadBlock * 16 * 4;
  const uint64_t want = std::min<uint64_t>(kMaxReadBytes, props.total_memory / 8);
  const uint64_t bytes = std::max<uint64_t>(1, want / pass_bytes) * pass_bytes;
  constexpr uint8_t kFill = 0x5b;

  MLAJIT_ASSIGN_OR_RETURN(harness::DeviceBuffer data,
                          harness::DeviceBuffer::Allocate(backend, device, bytes));
  MLAJIT_ASSIGN_OR_RETURN(harness::DeviceBuffer checksum,
                          harness::DeviceBuffer::Allocate(backend, device, sizeof(uint32_t)));
  gpu::ScopedStream stream(backend, device);
  MLAJIT_RETURN_IF_ERROR(stream.Create());
  MLAJIT_RETURN_IF_ERROR(backend->MemsetD8(device, data.ptr(), kFill, bytes, stream.get()));
  MLAJIT_RETURN_IF_ERROR(backend->MemsetD8(device, checksum.ptr(), 0, 4, stream.get()));

  gpu::DevicePtr data_ptr = data.ptr(), checksum_ptr = checksum.ptr();
  unsigned long long count = bytes / 16;
  void* args[] = {&data_ptr, &count, &checksum_ptr};
  gpu::LaunchConfig config;
  config.grid_x = grid;
  config.block_x = kReadBlock;
  auto launch = [&](int) { return backend->Launch(device, kernel, config, args, stream.get()); };
  MLAJIT_ASSIGN_OR_RETURN(int warmup_calls,
                          WarmUp(backend, device, stream.get(), launch, kWarmupCalls, warmup_ms));
  MLAJIT_ASSIGN_OR_RETURN(double ms,
                          MedianDeviceMs(backend, device, stream.get(), launch, kTimedRuns));
  int after_calls = 0;
  if (after) {
    MLAJIT_ASSIGN_OR_RETURN(after_calls, after("read", stream.get(), launch));
  }
  uint32_t got = 0;
  MLAJIT_RETURN_IF_ERROR(backend->MemcpyDtoH(device, &got, checksum.ptr(), 4, stream.get()));
  MLAJIT_RETURN_IF_ERROR(backend->StreamSynchronize(device, stream.get()));
  const uint32_t expected =
      ExpectedReadChecksum(bytes, kFill, warmup_calls + kTimedRuns + after_calls);
  if (got != expected) {
    return absl::InternalError(absl::StrFormat(
        "streaming read: checksum 0x%08x, expected 0x%08x: the kernel did not read every word", got,
        expected));
  }
  return Ceiling{bytes / (ms * 1e-3), true,
                 absl::StrFormat("streaming read of %.2f GiB, 16-byte loads, %u CTAs x %u, "
                                 "median of %d after %.0f ms",
                                 bytes / double(1 << 30), grid, kReadBlock, kTimedRuns, warmup_ms)};
}

Ceilings MeasureCeilings(gpu::Backend* backend, int device, double warmup_ms,
                         const AfterCeiling& after) {
  const Ceilings assumed = AssumedCeilings("");
  Ceilings c;
  auto take = [&](const char* name, absl::StatusOr<Ceiling> measured, const Ceiling& fallback,
                  Ceiling* out) {
    if (measured.ok()) {
      *out = *measured;
      return;
    }
    const std::string why = std::string(measured.status().message());
    std::fprintf(stderr, "ceilings: %s not measured (%s); using DESIGN.md's H200 figure\n", name,
                 why.c_str());
    *out = {fallback.value, false, absl::StrCat("assumed (DESIGN.md, H200): ", why)};
  };
  take("read bandwidth", MeasureReadBandwidth(backend, device, warmup_ms, after), assumed.read,
       &c.read);
  take("fp8 matmul rate",
       MeasureMatmulRate(backend, device, MatmulInputs::kFp8E4m3, warmup_ms, 8192, after),
       assumed.fp8, &c.fp8);
  take("bf16 matmul rate",
       MeasureMatmulRate(backend, device, MatmulInputs::kBf16, warmup_ms, 8192, after),
       assumed.bf16, &c.bf16);
  return c;
}

bool MatmulElementClose(double got, double want, double abs_sum) {
  // bf16 output: 2^-8 relative rounding; fp32 accumulation over any order:
  // well under 1e-4 of the terms' magnitude sum at these sizes.
  return std::abs(got - want) <= std::abs(want) * (1.0 / 256) + abs_sum * 1e-4;
}

}  // namespace mlajit::bench
