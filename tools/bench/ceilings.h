// The two ceilings the benchmark's roofline floor divides by, measured on the
// GPU at start rather than assumed:
//  - read bandwidth: a streaming-read kernel (16-byte loads, four in flight
//    per thread) over a buffer many times the L2 cache, compiled at run time
//    by the same compiler as the decode kernels. Its checksum of every word it
//    read is compared with the host's, so a kernel that skipped data cannot
//    report a bandwidth.
//  - tensor rates: cublasLt (loaded at run time) on an 8192^3 product with
//    e4m3 and with bf16 inputs, bf16 output, fp32 accumulation: the
//    "cuBLAS-class matmul" the targets are stated against. A few output
//    elements are checked against a host dot product.
// Each figure is the median of 20 timed runs (device events) after a warm-up
// of at least `warmup_ms` of device time (device_timing.h: the sustained
// state, where the power cap has settled the clock).
// A ceiling that cannot be measured (no cublasLt, an AMD GPU, a failed check)
// falls back to DESIGN.md §3's value for the H200, and says so.
//
//   Ceilings c = MeasureCeilings(backend, device, 200.0);   // never fails
//   floor_us = max(bytes / c.read.value, flops / c.fp8.value) * 1e6;
#ifndef MLAJIT_TOOLS_BENCH_CEILINGS_H_
#define MLAJIT_TOOLS_BENCH_CEILINGS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "src/gpu/backend.h"
#include "tools/bench/device_timing.h"

namespace mlajit::bench {

struct Ceiling {
  double value = 0;  // bytes/s or FLOP/s
  bool measured = false;
  std::string how;  // what was run, or why the assumed value is used
};

struct Ceilings {
  Ceiling read;  // bytes/s
  Ceiling fp8;   // FLOP/s, e4m3 inputs
  Ceiling bf16;  // FLOP/s, bf16 inputs
};

// Called after a ceiling's timed runs with its stream and its work, for more
// calls of the same work (the bench's power windows, power.h); returns how
// many calls it enqueued. `ceiling` is "read", "fp8" or "bf16".
using AfterCeiling = std::function<absl::StatusOr<int>(
    const char* ceiling, gpu::StreamHandle stream, const EnqueueCall& enqueue)>;

// DESIGN.md §3's figures, measured once on an H200: 4.45 TB/s, 1260 and 680
// TFLOP/s. `why` becomes each ceiling's `how`.
Ceilings AssumedCeilings(const std::string& why);

// Streaming read of min(2 GiB, an eighth of the device's memory); bytes/s.
absl::StatusOr<Ceiling> MeasureReadBandwidth(gpu::Backend* backend, int device, double warmup_ms,
                                             const AfterCeiling& after = nullptr);

enum class MatmulInputs { kFp8E4m3, kBf16 };
// cublasLt on an n x n x n product (n a multiple of 16); FLOP/s.
absl::StatusOr<Ceiling> MeasureMatmulRate(gpu::Backend* backend, int device, MatmulInputs inputs,
                                          double warmup_ms, int n = 8192,
                                          const AfterCeiling& after = nullptr);

// All three, each falling back to its assumed value (the reason on stderr).
Ceilings MeasureCeilings(gpu::Backend* backend, int device, double warmup_ms,
                         const AfterCeiling& after = nullptr);

// The check of one output element, exposed for the CPU tests (the inputs
// and outputs are decoded with reference::Fp8E4m3ToFloat and Bf16ToFloat).
// |got - want| within bf16 output rounding plus fp32 accumulation-order error
// of a dot product whose terms' magnitudes sum to `abs_sum`.
bool MatmulElementClose(double got, double want, double abs_sum);
// The streaming-read kernel's source (entry point "mlajit_stream_read").
const char* StreamReadKernelSource();
// The streaming read's expected checksum: the 32-bit sum of every 4-byte word
// of `bytes` bytes filled with `fill`, over `passes` passes.
uint32_t ExpectedReadChecksum(uint64_t bytes, uint8_t fill, int passes);

}  // namespace mlajit::bench

#endif  // MLAJIT_TOOLS_BENCH_CEILINGS_H_
