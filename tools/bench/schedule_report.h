// The host schedule of benchmark cases, computed on the CPU (no GPU needed):
// the tile shape the policy picks for each batch, how the scheduler cuts it,
// and how evenly the CTAs share the work. A schedule problem (a CTA with twice
// the average work, a tile split 97 ways) shows here before any timing.
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
