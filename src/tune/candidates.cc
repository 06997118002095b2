#include "src/tune/candidates.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

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
  // left out: each row tile reads the sequence's KV again.
  auto add_tiles = [&](const Tiles& s) {
    if (s.m > tallest || 2 * s.m < tallest) return;
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
  // The split floor matters only where the batch leaves SMs idle; it is tried
  // on the policy's shape alone, which keeps the count down.
  for (int cost : {256, 1024}) {
    plan::TileShape t = policy;
    t.min_split_cost = cost;
    add(t);
  }
  return out;
}

}  // namespace mlajit::tune
