#include "tools/bench/sm_fill.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/base/status_macros.h"
#include "tools/bench/bench_kernel.h"
#include "tools/bench/device_timing.h"
#include "tools/harness/decode_harness.h"

namespace mlajit::bench {
namespace {

// Slot s's mbarrier at byte 8 s, the slots' data from byte 128.
constexpr const char* kSmFillSource = R"(
// `count` mbarriers of `arrivals` each, 8 bytes apart from `bars`.
__device__ __forceinline__ void InitBarriers(unsigned bars, unsigned count, unsigned arrivals) {
  for (unsigned s = 0; s < count; ++s) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bars + 8 * s), "r"(arrivals)
                 : "memory");
  }
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

__device__ __forceinline__ void ExpectBytes(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void ClusterSync() {
  asm volatile("barrier.cluster.arrive.aligned;\nbarrier.cluster.wait.aligned;\n" ::: "memory");
}

// Every thread's `sum` added up, returned to all (two barriers).
__device__ __forceinline__ unsigned BlockSum(unsigned sum) {
  __shared__ unsigned total;
  if (threadIdx.x == 0) total = 0;
  __syncthreads();
  atomicAdd(&total, sum);
  __syncthreads();
  return total;
}

// This CTA's cycles since `start` and checksum, for the host.
__device__ __forceinline__ void Record(long long* cycles, unsigned* sums, long long start,
                                       unsigned sum) {
  cycles[blockIdx.x] = clock64() - start;
  sums[blockIdx.x] = sum;
}

__device__ __forceinline__ void Issue(unsigned bar, unsigned dst, const unsigned char* src,
                                      unsigned bytes) {
  ExpectBytes(bar, bytes);
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
      ::"r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}

__device__ __forceinline__ void Wait(unsigned bar, unsigned parity) {
  unsigned done = 0;
  while (!done) {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  }
}

// FENCE: a proxy fence between the read of a landed slot and the copy that
// reuses it, as the memory model asks and the decode kernels do before
// wgmma reads of generic writes. Without it (the no-fence kernel, for timing
// only: every chunk holds the same bytes, so a copy that overtook the read
// would not change the sum), the two rates say what the fence costs a loop
// that has copies in flight.
// PER_WARP: slot s is re-issued by its own warp (lane 0 of warp s;
// blockDim.x = 32 * slots) instead of every slot by thread 0: is a copy's
// cost the issuing thread's or the SM's copy engine's? Each issuing thread
// serves the rounds of its slots, first, first + step, ...
template <bool FENCE, bool PER_WARP>
__device__ __forceinline__ void SmFill(const unsigned char* __restrict__ src,
                                       unsigned long long cta_stride, unsigned long long region,
                                       unsigned chunk, unsigned slots, unsigned rounds,
                                       long long* __restrict__ cycles,
                                       unsigned* __restrict__ sums) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) unsigned char smem[];
  if (!PER_WARP && threadIdx.x != 0) return;
  const unsigned bars = (unsigned)__cvta_generic_to_shared(smem);
  const unsigned data = bars + 128;
  const unsigned char* base = src + blockIdx.x * cta_stride;
  const unsigned first = PER_WARP ? threadIdx.x >> 5 : 0u, step = PER_WARP ? slots : 1u;
  if (threadIdx.x == 0) InitBarriers(bars, slots, 1);
  if (PER_WARP) __syncthreads();
  auto issue = [&](unsigned r) {
    const unsigned s = r % slots;
    Issue(bars + 8 * s, data + s * chunk, base + (unsigned long long)r * chunk % region, chunk);
  };
  unsigned sum = 0;
  const long long start = clock64();
  if (!PER_WARP || ((threadIdx.x & 31) == 0 && first < slots)) {
    for (unsigned r = first; r < slots && r < rounds; r += step) issue(r);
    for (unsigned r = first; r < rounds; r += step) {
      const unsigned s = r % slots;
      Wait(bars + 8 * s, (r / slots) & 1);
      sum += *reinterpret_cast<const volatile unsigned*>(smem + 128 + s * chunk);
      if (r + slots < rounds) {
        // The read above is the generic proxy's; the next copy into the slot
        // is the async proxy's.
        if (FENCE) asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        issue(r + slots);
      }
    }
  }
  if (PER_WARP) sum = BlockSum(sum);
  if (threadIdx.x == 0) Record(cycles, sums, start, sum);
#endif
}

extern "C" __global__ void mlajit_sm_fill(const unsigned char* __restrict__ src,
                                          unsigned long long cta_stride,
                                          unsigned long long region, unsigned chunk,
                                          unsigned slots, unsigned rounds,
                                          long long* __restrict__ cycles,
                                          unsigned* __restrict__ sums) {
  SmFill<true, false>(src, cta_stride, region, chunk, slots, rounds, cycles, sums);
}

extern "C" __global__ void mlajit_sm_fill_no_fence(const unsigned char* __restrict__ src,
                                                   unsigned long long cta_stride,
                                                   unsigned long long region, unsigned chunk,
                                                   unsigned slots, unsigned rounds,
                                                   long long* __restrict__ cycles,
                                                   unsigned* __restrict__ sums) {
  SmFill<false, false>(src, cta_stride, region, chunk, slots, rounds, cycles, sums);
}

extern "C" __global__ void mlajit_sm_fill_warps(const unsigned char* __restrict__ src,
                                                unsigned long long cta_stride,
                                                unsigned long long region, unsigned chunk,
                                                unsigned slots, unsigned rounds,
                                                long long* __restrict__ cycles,
                                                unsigned* __restrict__ sums) {
  SmFill<true, true>(src, cta_stride, region, chunk, slots, rounds, cycles, sums);
}

template <int PENDING>
__device__ __forceinline__ void WaitGroups() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}

// The same stream by 16-byte cp.async of every thread, `slots` commit groups
// in flight (an empty group stands in for each copy past the last).
extern "C" __global__ void mlajit_sm_fill_cp_async(const unsigned char* __restrict__ src,
                                                   unsigned long long cta_stride,
                                                   unsigned long long region, unsigned chunk,
                                                   unsigned slots, unsigned rounds,
                                                   long long* __restrict__ cycles,
                                                   unsigned* __restrict__ sums) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned data = (unsigned)__cvta_generic_to_shared(smem) + 128;
  const unsigned char* base = src + blockIdx.x * cta_stride;
  auto issue = [&](unsigned r) {
    if (r < rounds) {
      const unsigned s = r % slots;
      const unsigned char* from = base + (unsigned long long)r * chunk % region;
      for (unsigned o = threadIdx.x * 16; o < chunk; o += blockDim.x * 16) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(data + s * chunk + o),
                     "l"(from + o) : "memory");
      }
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  };
  unsigned sum = 0;
  const long long start = clock64();
  for (unsigned r = 0; r < slots; ++r) issue(r);
  for (unsigned r = 0; r < rounds; ++r) {
    switch (slots) {  // the host passes 4 or 9
      case 4: WaitGroups<3>(); break;
      case 9: WaitGroups<8>(); break;
      default: WaitGroups<0>(); break;
    }
    __syncthreads();
    if (threadIdx.x == 0) sum += *reinterpret_cast<const unsigned*>(smem + 128 + r % slots * chunk);
    __syncthreads();
    issue(r + slots);
  }
  if (threadIdx.x == 0) Record(cycles, sums, start, sum);
#endif
}

// The same bytes loaded into registers (16-byte loads cached in L2 only) by
// every thread, four rounds unrolled; every word is summed.
extern "C" __global__ void mlajit_sm_fill_loads(const unsigned char* __restrict__ src,
                                                unsigned long long cta_stride,
                                                unsigned long long region, unsigned chunk,
                                                unsigned slots, unsigned rounds,
                                                long long* __restrict__ cycles,
                                                unsigned* __restrict__ sums) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned char* base = src + blockIdx.x * cta_stride;
  unsigned sum = 0;
  const long long start = clock64();
#pragma unroll 4
  for (unsigned r = 0; r < rounds; ++r) {
    const unsigned char* from = base + (unsigned long long)r * chunk % region;
    for (unsigned o = threadIdx.x * 16; o < chunk; o += blockDim.x * 16) {
      const uint4 v = __ldcg(reinterpret_cast<const uint4*>(from + o));
      sum += v.x + v.y + v.z + v.w;
    }
  }
  sum = BlockSum(sum);
  if (threadIdx.x == 0) Record(cycles, sums, start, sum);
#endif
}

// Loads from the other CTA's shared memory in a cluster of two (each CTA
// first copies 64 KB of its source there), by every thread; with
// `l2_threads` > 0 that many threads load from L2 as the loads kernel does
// instead, so that the two paths into the SM run at once.
extern "C" __global__ void mlajit_sm_fill_peer(const unsigned char* __restrict__ src,
                                               unsigned long long cta_stride,
                                               unsigned long long region, unsigned chunk,
                                               unsigned l2_threads, unsigned rounds,
                                               long long* __restrict__ cycles,
                                               unsigned* __restrict__ sums) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr unsigned PEER_BYTES = 65536;
  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned char* base = src + blockIdx.x * cta_stride;
  for (unsigned o = threadIdx.x * 16; o < PEER_BYTES; o += blockDim.x * 16) {
    *reinterpret_cast<uint4*>(smem + o) = __ldcg(reinterpret_cast<const uint4*>(base + o));
  }
  ClusterSync();
  unsigned rank, peer;
  asm("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  asm("mapa.shared::cluster.u32 %0, %1, %2;\n"
      : "=r"(peer) : "r"((unsigned)__cvta_generic_to_shared(smem)), "r"(rank ^ 1));
  const bool from_l2 = threadIdx.x < l2_threads;
  unsigned sum = 0;
  const long long start = clock64();
#pragma unroll 4
  for (unsigned r = 0; r < rounds; ++r) {
    for (unsigned o = threadIdx.x * 16; o < chunk; o += blockDim.x * 16) {
      uint4 v;
      if (from_l2) {
        const unsigned char* at = base + (unsigned long long)r * chunk % region + o;
        v = __ldcg(reinterpret_cast<const uint4*>(at));
      } else {
        asm volatile("ld.shared::cluster.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "r"(peer + (r * chunk + o) % PEER_BYTES));
      }
      sum += v.x + v.y + v.z + v.w;
    }
  }
  sum = BlockSum(sum);
  if (threadIdx.x == 0) Record(cycles, sums, start, sum);
  // The peer reads this CTA's shared memory until it is done.
  ClusterSync();
#endif
}

// Bulk copies multicast in a cluster of two: each CTA copies half of every
// chunk into both CTAs' slot, so each SM takes in whole chunks while its own
// copy engine issues half of them. A slot is re-used once both CTAs have read
// it (each arrives on both CTAs' `empty` barrier). Slot s: full at 8 s, empty
// at 128 + 8 s, data from 256.
extern "C" __global__ void mlajit_sm_fill_multicast(const unsigned char* __restrict__ src,
                                                    unsigned long long cta_stride,
                                                    unsigned long long region, unsigned chunk,
                                                    unsigned slots, unsigned rounds,
                                                    long long* __restrict__ cycles,
                                                    unsigned* __restrict__ sums) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned full = (unsigned)__cvta_generic_to_shared(smem);
  const unsigned empty = full + 128, data = full + 256;
  unsigned rank;
  asm("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  if (threadIdx.x == 0) {
    InitBarriers(full, slots, 1);
    InitBarriers(empty, slots, 2);
  }
  // Both CTAs' barriers exist before either copies into or arrives on them.
  ClusterSync();
  if (threadIdx.x == 0) {
    const unsigned char* base = src + (blockIdx.x / 2) * cta_stride;  // the cluster's stream
    const unsigned half = chunk / 2;
    unsigned empty_in[2];
#pragma unroll
    for (unsigned c = 0; c < 2; ++c) {
      asm("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(empty_in[c]) : "r"(empty), "r"(c));
    }
    auto issue = [&](unsigned r) {
      const unsigned s = r % slots;
      ExpectBytes(full + 8 * s, chunk);  // both halves land on it
      asm volatile(
          "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
          " [%0], [%1], %2, [%3], %4;\n"
          ::"r"(data + s * chunk + rank * half),
          "l"(base + (unsigned long long)r * chunk % region + rank * half), "r"(half),
          "r"(full + 8 * s), "h"((unsigned short)3) : "memory");
    };
    unsigned sum = 0;
    const long long start = clock64();
    for (unsigned r = 0; r < slots && r < rounds; ++r) issue(r);
    for (unsigned r = 0; r < rounds; ++r) {
      const unsigned s = r % slots, parity = (r / slots) & 1;
      Wait(full + 8 * s, parity);
      // One word of each CTA's half.
      sum += *reinterpret_cast<const volatile unsigned*>(smem + 256 + s * chunk) +
             *reinterpret_cast<const volatile unsigned*>(smem + 256 + s * chunk + half);
      // Plain arrives, as pipelines over clusters release a consumer's slot:
      // .release.cluster compiles to a GPU-wide MEMBAR per arrive, which the
      // measured rate would pay on its chain.
#pragma unroll
      for (unsigned c = 0; c < 2; ++c) {
        asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n"
                     ::"r"(empty_in[c] + 8 * s) : "memory");
      }
      if (r + slots < rounds) {
        Wait(empty + 8 * s, parity);  // both CTAs have read round r from slot s
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        issue(r + slots);
      }
    }
    Record(cycles, sums, start, sum);
  }
  // Neither CTA exits while the other may still copy into it or arrive on it.
  __syncwarp();
  ClusterSync();
#endif
}
)";

constexpr uint32_t kChunk = 16384;
constexpr uint32_t kKb = 1024;
constexpr int kMaxSlots = 16;                         // their mbarriers fill the first 128 bytes
constexpr uint32_t kSlotBytes = 12 * kChunk;          // what the slots may take together
constexpr uint64_t kBytesPerCta = uint64_t{8} << 20;  // 512 rounds of 16 KB
// From L2: each CTA re-reads its own 256 KB (33 MB for 132 CTAs, inside L2).
constexpr uint64_t kL2Region = uint64_t{256} << 10;
constexpr uint8_t kFill = 0x5b;
constexpr int kTimedRuns = 5;

}  // namespace

const char* SmFillKernelSource() { return kSmFillSource; }

const char* KernelName(SmFillCopy copy) {
  switch (copy) {
    case SmFillCopy::kBulk: return "mlajit_sm_fill";
    case SmFillCopy::kBulkNoFence:
      return "mlajit_sm_fill_no_fence";
    case SmFillCopy::kBulkWarps:
      return "mlajit_sm_fill_warps";
    case SmFillCopy::kCpAsync: return "mlajit_sm_fill_cp_async";
    case SmFillCopy::kLoads: return "mlajit_sm_fill_loads";
    case SmFillCopy::kPeerLoads:
    case SmFillCopy::kPeerAndL2Loads: return "mlajit_sm_fill_peer";
    case SmFillCopy::kMulticast: return "mlajit_sm_fill_multicast";
  }
  return "";
}

absl::StatusOr<std::vector<SmFill>> MeasureSmFill(gpu::Backend* backend, int device) {
  MLAJIT_ASSIGN_OR_RETURN(gpu::DeviceProperties props, backend->GetDeviceProperties(device));
  if (!DependentLaunchOn(props)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the SM fill probe needs bulk copies (NVIDIA sm_90 or later); device %d is %s", device,
        props.arch));
  }
  const int sms = props.sm_count;
  MLAJIT_ASSIGN_OR_RETURN(harness::DeviceBuffer src,
                          harness::DeviceBuffer::Allocate(backend, device, kBytesPerCta * sms));
  MLAJIT_ASSIGN_OR_RETURN(harness::DeviceBuffer cycles, harness::DeviceBuffer::Allocate(
                                                            backend, device, 8 * sms));
  MLAJIT_ASSIGN_OR_RETURN(harness::DeviceBuffer sums,
                          harness::DeviceBuffer::Allocate(backend, device, 4 * sms));
  gpu::ScopedStream stream(backend, device);
  MLAJIT_RETURN_IF_ERROR(stream.Create());
  MLAJIT_RETURN_IF_ERROR(
      backend->MemsetD8(device, src.ptr(), kFill, kBytesPerCta * sms, stream.get()));

  std::vector<SmFill> out;
  for (SmFillCopy copy : {SmFillCopy::kBulk, SmFillCopy::kBulkNoFence, SmFillCopy::kBulkWarps,
                          SmFillCopy::kCpAsync, SmFillCopy::kLoads, SmFillCopy::kPeerLoads,
                          SmFillCopy::kPeerAndL2Loads, SmFillCopy::kMulticast}) {
    MLAJIT_ASSIGN_OR_RETURN(std::unique_ptr<BenchKernel> fill,
                            BenchKernel::Load(backend, device, KernelName(copy), kSmFillSource));
    const gpu::FunctionHandle kernel = fill->function();
    MLAJIT_RETURN_IF_ERROR(backend->SetMaxDynamicSharedMemory(kernel, 128 + kSlotBytes));
    const bool warps = copy == SmFillCopy::kBulkWarps;
    const bool bulk = copy == SmFillCopy::kBulk || copy == SmFillCopy::kBulkNoFence || warps;
    const bool peer = copy == SmFillCopy::kPeerLoads || copy == SmFillCopy::kPeerAndL2Loads;
    const bool multicast = copy == SmFillCopy::kMulticast;
    const bool clustered = peer || multicast;
    const std::vector<int> cta_counts = bulk        ? std::vector<int>{1, 16, sms / 2, sms}
                                        : clustered ? std::vector<int>{2, sms / 2 * 2}
                                                    : std::vector<int>{1, sms};
    // Copies of 16 KB at 2 to 12 in flight; bulk copies also from 4 to 64 KB
    // a copy at 64 and 128 KB in flight (does a copy's size set the rate?).
    struct Shape {
      uint32_t chunk;
      int slots;
    };
    std::vector<Shape> shapes;
    for (int slots : bulk                                        ? std::vector<int>{2, 4, 9, 12}
                     : copy == SmFillCopy::kCpAsync || multicast ? std::vector<int>{4, 9}
                                                                 : std::vector<int>{4}) {
      shapes.push_back({kChunk, slots});
    }
    if (bulk) {
      for (uint32_t chunk : {4 * kKb, 8 * kKb, 32 * kKb, 64 * kKb}) {
        for (uint32_t in_flight : {64 * kKb, 128 * kKb}) {
          const int slots = static_cast<int>(in_flight / chunk);
          if (slots >= 1 && slots <= kMaxSlots) shapes.push_back({chunk, slots});
        }
      }
    }
    // The loads sum every word of each copy, the multicast one word of each
    // half, the others the first word.
    const uint32_t word = uint32_t{kFill} * 0x01010101u;
    for (bool from_dram : peer ? std::vector<bool>{false} : std::vector<bool>{false, true}) {
      for (int ctas : cta_counts) {
        for (const auto& [chunk_bytes, slots] : shapes) {
          // The chunk sweep at one and every SM only.
          if (chunk_bytes != kChunk && ctas != 1 && ctas != sms) continue;
          const uint32_t rounds_per_cta = static_cast<uint32_t>(kBytesPerCta / chunk_bytes);
          const uint32_t words_per_chunk = bulk || copy == SmFillCopy::kCpAsync ? 1u
                                           : multicast                          ? 2u
                                                                                : chunk_bytes / 4;
          const uint32_t expected_sum = rounds_per_cta * word * words_per_chunk;
          gpu::DevicePtr src_ptr = src.ptr(), cycles_ptr = cycles.ptr(), sums_ptr = sums.ptr();
          unsigned long long cta_stride = from_dram ? kBytesPerCta : kL2Region;
          unsigned long long region = from_dram ? kBytesPerCta : kL2Region;
          // The peer kernel's fifth argument: how many of its 256 threads load from L2.
          unsigned chunk = chunk_bytes, rounds = rounds_per_cta,
                   slot_count = !peer                                 ? slots
                                : copy == SmFillCopy::kPeerAndL2Loads ? 128u
                                                                      : 0u;
          void* args[] = {&src_ptr, &cta_stride, &region, &chunk, &slot_count, &rounds,
                          &cycles_ptr, &sums_ptr};
          gpu::LaunchConfig config;
          config.grid_x = ctas;
          config.block_x = warps ? 32 * slots : bulk || multicast ? 32 : 256;
          config.cluster_x = clustered ? 2 : 1;
          // More than half an SM's shared memory whatever the kernel uses, so
          // that no two CTAs share an SM.
          config.shared_memory_bytes = 128 + kSlotBytes;
          auto launch = [&](int) {
            return backend->Launch(device, kernel, config, args, stream.get());
          };
          MLAJIT_RETURN_IF_ERROR(launch(0));
          MLAJIT_ASSIGN_OR_RETURN(double ms, MedianDeviceMs(backend, device, stream.get(), launch,
                                                            kTimedRuns));
          MLAJIT_ASSIGN_OR_RETURN(
              std::vector<int64_t> cta_cycles,
              ReadCtaCycles(backend, device, stream.get(), cycles.ptr(), sums.ptr(), ctas,
                            expected_sum, absl::StrCat("SM fill (", KernelName(copy), ")"),
                            "a copy"));
          std::vector<double> rates;
          for (int64_t c : cta_cycles) rates.push_back(static_cast<double>(kBytesPerCta) / c);
          SmFill f;
          f.copy = copy;
          f.from_dram = from_dram;
          f.ctas = ctas;
          f.chunk = chunk_bytes;
          f.slots = slots;
          f.bytes_per_cta = kBytesPerCta;
          f.bytes_per_cycle = Median(rates);
          f.slowest_bytes_per_cycle = *std::min_element(rates.begin(), rates.end());
          f.fastest_bytes_per_cycle = *std::max_element(rates.begin(), rates.end());
          f.launch_us = ms * 1e3;
          f.total_bytes_per_s = static_cast<double>(kBytesPerCta) * ctas / (ms * 1e-3);
          out.push_back(f);
        }
      }
    }
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> ReadCtaCycles(gpu::Backend* backend, int device,
                                                   gpu::StreamHandle stream,
                                                   gpu::DevicePtr cycles, gpu::DevicePtr sums,
                                                   int ctas, uint32_t expected_sum,
                                                   const std::string& what, const char* lost) {
  std::vector<int64_t> cta_cycles(ctas);
  std::vector<uint32_t> cta_sums(ctas);
  MLAJIT_RETURN_IF_ERROR(
      backend->MemcpyDtoH(device, cta_cycles.data(), cycles, 8 * ctas, stream));
  MLAJIT_RETURN_IF_ERROR(backend->MemcpyDtoH(device, cta_sums.data(), sums, 4 * ctas, stream));
  MLAJIT_RETURN_IF_ERROR(backend->StreamSynchronize(device, stream));
  for (int c = 0; c < ctas; ++c) {
    if (cta_sums[c] != expected_sum || cta_cycles[c] <= 0) {
      return absl::InternalError(absl::StrFormat(
          "%s: CTA %d summed 0x%08x in %d cycles, expected 0x%08x: %s did not land", what, c,
          cta_sums[c], cta_cycles[c], expected_sum, lost));
    }
  }
  return cta_cycles;
}

const char* CopyName(SmFillCopy copy) {
  switch (copy) {
    case SmFillCopy::kBulk: return "bulk";
    case SmFillCopy::kBulkNoFence:
      return "bulk-nofence";
    case SmFillCopy::kBulkWarps:
      return "bulk-warps";
    case SmFillCopy::kCpAsync: return "cp.async";
    case SmFillCopy::kLoads: return "loads";
    case SmFillCopy::kPeerLoads: return "peer";
    case SmFillCopy::kPeerAndL2Loads: return "peer+l2";
    case SmFillCopy::kMulticast: return "multicast";
  }
  return "";
}

std::string FormatSmFill(const SmFill& f) {
  return absl::StrFormat(
      "sm fill: %-13s %-4s %3d CTAs, %2d x %2u KB in flight: %5.1f B/clk per SM (median CTA; "
      "%5.1f-%5.1f), %5.2f TB/s in all, %7.1f us for %llu MB each",
      CopyName(f.copy),
      f.from_dram ? "dram" : "l2", f.ctas, f.slots, f.chunk / 1024, f.bytes_per_cycle,
      f.slowest_bytes_per_cycle, f.fastest_bytes_per_cycle, f.total_bytes_per_s * 1e-12,
      f.launch_us, static_cast<unsigned long long>(f.bytes_per_cta >> 20));
}

}  // namespace mlajit::bench
