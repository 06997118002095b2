#include "tools/bench/chain_floor.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/str_format.h"
#include "src/base/status_macros.h"
#include "tools/bench/bench_kernel.h"
#include "tools/bench/device_timing.h"
#include "tools/bench/stream_hold.h"
#include "tools/harness/decode_harness.h"

namespace mlajit::bench {
namespace {

// The decode-shaped kernel: CTA b reads its record (where its Q rows and KV
// tiles are, which partial slot it fills), copies Q and the tiles into shared
// memory with every copy in flight at once, and once they have landed stores
// its partial rows (f16, 512 per row) and their LSEs. The merge-shaped kernel:
// one 32-lane group per (row, quarter of the row), the LSEs and partials of
// every split loaded before any is used (as mla_combine.cuh does), then one
// 8-byte store of bf16 per lane. Both wait for their predecessor and release
// their dependents first, as the library's kernels do. Shared memory is 32 KB
// and the copies wrap around it: only the last word each thread reads back
// matters, so that the stores depend on the copies having landed.
constexpr const char* kChainFloorSource = R"(
struct alignas(16) Words { unsigned x, y, z, w; };
struct alignas(8) Pair { unsigned x, y; };
struct alignas(16) Record { int kv, q, slot, pad; };  // kv and q in 16-byte units

__device__ __forceinline__ void DependentLaunch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(__HIPCC_RTC__)
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void Copy16(Words* dst, const Words* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(__HIPCC_RTC__)
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src) : "memory");
#else
  *dst = *src;
#endif
}

__device__ __forceinline__ void CopiesLanded() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(__HIPCC_RTC__)
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
  __syncthreads();
}

__device__ __forceinline__ float HalfBits(unsigned h) {  // f16 -> f32, normal numbers and zero
  const unsigned e = (h >> 10) & 31u;
  const unsigned magnitude = e == 0 ? 0u : ((e + 112u) << 23) | ((h & 0x3ffu) << 13);
  const unsigned bits = ((h & 0x8000u) << 16) | magnitude;
  return __uint_as_float(bits);
}

constexpr int kStageWords = 2048;  // 32 KB

extern "C" __global__ void mlajit_chain_decode(const Record* records, const Words* kv,
                                               const Words* q, Words* partial_o,
                                               float* partial_lse, int active, int q_words,
                                               int kv_words, int rows, unsigned* launches) {
  __shared__ Words stage[kStageWords];
  DependentLaunch();
  if (blockIdx.x == 0 && threadIdx.x == 0) *launches += 1;
  if (static_cast<int>(blockIdx.x) >= active) return;
  const Record rec = records[blockIdx.x];
  const int t = threadIdx.x, n = blockDim.x;
  for (int i = t; i < q_words; i += n) Copy16(&stage[i % kStageWords], q + rec.q + i);
  for (int i = t; i < kv_words; i += n) {
    Copy16(&stage[(q_words + i) % kStageWords], kv + rec.kv + i);
  }
  CopiesLanded();
  const Words v = stage[t % kStageWords];
  const int row_words = 512 * 2 / 16;
  Words* out = partial_o + static_cast<long long>(rec.slot) * rows * row_words;
  for (int i = t; i < rows * row_words; i += n) out[i] = v;
  if (t < rows) partial_lse[rec.slot * rows + t] = __uint_as_float(v.x & 0x80000000u);
}

extern "C" __global__ void mlajit_chain_merge(const Pair* partial_o, const float* partial_lse,
                                              Pair* out, int row_tiles, int splits, int rows,
                                              unsigned* launches) {
  constexpr int MAX_SPLITS = 8;
  DependentLaunch();
  if (blockIdx.x == 0 && threadIdx.x == 0) *launches += 1;
  const int lane = threadIdx.x & 31;
  const int units = row_tiles * rows * 4;
  const int groups = gridDim.x * (blockDim.x / 32);
  for (int u = blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5); u < units; u += groups) {
    const int tile = u / (rows * 4), r = (u / 4) % rows, quarter = u % 4;
    const int col = quarter * 32 + lane;  // in 4-value (8-byte) units of a 512-value row
    float l[MAX_SPLITS];
    Pair v[MAX_SPLITS];
#pragma unroll
    for (int k = 0; k < MAX_SPLITS; ++k) {
      l[k] = -__int_as_float(0x7f800000);
      v[k].x = v[k].y = 0;
      if (k < splits) {
        const int slot = tile * splits + k;
        l[k] = partial_lse[slot * rows + r];
        v[k] = partial_o[(static_cast<long long>(slot) * rows + r) * 128 + col];
      }
    }
    float mx = l[0];
#pragma unroll
    for (int k = 1; k < MAX_SPLITS; ++k) mx = fmaxf(mx, l[k]);
    float acc[4] = {0, 0, 0, 0}, wsum = 0;
#pragma unroll
    for (int k = 0; k < MAX_SPLITS; ++k) {
      const float w = k < splits ? __expf(l[k] - mx) : 0.0f;
      wsum += w;
      acc[0] += w * HalfBits(v[k].x & 0xffffu);
      acc[1] += w * HalfBits(v[k].x >> 16);
      acc[2] += w * HalfBits(v[k].y & 0xffffu);
      acc[3] += w * HalfBits(v[k].y >> 16);
    }
    const float inv = wsum > 0 ? 1.0f / wsum : 0.0f;
    Pair o;
    o.x = (__float_as_uint(acc[0] * inv) >> 16) | (__float_as_uint(acc[1] * inv) & 0xffff0000u);
    o.y = (__float_as_uint(acc[2] * inv) >> 16) | (__float_as_uint(acc[3] * inv) & 0xffff0000u);
    out[(static_cast<long long>(tile) * rows + r) * 128 + col] = o;
  }
}
)";

constexpr unsigned kBlock = 128;     // the swap-AB decode's CTA, and the merge's
constexpr int kQRowBytes = 576 * 2;  // bf16 Q
constexpr int kTileTokens = 64;
constexpr int kRowsPerSequence = 32;  // 32 heads, q_len 1
constexpr double kHoldUs = 30;
constexpr uint64_t kRotatedKvBytes = uint64_t{160} << 20;  // larger than the H200's 50 MB L2

}  // namespace

const char* ChainFloorKernelSource() { return kChainFloorSource; }

ChainShape SmallestCaseChain() { return {"(4,1,1024,32) fp8", 8, 8, 2, 16, 576, 2}; }
ChainShape BatchOf32Chain() { return {"(32,1,1024,32) fp8", 64, 4, 4, 16, 576, 2}; }
ChainShape SmallestCaseChainBf16() { return {"(4,1,1024,32) bf16", 8, 8, 2, 16, 1152, 1}; }
ChainShape BatchOf32ChainBf16() { return {"(32,1,1024,32) bf16", 64, 2, 8, 16, 1152, 1}; }

absl::StatusOr<ChainFloor> MeasureChainFloor(gpu::Backend* backend, int device,
                                             const ChainShape& shape, double warmup_ms, int runs) {
  if (shape.row_tiles <= 0 || shape.splits < 1 || shape.splits > 8 || shape.tiles_per_piece < 1 ||
      shape.rows != 16 || shape.row_tiles % 2 != 0 || shape.token_bytes % 16 != 0 ||
      shape.token_bytes <= 0 || shape.ctas_per_sm < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "chain floor: shape %s (%d row tiles, %d splits, %d tiles, %d rows, %d-byte tokens, %d "
        "CTAs per SM): expected an even number of 16-row tiles, 1..8 splits, tokens of a "
        "multiple of 16 bytes and at least one CTA per SM",
        shape.name, shape.row_tiles, shape.splits, shape.tiles_per_piece, shape.rows,
        shape.token_bytes, shape.ctas_per_sm));
  }
  MLAJIT_ASSIGN_OR_RETURN(gpu::DeviceProperties props, backend->GetDeviceProperties(device));
  if (shape.row_tiles * shape.splits > shape.ctas_per_sm * props.sm_count) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "chain floor: shape %s needs %d working CTAs, more than its grid of %d per SM on %d SMs",
        shape.name, shape.row_tiles * shape.splits, shape.ctas_per_sm, props.sm_count));
  }
  MLAJIT_ASSIGN_OR_RETURN(
      std::unique_ptr<BenchKernel> decode,
      BenchKernel::Load(backend, device, "mlajit_chain_decode", kChainFloorSource));
  MLAJIT_ASSIGN_OR_RETURN(
      std::unique_ptr<BenchKernel> merge,
      BenchKernel::Load(backend, device, "mlajit_chain_merge", kChainFloorSource));
  ChainFloor f;
  f.shape = shape;
  const ChainShape& sh = f.shape;
  const int row_tiles_per_seq = kRowsPerSequence / sh.rows;
  const int seqs = sh.row_tiles / row_tiles_per_seq;
  const int active = sh.row_tiles * sh.splits;
  const long long seq_tokens = static_cast<long long>(sh.splits) * sh.tiles_per_piece * kTileTokens;
  const uint64_t kv_bytes = static_cast<uint64_t>(seqs * seq_tokens * sh.token_bytes);
  f.kv_copies = static_cast<int>(std::max<uint64_t>(1, kRotatedKvBytes / kv_bytes));
  const int q_words = sh.rows * kQRowBytes / 16;
  const int kv_words = sh.tiles_per_piece * kTileTokens * sh.token_bytes / 16;

  // Records: CTA b is piece b % splits of row tile b / splits.
  struct Record {
    int32_t kv, q, slot, pad;
  };
  std::vector<Record> records(static_cast<size_t>(active));
  for (int b = 0; b < active; ++b) {
    const int tile = b / sh.splits, piece = b % sh.splits, seq = tile / row_tiles_per_seq;
    records[static_cast<size_t>(b)] = {
        static_cast<int32_t>((seq * seq_tokens + piece * sh.tiles_per_piece * kTileTokens) *
                             sh.token_bytes / 16),
        tile * q_words, b, 0};
  }
  using harness::DeviceBuffer;
  const uint64_t partial_bytes = static_cast<uint64_t>(active) * sh.rows * 512 * 2;
  MLAJIT_ASSIGN_OR_RETURN(DeviceBuffer kv,
                          DeviceBuffer::Allocate(backend, device, kv_bytes * f.kv_copies));
  MLAJIT_ASSIGN_OR_RETURN(
      DeviceBuffer q,
      DeviceBuffer::Allocate(backend, device, static_cast<uint64_t>(sh.row_tiles) * q_words * 16));
  MLAJIT_ASSIGN_OR_RETURN(DeviceBuffer rec,
                          DeviceBuffer::Allocate(backend, device, records.size() * sizeof(Record)));
  MLAJIT_ASSIGN_OR_RETURN(DeviceBuffer partial_o,
                          DeviceBuffer::Allocate(backend, device, partial_bytes));
  MLAJIT_ASSIGN_OR_RETURN(
      DeviceBuffer partial_lse,
      DeviceBuffer::Allocate(backend, device, static_cast<uint64_t>(active) * sh.rows * 4));
  MLAJIT_ASSIGN_OR_RETURN(
      DeviceBuffer out,
      DeviceBuffer::Allocate(backend, device,
                             static_cast<uint64_t>(sh.row_tiles) * sh.rows * 512 * 2));
  MLAJIT_ASSIGN_OR_RETURN(DeviceBuffer counter, DeviceBuffer::Allocate(backend, device, 4));
  gpu::ScopedStream stream(backend, device);
  MLAJIT_RETURN_IF_ERROR(stream.Create());
  // f16 and bf16 zeros everywhere: the merge's arithmetic stays finite.
  MLAJIT_RETURN_IF_ERROR(
      backend->MemsetD8(device, kv.ptr(), 0, kv_bytes * f.kv_copies, stream.get()));
  MLAJIT_RETURN_IF_ERROR(backend->MemsetD8(
      device, q.ptr(), 0, static_cast<uint64_t>(sh.row_tiles) * q_words * 16, stream.get()));
  MLAJIT_RETURN_IF_ERROR(backend->MemsetD8(device, counter.ptr(), 0, 4, stream.get()));
  MLAJIT_RETURN_IF_ERROR(backend->MemcpyHtoD(device, rec.ptr(), records.data(),
                                             records.size() * sizeof(Record), stream.get()));

  const bool dependent = DependentLaunchOn(props);
  uint64_t launches = 0;
  gpu::DevicePtr rec_ptr = rec.ptr(), q_ptr = q.ptr(), po_ptr = partial_o.ptr(),
                 pl_ptr = partial_lse.ptr(), out_ptr = out.ptr(), counter_ptr = counter.ptr();
  int row_tiles = sh.row_tiles, splits = sh.splits, rows = sh.rows;
  int active_ctas = active, q_w = q_words, kv_w = kv_words;
  auto call = [&](int copies, bool with_merge) {
    return [&, copies, with_merge](int i) -> absl::Status {
      gpu::DevicePtr kv_ptr = kv.ptr() + static_cast<uint64_t>(i % copies) * kv_bytes;
      void* decode_args[] = {&rec_ptr,     &kv_ptr, &q_ptr, &po_ptr, &pl_ptr,
                             &active_ctas, &q_w,    &kv_w,  &rows,   &counter_ptr};
      gpu::LaunchConfig dc;
      dc.grid_x = static_cast<unsigned>(sh.ctas_per_sm * props.sm_count);  // the schedule's grid
      dc.block_x = kBlock;
      ++launches;
      MLAJIT_RETURN_IF_ERROR(
          backend->Launch(device, decode->function(), dc, decode_args, stream.get()));
      if (!with_merge) return absl::OkStatus();
      void* merge_args[] = {&po_ptr, &pl_ptr, &out_ptr, &row_tiles, &splits, &rows, &counter_ptr};
      gpu::LaunchConfig mc;
      // One wave of resident blocks (4 per SM, as the library sizes its
      // merge of 128-thread blocks), whose groups stride over the units.
      mc.grid_x = static_cast<unsigned>(
          std::min(row_tiles * rows * 4 / static_cast<int>(kBlock / 32), 4 * props.sm_count));
      mc.block_x = kBlock;
      mc.programmatic_dependent = dependent;
      ++launches;
      return backend->Launch(device, merge->function(), mc, merge_args, stream.get());
    };
  };
  MLAJIT_ASSIGN_OR_RETURN(std::unique_ptr<StreamHold> hold, StreamHold::Load(backend, device));
  const EnqueueCall held = [&](int) { return hold->Enqueue(stream.get(), kHoldUs); };
  auto median_us = [&](const EnqueueCall& enqueue) {
    return WarmedMedianUs(backend, device, stream.get(), enqueue, runs, warmup_ms, held);
  };
  MLAJIT_ASSIGN_OR_RETURN(f.decode_only_us, median_us(call(f.kv_copies, false)));
  MLAJIT_ASSIGN_OR_RETURN(f.decode_merge_us, median_us(call(f.kv_copies, true)));
  MLAJIT_ASSIGN_OR_RETURN(f.decode_merge_l2_us, median_us(call(1, true)));

  MLAJIT_RETURN_IF_ERROR(
      CheckLaunchCount(backend, device, stream.get(), counter.ptr(), launches, "chain floor"));
  return f;
}

std::string FormatChainFloor(const ChainFloor& f) {
  return absl::StrFormat(
      "chain floor (the data flow of %s with no arithmetic: %d row tiles x %d "
      "pieces of %d KV tiles, %d rows; held medians): decode alone %.2f us, decode + merge "
      "%.2f us (KV rotated over %d buffers), %.2f us (KV in L2)",
      f.shape.name, f.shape.row_tiles, f.shape.splits, f.shape.tiles_per_piece, f.shape.rows,
      f.decode_only_us, f.decode_merge_us, f.kv_copies, f.decode_merge_l2_us);
}

}  // namespace mlajit::bench
