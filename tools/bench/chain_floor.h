// What a small split case's data flow costs with none of its arithmetic: a
// call shaped like (4,1,1024,32) or (32,1,1024,32), fp8 or bf16, with its
// split, whose
// kernels make exactly the decode's and the merge's dependent memory
// accesses and nothing else, timed the way the bench times a case.
//
// Why: the launch floor (launch_floor.h) says what a call's launches cost on
// their own. A decode call also pays a chain of dependent memory round trips
// that no kernel design removes while the work is split over CTAs: the work
// item's record, then Q and the KV tiles it names (from DRAM: the bench
// rotates inputs larger than L2), then the partial rows' stores; then the
// merge reads those partials back and writes out. This probe runs that chain
// with the copies done as the decode does them (16-byte cp.async into shared
// memory, all of a CTA's in flight at once) and no products, softmax or
// conversions, so its time bounds from below what any kernel with this data
// flow can reach on the device. The merge kernel is a programmatic dependent
// of the decode, as the library launches it.
//
//   MLAJIT_ASSIGN_OR_RETURN(ChainFloor f,
//                           MeasureChainFloor(backend, 0, SmallestCaseChain(), 200.0, 300));
//   std::printf("%s\n", FormatChainFloor(f).c_str());
#ifndef MLAJIT_TOOLS_BENCH_CHAIN_FLOOR_H_
#define MLAJIT_TOOLS_BENCH_CHAIN_FLOOR_H_

#include <string>

#include "absl/status/statusor.h"
#include "src/gpu/backend.h"

namespace mlajit::bench {

// The shape a probe mirrors: a case of 32 query rows per sequence as the
// host schedule runs it on an H200 (`mlajit_bench --schedule sm_90a:132`),
// 16-row tiles, two per sequence, each split into pieces of whole 64-token
// KV tiles, one CTA per piece.
struct ChainShape {
  const char* name = "";
  int row_tiles = 0;
  int splits = 0;           // pieces per row tile (the merge's fan-in), 1..8
  int tiles_per_piece = 0;  // 64-token KV tiles a CTA reads
  int rows = 16;            // query rows per tile
  int token_bytes = 576;    // a KV token as stored: fp8 576, bf16 1152
  int ctas_per_sm = 2;      // the schedule's grid: fp8 two CTAs per SM, bf16 one
};
// fp8 (4,1,1024,32): 8 row tiles x 8 pieces of 2 tiles, 64 working CTAs.
ChainShape SmallestCaseChain();
// fp8 (32,1,1024,32): 64 row tiles x 4 pieces of 4 tiles, 256 working CTAs.
ChainShape BatchOf32Chain();
// bf16 (4,1,1024,32): as fp8's, 72 KB tiles, a grid of one CTA per SM.
ChainShape SmallestCaseChainBf16();
// bf16 (32,1,1024,32): 64 row tiles x 2 pieces of 8 tiles, 128 working CTAs.
ChainShape BatchOf32ChainBf16();

struct ChainFloor {
  ChainShape shape;
  int kv_copies = 0;            // rotated KV buffers (together larger than L2)
  double decode_only_us = 0;    // median, held: the decode-shaped kernel alone
  double decode_merge_us = 0;   // median, held: decode and its merge, chained
  double decode_merge_l2_us = 0;  // the same with one KV buffer (L2-resident after the first)
};

// The probe's two kernels (mlajit_chain_decode, mlajit_chain_merge), compiled
// by the CPU tests too.
const char* ChainFloorKernelSource();

// Each figure after `warmup_ms` of device time, the median of `runs` calls,
// the stream held before each (stream_hold.h).
absl::StatusOr<ChainFloor> MeasureChainFloor(gpu::Backend* backend, int device,
                                             const ChainShape& shape, double warmup_ms, int runs);

// One line for the bench's report.
std::string FormatChainFloor(const ChainFloor& f);

}  // namespace mlajit::bench

#endif  // MLAJIT_TOOLS_BENCH_CHAIN_FLOOR_H_
