// The data flow of a 128-row tile split by dims over a cluster of two CTAs
// (tools/bench/RESULTS.md v45), without its arithmetic: does an SM take in
// more a tile when part of it comes from the other SM than when all of it
// comes from L2?
//
// Each CTA of a two-CTA cluster, one per SM, runs `rounds` tiles. A tile is
// `l2_bytes` bulk-copied from L2 into this CTA's shared memory (one thread, in
// copies of `piece` bytes; the seesaw's tensor copies are 8 KB boxes) and `push_bytes` that the
// other CTA's 256 threads store into it with st.async (as the dim-split's partial scores and P
// would go), two tiles in flight each way. Every CTA times its tiles with the SM clock and checks
// one word of each part.
//
// The seesaw takes 72 KB from L2 a tile; the dim-split would take 36-40 KB
// from L2 and 24 KB from the other SM. If the second runs faster than the
// first, the path between SMs adds to the port from L2 and the dim-split's
// tiles fill faster. The relayed row is the simpler design's flow: two CTAs
// on the same KV tiles (a 128-row sequence's two row tiles), each fetching
// half of every tile from L2 and forwarding it to the other by bulk copies
// between shared memories, so that each SM takes 36 KB a tile from L2 and 36
// from the other SM, with the products unchanged.
//
//   MLAJIT_ASSIGN_OR_RETURN(std::vector<SmExchange> x, MeasureSmExchange(backend, 0));
//   for (const SmExchange& e : x) std::printf("%s\n", FormatSmExchange(e).c_str());
#ifndef MLAJIT_TOOLS_BENCH_SM_EXCHANGE_H_
#define MLAJIT_TOOLS_BENCH_SM_EXCHANGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/gpu/backend.h"

namespace mlajit::bench {

struct SmExchange {
  uint32_t l2_bytes = 0;    // a tile's bytes from L2
  uint32_t push_bytes = 0;  // ... and from the other CTA of the cluster
  uint32_t piece = 0;       // bytes per bulk copy of the L2 part (the last may be shorter)
  // The other CTA forwards its tiles' L2 parts by bulk copies between the
  // shared memories (the tile shared by two CTAs, each fetching half),
  // instead of storing push_bytes from its threads' registers.
  bool relay = false;
  int ctas = 0;
  double cycles_per_tile = 0;          // the median CTA, by its own clock
  double slowest_cycles_per_tile = 0;  // the slowest CTA
  double launch_us = 0;                // median of the timed launches
};

// The kernel (one translation unit, with the SM fill probe's helpers).
const char* SmExchangeKernelSource();
constexpr const char* kSmExchangeKernel = "mlajit_sm_exchange";

// In 4 KB copies: tiles of 72 KB from L2 alone (the seesaw's), 40 and 36 KB
// from L2 alone, 24 and 36 KB from the other SM alone, and 40 + 24 and 36 +
// 36 KB from both, then 36 + 36 KB relayed; then 72, 40 and 40 + 24 KB in
// larger copies (8 KB, 16 KB, one a tile's L2 part) and 36 + 36 relayed in
// whole halves. On every pair of SMs at once, from L2-resident data. sm_90
// and later.
absl::StatusOr<std::vector<SmExchange>> MeasureSmExchange(gpu::Backend* backend, int device);

// One line for the bench's report.
std::string FormatSmExchange(const SmExchange& e);

}  // namespace mlajit::bench

#endif  // MLAJIT_TOOLS_BENCH_SM_EXCHANGE_H_
