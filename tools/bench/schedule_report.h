// The host schedule of benchmark cases, computed on the CPU (no GPU needed):
// the tile shape the policy picks for each batch, how the scheduler cuts it,
// and how evenly the CTAs share the work. A schedule problem (a CTA with twice
// the average work, a tile split 97 ways) shows here before any timing.
//
// Three lower bounds on a call's time beside it, at the H200's rates:
//  - in_us: the bytes that enter the busiest SM (sm_in_KB: each work item's
//    KV positions as stored and its Q rows; at least the busiest CTA's and
//    the mean over SMs) at one SM's fill rate, 26.7 bytes a clock at 1980
//    MHz (`mlajit_bench --sm-fill`). A KV tile read by several row tiles of
//    a sequence enters each of their SMs; split pieces each load their Q.
//  - mma_us: the products the busiest SM issues (block_m rows by whole
//    64-token tiles), each in the precision the accuracy contract allows
//    (roofline.h), at the tensor cores' peak per SM and clock, 1980 MHz.
//  - dram_us: every KV position, Q row and output row once at 4.45 TB/s.
// None counts launches, the merge or any latency.
//
//   mlajit_bench --schedule sm_90a:132 --suite all
#ifndef MLAJIT_TOOLS_BENCH_SCHEDULE_REPORT_H_
#define MLAJIT_TOOLS_BENCH_SCHEDULE_REPORT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "src/reference/batch_generator.h"

namespace mlajit::bench {

// `target`: "ARCH" or "ARCH:SM_COUNT" (default 132 SMs). Prints one line per
// (name, config). kInvalidArgument for a malformed target.
absl::Status PrintSchedules(
    const std::string& target,
    const std::vector<std::pair<std::string, reference::BatchConfig>>& cases);

}  // namespace mlajit::bench

#endif  // MLAJIT_TOOLS_BENCH_SCHEDULE_REPORT_H_
