// The host schedule of benchmark cases, computed on the CPU (no GPU needed):
// the tile shape the policy picks for each batch, how the scheduler cuts it,
// and how evenly the CTAs share the work. A schedule problem (a CTA with twice
// the average work, a tile split 97 ways) shows here before any timing.
//
// Three lower bounds on a call's time beside it, at the H200's rates:
//  - in_us: the bytes that enter the busiest SM (sm_in_KB: each work item's
//    KV positions as stored and its Q rows; at least the busiest CTA's and
//    the mean over SMs) at 30.2 bytes a clock at 1980 MHz, the most L2 has
//    given each SM with every SM busy (`mlajit_bench --sm-fill`, RESULTS.md
//    v55; one SM alone takes in about 105). A KV tile read by several row
//    tiles of a sequence enters each of their SMs; split pieces each load
//    their Q.
//  - mma_us: the products the busiest SM issues (block_m rows by whole
//    64-token tiles), each in the precision the accuracy contract allows
//    (roofline.h), at the tensor cores' peak per SM and clock, 1980 MHz.
//  - dram_us: every KV position, Q row and output row once at DRAM's read
//    rate: DESIGN.md's 4.45 TB/s, or the rate the bench measured on its GPU.
// None counts launches, the merge or any latency.
//
//   mlajit_bench --schedule sm_90a:132 --suite all
#ifndef MLAJIT_TOOLS_BENCH_SCHEDULE_REPORT_H_
#define MLAJIT_TOOLS_BENCH_SCHEDULE_REPORT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/plan/scheduler.h"
#include "src/reference/batch_generator.h"
#include "tools/bench/design_rates.h"

namespace mlajit::bench {

// The scheduler's view of `layout`, a layout of a batch like `batch`
// (reference::GenerateLayout); it points into `layout`.
plan::LayoutView LayoutViewOf(const reference::BatchConfig& batch,
                              const reference::BatchLayout& layout);

// The three bounds of a schedule (above), without launches.
struct SmBounds {
  double sm_in_bytes = 0;  // into the busiest SM
  double in_us = 0, mma_us = 0, dram_us = 0;
  double bound_us() const;  // the largest of the three
};
SmBounds BoundsOf(const plan::Schedule& schedule, const plan::ScheduleConfig& config, int sm_count,
                  const reference::BatchConfig& batch,
                  double dram_bytes_per_second = kDesignReadBytesPerSecond);
// The schedule `config` makes of `layout` (of a batch like `batch`), and its
// bounds: for the bench, which rebuilds the one its plan runs
// (ScheduleConfigOfPlan) on the device's SM count, with the read rate it
// measured (a bound above what the device was seen to do is no bound).
absl::StatusOr<SmBounds> ScheduleBounds(const reference::BatchConfig& batch,
                                        const reference::BatchLayout& layout,
                                        const plan::ScheduleConfig& config, int sm_count,
                                        double dram_bytes_per_second = kDesignReadBytesPerSecond);
// A plan's scheduler parameters from mlajit_plan_describe_json's "num_ctas",
// "block_m", "block_n" and "min_split_cost".
absl::StatusOr<plan::ScheduleConfig> ScheduleConfigOfPlan(const std::string& plan_json);

// `target`: "ARCH" or "ARCH:SM_COUNT" (default 132 SMs). Prints one line per
// (name, config). kInvalidArgument for a malformed target.
absl::Status PrintSchedules(
    const std::string& target,
    const std::vector<std::pair<std::string, reference::BatchConfig>>& cases);

}  // namespace mlajit::bench

#endif  // MLAJIT_TOOLS_BENCH_SCHEDULE_REPORT_H_
