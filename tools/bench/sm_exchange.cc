#include "tools/bench/sm_exchange.h"

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
#include "tools/bench/sm_fill.h"
#include "tools/harness/decode_harness.h"

namespace mlajit::bench {
namespace {

// Appended to the SM fill probe's source, whose helpers it uses. Tile t goes
// to slot t % 2: its L2 part at kData + slot * (l2 + push), the other CTA's
// push after it. Per slot: l2_full (the bulk copies landed), push_full (the
// other CTA's stores landed), push_empty (the other CTA has read what this
// CTA pushed into that slot). `relay`: thread 0 pushes each tile's L2 part,
// once it has landed, into the other CTA's slot by bulk copies between the
// two shared memories (push_bytes == l2_bytes), as a pair of CTAs sharing
// every tile, each fetching half, would.
constexpr const char* kExchangeKernel = R"(
extern "C" __global__ void __launch_bounds__(256)
    mlajit_sm_exchange(const unsigned char* __restrict__ src, unsigned long long region,
                       unsigned l2_bytes, unsigned push_bytes, unsigned piece, unsigned rounds,
                       unsigned relay,
                       long long* __restrict__ cycles, unsigned* __restrict__ sums) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr unsigned kData = 256;
  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned bars = (unsigned)__cvta_generic_to_shared(smem);
  const unsigned l2_full = bars, push_full = bars + 16, push_empty = bars + 32;
  const unsigned slot_bytes = l2_bytes + push_bytes, data = bars + kData;
  unsigned rank, peer_data, peer_full, peer_empty;
  asm("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  asm("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(peer_data) : "r"(data), "r"(rank ^ 1));
  asm("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(peer_full) : "r"(push_full), "r"(rank ^ 1));
  asm("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(peer_empty) : "r"(push_empty), "r"(rank ^ 1));
  if (threadIdx.x == 0) {
    InitBarriers(l2_full, 2, 1);
    InitBarriers(push_full, 2, 1);
    InitBarriers(push_empty, 2, 1);
  }
  // Both CTAs' barriers exist before either stores into or arrives on them.
  ClusterSync();
  const unsigned char* from = src + blockIdx.x * region;
  auto issue = [&](unsigned r) {  // thread 0: tile r's L2 part
    const unsigned s = r & 1;
    ExpectBytes(l2_full + 8 * s, l2_bytes);
    for (unsigned o = 0; o < l2_bytes; o += piece) {
      const unsigned char* at = from + ((unsigned long long)r * l2_bytes + o) % region;
      asm volatile(
          "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
          " [%0], [%1], %2, [%3];\n"
          ::"r"(data + s * slot_bytes + o), "l"(at), "r"(min(piece, l2_bytes - o)),
          "r"(l2_full + 8 * s)
          : "memory");
    }
  };
  unsigned sum = 0;
  const long long start = clock64();
  if (threadIdx.x == 0 && l2_bytes > 0) {
    for (unsigned r = 0; r < 2 && r < rounds; ++r) issue(r);
  }
  for (unsigned r = 0; r < rounds && relay != 0; ++r) {
    const unsigned s = r & 1, parity = (r >> 1) & 1;
    if (threadIdx.x != 0) continue;
    const unsigned mine = data + s * slot_bytes;
    Wait(l2_full + 8 * s, parity);
    sum += *reinterpret_cast<const volatile unsigned*>(smem + kData + s * slot_bytes);
    // Tile r's L2 part into the other CTA's slot s, once it has read tile
    // r - 2 from there.
    if (r >= 2) Wait(push_empty + 8 * s, parity ^ 1);
    ExpectBytes(push_full + 8 * s, l2_bytes);  // the other's relay of its tile r
    for (unsigned o = 0; o < l2_bytes; o += piece) {
      asm volatile(
          "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes"
          " [%0], [%1], %2, [%3];\n"
          ::"r"(peer_data + s * slot_bytes + l2_bytes + o), "r"(mine + o),
          "r"(min(piece, l2_bytes - o)),
          "r"(peer_full + 8 * s) : "memory");
    }
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
    Wait(push_full + 8 * s, parity);
    sum += *reinterpret_cast<const volatile unsigned*>(smem + kData + s * slot_bytes + l2_bytes);
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(peer_empty + 8 * s)
                 : "memory");
    if (r + 2 < rounds) {
      // The relay has read the slot's L2 part before tile r + 2 replaces it.
      asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
      issue(r + 2);
    }
  }
  for (unsigned r = 0; r < rounds && relay == 0; ++r) {
    const unsigned s = r & 1, parity = (r >> 1) & 1;
    if (push_bytes > 0) {
      // Tile r's push into the other CTA's slot s, once it has read tile r - 2
      // from there; word 0 carries r + 1 for its check.
      if (r >= 2) Wait(push_empty + 8 * s, parity ^ 1);
      const unsigned to = peer_data + s * slot_bytes + l2_bytes;
      for (unsigned o = threadIdx.x * 16; o < push_bytes; o += blockDim.x * 16) {
        const unsigned w = o == 0 ? r + 1 : o;
        asm volatile(
            "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32"
            " [%0], {%1, %2, %3, %4}, [%5];\n"
            ::"r"(to + o), "r"(w), "r"(w), "r"(w), "r"(w), "r"(peer_full + 8 * s) : "memory");
      }
      if (threadIdx.x == 0) ExpectBytes(push_full + 8 * s, push_bytes);  // the other's tile r
    }
    if (threadIdx.x == 0) {
      if (l2_bytes > 0) {
        Wait(l2_full + 8 * s, parity);
        sum += *reinterpret_cast<const volatile unsigned*>(smem + kData + s * slot_bytes);
      }
      if (push_bytes > 0) {
        Wait(push_full + 8 * s, parity);
        const unsigned char* pushed = smem + kData + s * slot_bytes + l2_bytes;
        sum += *reinterpret_cast<const volatile unsigned*>(pushed);
        // A plain arrive: .release.cluster would add a GPU-wide MEMBAR (sm_fill.cc).
        asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n"
                     ::"r"(peer_empty + 8 * s) : "memory");
      }
      if (l2_bytes > 0 && r + 2 < rounds) {
        // The read above is the generic proxy's; the copy into the slot the async proxy's.
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        issue(r + 2);
      }
    }
  }
  if (threadIdx.x == 0) Record(cycles, sums, start, sum);
  // Neither CTA exits while the other may still store into it or arrive on it.
  __syncwarp();
  ClusterSync();
#endif
}
)";

constexpr uint64_t kRegion = uint64_t{256} << 10;  // each CTA's own, L2-resident
constexpr unsigned kRounds = 256;
constexpr uint32_t kSharedBytes = 192 << 10;  // over half an SM's: one CTA per SM
constexpr uint8_t kFill = 0x5b;
constexpr int kTimedRuns = 5;
constexpr uint32_t kKb = 1024;
constexpr uint32_t kMaxPiece = 72 * kKb;

// A CTA's checksum: the L2 word of every tile, and r + 1 from each pushed
// tile r (relayed: the L2 word the other CTA forwarded).
uint32_t ExpectedSum(uint32_t l2_bytes, uint32_t push_bytes, bool relay) {
  uint32_t sum = 0;
  for (uint32_t r = 0; r < kRounds; ++r) {
    if (l2_bytes > 0) sum += uint32_t{kFill} * 0x01010101u;
    if (push_bytes > 0) sum += relay ? uint32_t{kFill} * 0x01010101u : r + 1;
  }
  return sum;
}

}  // namespace

const char* SmExchangeKernelSource() {
  static const std::string* source =
      new std::string(absl::StrCat(SmFillKernelSource(), kExchangeKernel));
  return source->c_str();
}

absl::StatusOr<std::vector<SmExchange>> MeasureSmExchange(gpu::Backend* backend, int device) {
  MLAJIT_ASSIGN_OR_RETURN(gpu::DeviceProperties props, backend->GetDeviceProperties(device));
  if (!DependentLaunchOn(props)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the SM exchange probe needs clusters and bulk copies (NVIDIA sm_90 or later); device %d "
        "is %s",
        device, props.arch));
  }
  const int ctas = props.sm_count / 2 * 2;
  // A copy may run past its CTA's region into the next: the last one's slack.
  const uint64_t src_bytes = kRegion * ctas + kMaxPiece;
  MLAJIT_ASSIGN_OR_RETURN(harness::DeviceBuffer src,
                          harness::DeviceBuffer::Allocate(backend, device, src_bytes));
  MLAJIT_ASSIGN_OR_RETURN(harness::DeviceBuffer cycles,
                          harness::DeviceBuffer::Allocate(backend, device, 8 * ctas));
  MLAJIT_ASSIGN_OR_RETURN(harness::DeviceBuffer sums,
                          harness::DeviceBuffer::Allocate(backend, device, 4 * ctas));
  gpu::ScopedStream stream(backend, device);
  MLAJIT_RETURN_IF_ERROR(stream.Create());
  MLAJIT_RETURN_IF_ERROR(backend->MemsetD8(device, src.ptr(), kFill, src_bytes, stream.get()));
  MLAJIT_ASSIGN_OR_RETURN(std::unique_ptr<BenchKernel> exchange,
                          BenchKernel::Load(backend, device, kSmExchangeKernel,
                                            SmExchangeKernelSource()));
  const gpu::FunctionHandle kernel = exchange->function();
  MLAJIT_RETURN_IF_ERROR(backend->SetMaxDynamicSharedMemory(kernel, kSharedBytes));

  struct Tile {
    uint32_t l2_bytes, push_bytes, piece;
    bool relay;
  };
  // v51's rows in 4 KB copies, then the seesaw's flow (72 KB from L2) and the
  // dim-split's (40 + 24) in 8 KB copies (the seesaw's tensor boxes), 16 KB
  // and whole tiles: does the comparison hold when copies are larger?
  const std::vector<Tile> tiles = {
      {72 * kKb, 0, 4 * kKb, false},         {40 * kKb, 0, 4 * kKb, false},
      {36 * kKb, 0, 4 * kKb, false},         {0, 24 * kKb, 4 * kKb, false},
      {0, 36 * kKb, 4 * kKb, false},         {40 * kKb, 24 * kKb, 4 * kKb, false},
      {36 * kKb, 36 * kKb, 4 * kKb, false},  {36 * kKb, 36 * kKb, 4 * kKb, true},
      {72 * kKb, 0, 8 * kKb, false},         {72 * kKb, 0, 16 * kKb, false},
      {72 * kKb, 0, 72 * kKb, false},        {40 * kKb, 0, 8 * kKb, false},
      {40 * kKb, 0, 40 * kKb, false},        {40 * kKb, 24 * kKb, 8 * kKb, false},
      {40 * kKb, 24 * kKb, 16 * kKb, false}, {40 * kKb, 24 * kKb, 40 * kKb, false},
      {36 * kKb, 36 * kKb, 36 * kKb, true}};
  std::vector<SmExchange> out;
  for (const auto& [l2_bytes, push_bytes, piece_bytes, relay] : tiles) {
    gpu::DevicePtr src_ptr = src.ptr(), cycles_ptr = cycles.ptr(), sums_ptr = sums.ptr();
    unsigned long long region = kRegion;
    unsigned l2 = l2_bytes, push = push_bytes, piece = piece_bytes, rounds = kRounds,
             relayed = relay ? 1 : 0;
    void* args[] = {&src_ptr, &region,  &l2,         &push,    &piece,
                    &rounds,  &relayed, &cycles_ptr, &sums_ptr};
    gpu::LaunchConfig config;
    config.grid_x = ctas;
    config.block_x = 256;
    config.cluster_x = 2;
    config.shared_memory_bytes = kSharedBytes;
    auto launch = [&](int) { return backend->Launch(device, kernel, config, args, stream.get()); };
    MLAJIT_RETURN_IF_ERROR(launch(0));
    MLAJIT_ASSIGN_OR_RETURN(double ms,
                            MedianDeviceMs(backend, device, stream.get(), launch, kTimedRuns));
    MLAJIT_ASSIGN_OR_RETURN(
        std::vector<int64_t> cta_cycles,
        ReadCtaCycles(
            backend, device, stream.get(), cycles.ptr(), sums.ptr(), ctas,
            ExpectedSum(l2_bytes, push_bytes, relay),
            absl::StrFormat("SM exchange (%u KB from L2 in %u KB copies, %u KB %s)", l2_bytes / kKb,
                            piece_bytes / kKb, push_bytes / kKb, relay ? "relayed" : "pushed"),
            "a copy or a push"));
    std::vector<double> per_tile;
    for (int64_t c : cta_cycles) per_tile.push_back(static_cast<double>(c) / kRounds);
    std::sort(per_tile.begin(), per_tile.end());
    SmExchange e;
    e.l2_bytes = l2_bytes;
    e.push_bytes = push_bytes;
    e.piece = piece_bytes;
    e.relay = relay;
    e.ctas = ctas;
    e.cycles_per_tile = per_tile[per_tile.size() / 2];
    e.slowest_cycles_per_tile = per_tile.back();
    e.launch_us = ms * 1e3;
    out.push_back(e);
  }
  return out;
}

std::string FormatSmExchange(const SmExchange& e) {
  const double in = static_cast<double>(e.l2_bytes) + e.push_bytes;
  return absl::StrFormat(
      "sm exchange: %2u KB from L2 + %2u KB from the other SM a tile%s in %2u KB copies, %3d "
      "CTAs: %6.0f cycles a tile (median CTA; slowest %6.0f), %5.1f B/clk in, %7.1f us",
      e.l2_bytes / 1024, e.push_bytes / 1024,
      e.relay ? " (its L2 part, relayed by bulk copies)" : "", e.piece / 1024, e.ctas,
      e.cycles_per_tile, e.slowest_cycles_per_tile,
      e.cycles_per_tile > 0 ? in / e.cycles_per_tile : 0.0, e.launch_us);
}

}  // namespace mlajit::bench
