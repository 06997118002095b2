// How fast one SM's shared memory can be filled from global memory by bulk
// copies (cp.async.bulk, the engine tensor-map copies use), with nothing
// else running on the SM: a ceiling for kernels that stream whole tiles into
// shared memory, as the bf16 seesaw does (tools/bench/RESULTS.md v45).
//
// Each CTA (one per SM, by its shared memory) keeps `slots` copies of
// `chunk` bytes in flight, re-issuing a slot as soon as its copy lands, and
// times itself with the SM's clock. One thread re-issuing every slot takes
// about 610 cycles a copy whatever its size (its wait-and-reissue loop, not
// the copy engine: RESULTS.md v55), so the bulk-warps rows give each slot a
// warp of its own; those show what the SM takes in. Each CTA reads either
// its own 256 KB over and over (L2-resident after the first pass) or its own
// 8 MB once (from DRAM: together larger than L2). Only for sm_90 and later.
//
//   MLAJIT_ASSIGN_OR_RETURN(std::vector<SmFill> f, MeasureSmFill(backend, 0));
//   for (const SmFill& x : f) std::printf("%s\n", FormatSmFill(x).c_str());
#ifndef MLAJIT_TOOLS_BENCH_SM_FILL_H_
#define MLAJIT_TOOLS_BENCH_SM_FILL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/gpu/backend.h"

namespace mlajit::bench {

// How the bytes move: bulk copies issued by one thread (completing on an
// mbarrier), 16-byte cp.async of every thread of 256, or 16-byte loads into
// registers by 256 threads (nothing written to shared memory); or, in
// clusters of two CTAs, 16-byte loads from the other CTA's shared memory by
// all 256 threads, or by 128 while the other 128 load from L2 (does the
// path between SMs share the SM's port from L2?), or bulk copies multicast
// to both CTAs, each CTA issuing half of every chunk (is the limit the SM's
// port or its copy engine?).
// kBulkNoFence is kBulk without the proxy fence before a slot's next copy
// (for timing only: what that fence costs a loop with copies in flight);
// kBulkWarps is kBulk with each slot's copies issued by a warp of its own.
enum class SmFillCopy {
  kBulk,
  kBulkNoFence,
  kBulkWarps,
  kCpAsync,
  kLoads,
  kPeerLoads,
  kPeerAndL2Loads,
  kMulticast
};

struct SmFill {
  SmFillCopy copy = SmFillCopy::kBulk;
  bool from_dram = false;         // 8 MB once per CTA, else 256 KB again and again
  int ctas = 0;                   // one per SM
  uint32_t chunk = 0;             // bytes per copy
  int slots = 0;                  // copies (commit groups) in flight per CTA; the loads: 4
                                  // rounds unrolled
  uint64_t bytes_per_cta = 0;
  double bytes_per_cycle = 0;     // per SM, the median CTA, by its own clock
  double slowest_bytes_per_cycle = 0;  // the slowest and fastest CTA: does any SM fill
  double fastest_bytes_per_cycle = 0;  // slower than the rest (which a call then waits for)?
  double total_bytes_per_s = 0;   // all CTAs' bytes in over the launch's device time (the
                                  // multicast reads half of them from memory)
  double launch_us = 0;           // median of the timed launches
};

// The kernels, one per SmFillCopy (KernelName): each copied chunk's first
// word (the loads: every word) is summed so that the host can check that
// every copy arrived.
const char* SmFillKernelSource();
const char* KernelName(SmFillCopy copy);
const char* CopyName(SmFillCopy copy);  // as the report line names it

// Bulk copies at every combination of source (L2, DRAM), CTA count (1, 16,
// half and all SMs) and bytes in flight (2, 4, 9 and 12 slots of 16 KB), and
// at 1 and all SMs in copies of 4, 8, 32 and 64 KB with 64 and 128 KB in
// flight;
// cp.async and loads from both sources at 1 and all SMs; the peer loads (L2)
// and the multicast copies (L2, DRAM; 4 and 9 slots) in one cluster and in
// as many as the SMs hold.
absl::StatusOr<std::vector<SmFill>> MeasureSmFill(gpu::Backend* backend, int device);

// One line for the bench's report.
std::string FormatSmFill(const SmFill& f);

// Once `stream` is idle: each of the first `ctas` CTAs' cycles and checksum as
// the kernels' Record wrote them (at `cycles`, `sums`), the cycles returned;
// an InternalError naming `what` and the CTA when a sum is not
// `expected_sum` or the cycles not positive (`lost` did not land). The SM
// exchange probe (sm_exchange.h) reads its CTAs the same way.
absl::StatusOr<std::vector<int64_t>> ReadCtaCycles(gpu::Backend* backend, int device,
                                                   gpu::StreamHandle stream,
                                                   gpu::DevicePtr cycles, gpu::DevicePtr sums,
                                                   int ctas, uint32_t expected_sum,
                                                   const std::string& what, const char* lost);

}  // namespace mlajit::bench

#endif  // MLAJIT_TOOLS_BENCH_SM_FILL_H_
