// The tile shapes the autotuner times for one class of batch: the tile
// policy's own choice first, then the other shapes the target's kernel paths
// can run for that many query rows (tile rows, stages, CTAs per SM; see
// Candidates), two higher split floors for the policy's shape and no split at
// all. Every candidate passes plan::CheckTileShape, and the GPU tests run each
// against the CPU reference.
//
//   for (const plan::TileShape& t : Candidates("sm_90a", 16, KvFormat::kFp8E4m3, &work)) ...
#ifndef MLAJIT_SRC_TUNE_CANDIDATES_H_
#define MLAJIT_SRC_TUNE_CANDIDATES_H_

#include <string>
#include <vector>

#include "src/base/mla_types.h"
#include "src/plan/scheduler.h"
#include "src/plan/tile_policy.h"

namespace mlajit::tune {

// work: the batch's size (null for plans sized by limits) and page_size (0:
// flat), as ChooseTiles takes them. Targets without tensor cores have one
// shape: the policy's.
std::vector<plan::TileShape> Candidates(const std::string& arch, int rows, KvFormat kv_format,
                                        const plan::BatchWork* work, int page_size = 0);

bool SameShape(const plan::TileShape& a, const plan::TileShape& b);

// `shapes` without each one that differs from an earlier kept one only in
// its split floor and gives `layout` the same schedule on `sm_count` SMs: it
// would time the same kernel on the same work items. The first shape always
// stays; a shape whose schedule does not build stays (the tuner reports why).
std::vector<plan::TileShape> DropRepeatedSchedules(const std::vector<plan::TileShape>& shapes,
                                                   const plan::LayoutView& layout, int sm_count);

// The candidate to keep, from each candidate's median time (negative: it
// failed or disagreed). Candidate 0 is the policy's and stays unless another
// is faster by more than `margin` (a fraction: 0.02 for 2 %), so that timing
// noise does not swap shapes. -1 when candidate 0 has no time.
int PickFastest(const std::vector<double>& median_us, double margin);

// "16x64 w4 s2 c2 split64": for logs and reports.
std::string ShapeName(const plan::TileShape& t);

}  // namespace mlajit::tune

#endif  // MLAJIT_SRC_TUNE_CANDIDATES_H_
