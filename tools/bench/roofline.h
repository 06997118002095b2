// A case's roofline floors, from the bytes it must move, the FLOPs of its two
// products and the measured ceilings (ceilings.h):
//  - floor: the larger of the bytes at the read bandwidth and every FLOP at
//    the tensor rate of the KV format (fp8 for fp8 and MXFP4 KV, bf16 for
//    bf16 KV). The performance targets are stated against this one.
//  - contract floor: the same with each product at the rate the accuracy
//    contract (DESIGN.md §1) lets it run. P V takes P in 16 bits on every
//    path (P in e4m3 misses the fp8 paths' 1e-2 bar: tools/bench/RESULTS.md
//    v35), so it runs at the bf16 rate; S runs at the fp8 rate only when
//    both operands are e4m3 (fp8 or MXFP4 KV with Q quantised, a8), else at
//    the bf16 rate (bf16 Q is used as bf16: a16). No kernel can beat this
//    one without changing the numerics (RESULTS.md v40).
//
//   CaseFloors f = RooflineFloors(work, KvFormat::kFp8E4m3, QMode::kBf16, ceilings);
#ifndef MLAJIT_TOOLS_BENCH_ROOFLINE_H_
#define MLAJIT_TOOLS_BENCH_ROOFLINE_H_

#include "src/base/mla_types.h"
#include "tools/bench/ceilings.h"

namespace mlajit::bench {

struct CaseWork {
  double bytes = 0;     // KV read once, Q read once, out written once
  double s_flops = 0;   // S = Q K^T over the visible tokens: 2 * 576 per row and token
  double pv_flops = 0;  // O = P V: 2 * 512 per row and token
};

struct CaseFloors {
  double floor_us = 0;
  double contract_floor_us = 0;
};

CaseFloors RooflineFloors(const CaseWork& work, KvFormat kv, QMode q, const Ceilings& ceilings);

}  // namespace mlajit::bench

#endif  // MLAJIT_TOOLS_BENCH_ROOFLINE_H_
