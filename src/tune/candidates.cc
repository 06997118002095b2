#include "src/tune/candidates.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "src/plan/scheduler.h"

namespace mlajit::tune {
namespace {

struct Tiles {
  int m, n, warps;
};

// Kernel shapes per path (tile_policy.cc explains each path's use).
constexpr Tiles kWgmmaTiles[] = {{16, 64, 4}, {32, 64, 4}};
// bf16 only: 32-row tiles as two warpgroups of 16 rows sharing the KV stages.
constexpr Tiles kBf16RowPairTiles = {32, 64, 8};
// 64-row tiles: two warpgroups (bf16's policy; fp8 too before v22) or, fp8
// only, three (a scorer and two accumulators).
constexpr Tiles kWgmmaRowsTiles[] = {{64, 64, 8}, {64, 64, 12}};
// MXFP4 with up to 32 rows on sm_90a: the swap-AB tiles with two converting
// warpgroups (12 warps) or one (8).
constexpr Tiles kMxfp4WgmmaTiles[] = {{16, 64, 12}, {32, 64, 12}, {16, 64, 8}, {32, 64, 8}};
constexpr Tiles kMmaTiles[] = {{16, 64, 8}, {16, 32, 4}, {32, 32, 8}, {32, 16, 4},
                               {32, 64, 8}, {64, 64, 8}, {64, 32, 8}};

// The smallest tile height that holds `rows` (16, 32 or 64).
int RowTileFor(int rows) { return rows <= 16 ? 16 : rows <= 32 ? 32 : 64; }

}  // namespace

bool SameShape(const plan::TileShape& a, const plan::TileShape& b) {
  return a.block_m == b.block_m && a.block_n == b.block_n && a.num_warps == b.num_warps &&
         a.num_stages == b.num_stages && a.ctas_per_sm == b.ctas_per_sm &&
         a.min_split_cost == b.min_split_cost;
}

int PickFastest(const std::vector<double>& median_us, double margin) {
  if (median_us.empty() || !(median_us[0] >= 0)) return -1;
  int best = 0;
  for (int i = 1; i < static_cast<int>(median_us.size()); ++i) {
    if (median_us[i] >= 0 && median_us[i] < median_us[best]) best = i;
  }
  return median_us[best] < median_us[0] * (1.0 - margin) ? best : 0;
}

std::string ShapeName(const plan::TileShape& t) {
  return absl::StrCat(t.block_m, "x", t.block_n, " w", t.num_warps, " s", t.num_stages, " c",
                      t.ctas_per_sm, " split", t.min_split_cost);
}

std::vector<plan::TileShape> Candidates(const std::string& arch, int rows, KvFormat kv_format,
                                        const plan::BatchWork* work, int page_size) {
  const plan::TileShape policy = plan::ChooseTiles(arch, rows, kv_format, work, page_size);
  std::vector<plan::TileShape> out = {policy};
  if (!plan::HasTensorCorePath(arch)) return out;
  auto add = [&](plan::TileShape t) {
    absl::StatusOr<plan::TileShape> done = plan::CompleteTileShape(arch, kv_format, t);
    if (!done.ok()) return;
    for (const plan::TileShape& c : out) {
      if (SameShape(c, *done)) return;
    }
    out.push_back(*done);
  };
  const int tallest = RowTileFor(rows);
  // Per tile shape: two stages and the most that fit, each with two CTAs per
  // SM where they fit and with one. Tiles under half the rows' height are
  // left out (each row tile reads the sequence's KV again), except fp8's
  // 16-row swap-AB tiles, which small batches of up to 128 rows run faster
  // than 64-row ones (RESULTS.md v72).
  const bool fp8_narrow = plan::Fp8RowsMayTakeNarrowTiles(arch, kv_format, rows);
  auto add_tiles = [&](const Tiles& s) {
    const bool narrow_ok = fp8_narrow && s.m == 16;
    if (s.m > tallest || (2 * s.m < tallest && !narrow_ok)) return;
    plan::TileShape t;
    t.block_m = s.m;
    t.block_n = s.n;
    t.num_warps = s.warps;
    t.ctas_per_sm = 1;
    int most = 2;
    for (int stages = 4; stages > 2 && most == 2; --stages) {
      t.num_stages = stages;
      if (plan::CheckTileShape(arch, kv_format, t).ok()) most = stages;
    }
    for (int stages : {2, most}) {
      for (int ctas = 2; ctas >= 1; --ctas) {
        t.num_stages = stages;
        t.ctas_per_sm = ctas;
        add(t);
      }
    }
  };
  if (arch == "sm_90a" && kv_format != KvFormat::kMxfp4) {
    for (const Tiles& s : kWgmmaTiles) add_tiles(s);
    if (kv_format == KvFormat::kBf16) add_tiles(kBf16RowPairTiles);
    if (rows > 32) {
      for (const Tiles& s : kWgmmaRowsTiles) add_tiles(s);
    }
  } else if (arch == "sm_90a") {
    // MXFP4: the swap-AB tiles (the policy's since v30 for every row count),
    // and for tall rows the mma.sync path's 64-row tiles, which convert each
    // KV tile once for 64 rows.
    for (const Tiles& s : kMxfp4WgmmaTiles) add_tiles(s);
    if (rows > 32) {
      for (const Tiles& s : kMmaTiles) add_tiles(s);
    }
  } else {
    for (const Tiles& s : kMmaTiles) add_tiles(s);
  }
  // Higher split floors matter where the batch leaves SMs idle or pays a
  // merge; they are tried on the policy's shape alone, which keeps the count
  // down.
  for (int cost : {256, 1024}) {
    plan::TileShape t = policy;
    t.min_split_cost = cost;
    add(t);
  }
  // No split at all (sequences of up to kMaxSplitCost tokens): no partials
  // and no merge, at the price of fewer busy CTAs. On memory-bound batches
  // of one CTA's worth of sequences or more the merge is 3.1-3.4 us of a call
  // (RESULTS.md v63, v71). Where the policy runs two CTAs an SM, also one
  // with the most stages that fit, so that an SM keeps as many bytes in
  // flight with one busy CTA as it did with two.
  plan::TileShape unsplit = policy;
  unsplit.min_split_cost = plan::kMaxSplitCost;
  add(unsplit);
  if (policy.ctas_per_sm == 2) {
    unsplit.ctas_per_sm = 1;
    for (unsplit.num_stages = 4; unsplit.num_stages > policy.num_stages; --unsplit.num_stages) {
      if (plan::CheckTileShape(arch, kv_format, unsplit).ok()) break;
    }
    add(unsplit);
  }
  return out;
}

namespace {

// Two schedules give every CTA the same work items (sequence, rows, KV range,
// partial slot) in the same order.
bool SameWork(const plan::Schedule& a, const plan::Schedule& b) {
  if (a.work_indptr != b.work_indptr || a.work.size() != b.work.size()) return false;
  for (size_t i = 0; i < a.work.size(); ++i) {
    const MlaWorkItem &x = a.work[i], &y = b.work[i];
    if (x.seq != y.seq || x.row_start != y.row_start || x.kv_start != y.kv_start ||
        x.kv_end != y.kv_end || x.partial != y.partial) {
      return false;
    }
  }
  return true;
}

// The same kernel: every field but the split floor.
bool SameKernel(const plan::TileShape& a, const plan::TileShape& b) {
  plan::TileShape c = b;
  c.min_split_cost = a.min_split_cost;
  return SameShape(a, c);
}

}  // namespace

std::vector<plan::TileShape> DropRepeatedSchedules(const std::vector<plan::TileShape>& shapes,
                                                   const plan::LayoutView& layout, int sm_count) {
  std::vector<plan::TileShape> kept;
  std::vector<std::optional<plan::Schedule>> schedules;  // kept's, when they build
  for (const plan::TileShape& t : shapes) {
    absl::StatusOr<plan::Schedule> s =
        plan::BuildSchedule(layout, plan::ScheduleConfigFor(t, sm_count));
    bool repeat = false;
    for (size_t j = 0; j < kept.size() && s.ok() && !repeat; ++j) {
      repeat = SameKernel(kept[j], t) && schedules[j].has_value() && SameWork(*schedules[j], *s);
    }
    if (repeat) continue;
    kept.push_back(t);
    schedules.push_back(s.ok() ? std::optional<plan::Schedule>(*std::move(s)) : std::nullopt);
  }
  return kept;
}

}  // namespace mlajit::tune
