// The scheduler: turns one batch layout (indptr contents) into the work items
// of the persistent decode kernel, balanced over a fixed grid of CTAs.
//
//   LayoutView layout{num_heads, page_size, qo_indptr, kv_indptr, kv_lens, causal};
//   MLAJIT_RETURN_IF_ERROR(ValidateLayout(layout));
//   MLAJIT_ASSIGN_OR_RETURN(Schedule s, BuildSchedule(layout, {132, 64, 32}));
//
// Work: each sequence's q_len * H query rows (q position major, head minor) are
// cut into tiles of block_m rows; each tile needs KV positions [0, visible) where
// `visible` is what its last row may see. The tiles are laid end to end on a
// cost line, cost(piece) = tokens + 4 * rows + 32 (Q load and result write), and
// the line is cut into equal shares, one per CTA; cuts inside a tile move to
// multiples of block_n. A tile cut into several pieces writes partials
// (consecutive slots) that one MlaCombineItem merges by LSE. The algorithm is
// kernel_templates/mla_schedule.h, shared with the device planner, which builds
// the same schedule on the GPU.
//
// Balance bound (tested): every CTA's cost <= target + 2 * block_n + 2 * overhead,
// where target = max(ceil(total / num_ctas), min_cost_per_cta, 2 * block_n), or,
// when equal tiles are each cut into k aligned pieces, ceil(largest tile / k).
#ifndef MLAJIT_SRC_PLAN_SCHEDULER_H_
#define MLAJIT_SRC_PLAN_SCHEDULER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernel_templates/mla_params.h"
#include "kernel_templates/mla_schedule.h"
#include "src/plan/tile_policy.h"

namespace mlajit::plan {

struct LayoutView {
  int num_heads = 0;
  int page_size = 0;  // 0: flat
  bool causal = true;
  absl::Span<const int32_t> qo_indptr;  // B + 1
  absl::Span<const int32_t> kv_indptr;  // B + 1: tokens (flat) or pages (paged)
  absl::Span<const int32_t> kv_lens;    // paged: B token counts, or empty for full pages
};

// kInvalidArgument naming the argument, index, value and the expectation.
absl::Status ValidateLayout(const LayoutView& layout);

// The batch's work in tiles of block_m query rows x block_n KV tokens (every
// KV token counted, causal or not): a size estimate for the tile policy.
// `layout` must be valid.
int64_t WorkUnits(const LayoutView& layout, int block_m, int block_n);

struct ScheduleConfig {
  int num_ctas = 132;
  int block_m = 64;
  int block_n = 32;
  // Below this, splitting costs more (partials, merge) than the parallelism
  // wins; pieces are never shorter than 2 * block_n tokens either way.
  int min_cost_per_cta = 64;
};

// The scheduler's parameters for kernels of shape `tiles` on sm_count SMs.
ScheduleConfig ScheduleConfigFor(const TileShape& tiles, int sm_count);

// The batch's size as ChooseTiles reads it (wide units of 32 rows x 64 tokens).
// `layout` must be valid.
BatchWork MeasureBatch(const LayoutView& layout, int sm_count);

// MeasureBatch of the largest batch a device-planned plan's limits allow:
// max_batch_size sequences of max_q_len queries and kv_len tokens each
// (kv_len > 0, the caller's mlajit_plan_limits_t::kv_len_hint).
BatchWork BoundBatch(int max_batch_size, int max_q_len, int num_heads, int64_t kv_len,
                     int sm_count);

struct Schedule {
  std::vector<MlaWorkItem> work;      // grouped by CTA
  std::vector<int32_t> work_indptr;   // num_ctas + 1
  std::vector<MlaSeqInfo> seqs;       // one per sequence
  std::vector<MlaCombineItem> combine;
  int32_t num_partials = 0;
  int32_t total_q = 0;                // query tokens (qo_indptr[B])
  int32_t max_q_len = 0;
  int64_t total_cost = 0;
  int64_t target_cost = 0;
  int32_t pieces_per_tile = 0;        // > 0: equal tiles cut into that many aligned pieces
  int64_t max_cta_cost = 0;
  int32_t active_ctas = 0;            // CTAs with at least one item
};

int64_t PieceOverhead(int rows);

// The algorithm's parameters (mla_schedule.h) for a layout and a config.
MlaScheduleShape ToShape(const LayoutView& layout, const ScheduleConfig& config);

absl::StatusOr<Schedule> BuildSchedule(const LayoutView& layout, const ScheduleConfig& config);

}  // namespace mlajit::plan

#endif  // MLAJIT_SRC_PLAN_SCHEDULER_H_
