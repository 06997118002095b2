#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/plan/scheduler.h"

namespace mlajit::plan {
namespace {

using ::testing::HasSubstr;

struct Layout {
  int num_heads = 16;
  bool causal = true;
  std::vector<int32_t> qo, kv;
  LayoutView view() const {
    LayoutView v;
    v.num_heads = num_heads;
    v.causal = causal;
    v.qo_indptr = qo;
    v.kv_indptr = kv;
    return v;
  }
};

Layout MakeLayout(const std::vector<int>& q_lens, const std::vector<int>& kv_lens, int heads,
                  bool causal = true) {
  Layout l;
  l.num_heads = heads;
  l.causal = causal;
  l.qo = {0};
  l.kv = {0};
  for (size_t b = 0; b < q_lens.size(); ++b) {
    l.qo.push_back(l.qo.back() + q_lens[b]);
    l.kv.push_back(l.kv.back() + kv_lens[b]);
  }
  return l;
}

int Visible(const Layout& l, int b, int row) {
  const int q_len = l.qo[b + 1] - l.qo[b], kv_len = l.kv[b + 1] - l.kv[b];
  if (!l.causal) return kv_len;
  return std::clamp(kv_len - q_len + row / l.num_heads + 1, 0, kv_len);
}

// Every KV position visible to every query row is covered by exactly one work
// item of the row's tile, which carries its sequence's record; the merge
// bookkeeping matches the items.
void CheckInvariants(const Layout& l, const ScheduleConfig& cfg, const Schedule& s) {
  const int batch = static_cast<int>(l.qo.size()) - 1;
  ASSERT_EQ(s.work_indptr.size(), static_cast<size_t>(cfg.num_ctas + 1));
  EXPECT_EQ(s.work_indptr.front(), 0);
  EXPECT_EQ(s.work_indptr.back(), static_cast<int32_t>(s.work.size()));
  // coverage[(seq, row_start)] = list of [start, end)
  std::map<std::pair<int, int>, std::vector<std::pair<int, int>>> ranges;
  std::set<int> partial_slots;
  for (const MlaWorkItem& w : s.work) {
    ASSERT_GE(w.seq, 0);
    ASSERT_LT(w.seq, batch);
    EXPECT_EQ(w.row_start % cfg.block_m, 0);
    EXPECT_LE(w.kv_start, w.kv_end);
    EXPECT_EQ(w.kv_start % cfg.block_n, 0) << "pieces start on KV tile boundaries";
    // The item carries its sequence's record (the decode reads it from there).
    EXPECT_EQ(w.seq_info.qo_start, s.seqs[w.seq].qo_start);
    EXPECT_EQ(w.seq_info.q_len, s.seqs[w.seq].q_len);
    EXPECT_EQ(w.seq_info.kv_len, s.seqs[w.seq].kv_len);
    EXPECT_EQ(w.seq_info.kv_base, s.seqs[w.seq].kv_base);
    ranges[{w.seq, w.row_start}].push_back({w.kv_start, w.kv_end});
    if (w.partial >= 0) {
      EXPECT_TRUE(partial_slots.insert(w.partial).second) << "partial slot used twice";
      EXPECT_LT(w.partial, s.num_partials);
    }
  }
  EXPECT_EQ(static_cast<int>(partial_slots.size()), s.num_partials);
  for (int b = 0; b < batch; ++b) {
    const int rows = (l.qo[b + 1] - l.qo[b]) * l.num_heads;
    for (int r0 = 0; r0 < rows; r0 += cfg.block_m) {
      auto it = ranges.find({b, r0});
      ASSERT_NE(it, ranges.end()) << "tile (" << b << ", " << r0 << ") has no work";
      auto pieces = it->second;
      std::sort(pieces.begin(), pieces.end());
      int covered = 0;
      for (auto [a, e] : pieces) {
        EXPECT_EQ(a, covered) << "gap or overlap in sequence " << b << " tile " << r0;
        covered = e;
      }
      for (int r = r0; r < std::min(rows, r0 + cfg.block_m); ++r) {
        EXPECT_GE(covered, Visible(l, b, r)) << "row " << r << " of sequence " << b;
      }
      EXPECT_LE(covered, l.kv[b + 1] - l.kv[b]);
      ranges.erase(it);
    }
  }
  EXPECT_TRUE(ranges.empty()) << "work items for rows that do not exist";
  for (const MlaCombineItem& c : s.combine) {
    EXPECT_GT(c.num_splits, 1);
    for (int k = 0; k < c.num_splits; ++k) {
      int found = 0;
      for (const MlaWorkItem& w : s.work) {
        if (w.partial == c.partial_start + k) {
          EXPECT_EQ(w.seq, c.seq);
          EXPECT_EQ(w.row_start, c.row_start);
          ++found;
        }
      }
      EXPECT_EQ(found, 1);
    }
  }
  const int64_t bound = s.target_cost + 2 * cfg.block_n + 2 * PieceOverhead(cfg.block_m);
  EXPECT_LE(s.max_cta_cost, bound) << "balance bound";
}

TEST(Scheduler, UniformBatchSplitsToFillTheGrid) {
  Layout l = MakeLayout(std::vector<int>(4, 1), std::vector<int>(4, 8192), 16);
  ScheduleConfig cfg{132, 16, 64, 256};
  auto s = BuildSchedule(l.view(), cfg);
  ASSERT_TRUE(s.ok()) << s.status();
  CheckInvariants(l, cfg, *s);
  EXPECT_GT(s->active_ctas, 100) << "batch 4 must still fill most of 132 SMs";
  EXPECT_EQ(s->combine.size(), 4u);
}

TEST(Scheduler, WorkUnitsCountRowTilesTimesTokenTiles) {
  // 16 rows x 100 tokens: 1 x 2 tiles; 64 rows x 64 tokens: 2 x 1; empty: 0.
  Layout l = MakeLayout({1, 4, 2}, {100, 64, 0}, 16);
  EXPECT_EQ(WorkUnits(l.view(), 32, 64), 4);
  EXPECT_EQ(WorkUnits(l.view(), 16, 64), 2 + 4);
  // Paged: lengths from kv_lens, not from whole pages.
  LayoutView v = l.view();
  v.page_size = 64;
  const std::vector<int32_t> pages = {0, 2, 3, 3}, lens = {65, 64, 0};
  v.kv_indptr = pages;
  v.kv_lens = lens;
  ASSERT_TRUE(ValidateLayout(v).ok()) << ValidateLayout(v);
  EXPECT_EQ(WorkUnits(v, 32, 64), 4);
}

// A device-planned plan's bound (kv_len_hint) is MeasureBatch of the largest
// batch its limits allow, and bounds every batch they allow.
TEST(Scheduler, BoundBatchIsTheLargestBatchsMeasure) {
  struct Case {
    int batch, q_len, heads, kv;
  };
  for (const Case& c : {Case{4, 1, 32, 1024}, Case{3, 2, 16, 700}, Case{64, 1, 128, 8192},
                        Case{1, 8, 128, 1}, Case{7, 3, 20, 65}}) {
    const Layout full = MakeLayout(std::vector<int>(c.batch, c.q_len),
                                   std::vector<int>(c.batch, c.kv), c.heads);
    const BatchWork bound = BoundBatch(c.batch, c.q_len, c.heads, c.kv, 132);
    EXPECT_EQ(bound.wide_units, MeasureBatch(full.view(), 132).wide_units)
        << c.batch << " " << c.q_len << " " << c.heads << " " << c.kv;
    EXPECT_EQ(bound.sm_count, 132);
    // Fewer, shorter sequences weigh less.
    const Layout less = MakeLayout(std::vector<int>(std::max(1, c.batch - 1), c.q_len),
                                   std::vector<int>(std::max(1, c.batch - 1), c.kv / 2), c.heads);
    EXPECT_LE(MeasureBatch(less.view(), 132).wide_units, bound.wide_units);
  }
  // (4,1,1024,32): 4 sequences x 1 row tile x 16 token tiles.
  EXPECT_EQ(BoundBatch(4, 1, 32, 1024, 132).wide_units, 64);
  // The largest limits do not overflow.
  EXPECT_EQ(BoundBatch(1 << 20, 8, 128, 0x7fffffff, 132).wide_units,
            int64_t{1 << 20} * 32 * ((int64_t{0x7fffffff} + 63) / 64));
}

// Equal tiles, at least as many CTAs: k aligned pieces per tile, one piece per
// CTA (no CTA straddles two tiles), k splits per merge (none for k = 1).
TEST(Scheduler, EqualTilesAreCutIntoAlignedPieces) {
  struct Case {
    int batch, q_len, kv, heads, block_m, pieces;
  } cases[] = {{128, 1, 8192, 16, 16, 2}, {32, 1, 8192, 16, 16, 8}, {32, 4, 8192, 32, 32, 2},
               // 1024 tokens: the floor (min_cost_per_cta less the overhead) allows 6.
               {4, 1, 1024, 32, 16, 6},
               // 256 causal tiles 2 tokens apart on 264 CTAs: one each, no merges.
               {128, 4, 8192, 16, 32, 1}};
  for (const Case& k : cases) {
    Layout l = MakeLayout(std::vector<int>(k.batch, k.q_len), std::vector<int>(k.batch, k.kv),
                          k.heads, /*causal=*/true);
    ScheduleConfig cfg{264, k.block_m, 64, 256};
    auto s = BuildSchedule(l.view(), cfg);
    ASSERT_TRUE(s.ok()) << s.status();
    CheckInvariants(l, cfg, *s);
    SCOPED_TRACE(k.batch);
    for (int c = 0; c < cfg.num_ctas; ++c) {
      EXPECT_LE(s->work_indptr[c + 1] - s->work_indptr[c], 1) << "CTA " << c;
    }
    const int tiles = k.batch * (k.q_len * k.heads / k.block_m);
    EXPECT_EQ(static_cast<int>(s->combine.size()), k.pieces > 1 ? tiles : 0);
    for (const MlaCombineItem& c : s->combine) EXPECT_EQ(c.num_splits, k.pieces);
    EXPECT_EQ(s->pieces_per_tile, k.pieces);
  }
}

// Below 2 * block_n plus a piece's overhead, min_cost_per_cta no longer
// binds: the 1024-token tiles above get 1024 / 128 = 8 pieces, not 6.
TEST(Scheduler, PiecesStopAtTwoKvTilesWhenTheCostFloorIsLow) {
  Layout l = MakeLayout(std::vector<int>(4, 1), std::vector<int>(4, 1024), 32, /*causal=*/true);
  for (const int min_cost : {64, 128, 224}) {
    ScheduleConfig cfg{264, 16, 64, min_cost};
    auto s = BuildSchedule(l.view(), cfg);
    ASSERT_TRUE(s.ok()) << s.status();
    CheckInvariants(l, cfg, *s);
    EXPECT_EQ(s->pieces_per_tile, 8) << min_cost;
    for (const MlaCombineItem& c : s->combine) EXPECT_EQ(c.num_splits, 8) << min_cost;
  }
}

TEST(Scheduler, NearlyEqualTilesKeepTheInvariants) {
  // One short and one empty sequence among equal ones: still the aligned rule
  // (the deficit is small), with fewer pieces for the short tile.
  std::vector<int> kv(100, 4096);
  kv[7] = 100;
  kv[50] = 0;
  Layout l = MakeLayout(std::vector<int>(100, 1), kv, 16);
  ScheduleConfig cfg{264, 16, 64, 256};
  auto s = BuildSchedule(l.view(), cfg);
  ASSERT_TRUE(s.ok()) << s.status();
  CheckInvariants(l, cfg, *s);
}

TEST(Scheduler, ShortSequencesAreNotSplit) {
  Layout l = MakeLayout(std::vector<int>(128, 1), std::vector<int>(128, 1024), 16);
  ScheduleConfig cfg{132, 16, 64, 256};
  auto s = BuildSchedule(l.view(), cfg);
  ASSERT_TRUE(s.ok());
  CheckInvariants(l, cfg, *s);
  EXPECT_LE(s->combine.size(), 132u);
}

TEST(Scheduler, TilesTooShortToSplitTakeACtaEach) {
  // Tiles shorter than the split floor: the cut line would pack several on
  // some CTAs, a second dependent chain each, while the rest idle.
  const ScheduleConfig cfg{264, 16, 64, 224};
  auto expect_one_tile_per_cta = [&](const Layout& l, int tiles) {
    auto s = BuildSchedule(l.view(), cfg);
    ASSERT_TRUE(s.ok()) << s.status();
    CheckInvariants(l, cfg, *s);
    EXPECT_EQ(s->active_ctas, tiles);
    for (int c = 0; c < cfg.num_ctas; ++c) {
      EXPECT_LE(s->work_indptr[c + 1] - s->work_indptr[c], 1) << "CTA " << c;
    }
    EXPECT_TRUE(s->combine.empty());
  };
  // Eight one-token tiles (two per sequence of 32 heads).
  expect_one_tile_per_cta(MakeLayout(std::vector<int>(4, 1), std::vector<int>(4, 1), 32), 8);
  // Lengths that differ (1..100 tokens, none long enough to split), and an
  // empty sequence.
  std::vector<int> kv;
  for (int b = 0; b < 40; ++b) kv.push_back(b == 7 ? 0 : 1 + (b * 37) % 100);
  expect_one_tile_per_cta(MakeLayout(std::vector<int>(40, 1), kv, 16), 40);
}

TEST(Scheduler, EmptySequences) {
  // q_len 0 (skipped), kv_len 0 (one empty item: zeros and lse = -inf).
  Layout l = MakeLayout({0, 1, 2, 0}, {100, 0, 50, 0}, 8);
  ScheduleConfig cfg{4, 16, 64, 64};
  auto s = BuildSchedule(l.view(), cfg);
  ASSERT_TRUE(s.ok());
  CheckInvariants(l, cfg, *s);
  int empty_items = 0, seq0_items = 0;
  for (const MlaWorkItem& w : s->work) {
    if (w.seq == 1) {
      ++empty_items;
      EXPECT_EQ(w.kv_start, w.kv_end);
    }
    if (w.seq == 0 || w.seq == 3) ++seq0_items;
  }
  EXPECT_EQ(empty_items, 1);
  EXPECT_EQ(seq0_items, 0);
}

TEST(Scheduler, CausalTilesOnlyNeedTheirPrefix) {
  // q_len 4 > kv_len 2: the first rows see nothing at all.
  Layout l = MakeLayout({4}, {2}, 16);
  ScheduleConfig cfg{8, 16, 16, 16};
  auto s = BuildSchedule(l.view(), cfg);
  ASSERT_TRUE(s.ok());
  CheckInvariants(l, cfg, *s);
  for (const MlaWorkItem& w : s->work) {
    if (w.row_start < 32) {
      EXPECT_EQ(w.kv_end, 0) << "rows of t=0,1 see no token";
    }
  }
}

TEST(Scheduler, RandomLayoutsKeepInvariants) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    const int batch = 1 + rng() % 40;
    const int heads = 1 + rng() % 128;
    std::vector<int> q(batch), kv(batch);
    for (int b = 0; b < batch; ++b) {
      q[b] = rng() % 9;
      kv[b] = (rng() % 4 == 0) ? static_cast<int>(rng() % 70000) : static_cast<int>(rng() % 3000);
    }
    if (round % 3 == 0) {  // equal sequences but one (the aligned-pieces rule)
      for (int b = 1; b < batch; ++b) {
        q[b] = q[0];
        kv[b] = kv[0];
      }
    }
    Layout l = MakeLayout(q, kv, heads, rng() % 2 == 0);
    const int bm = 16 << (rng() % 3);
    ScheduleConfig cfg{1 + static_cast<int>(rng() % 140), bm, bm == 16 ? 64 : 32,
                       static_cast<int>(rng() % 512)};
    auto s = BuildSchedule(l.view(), cfg);
    ASSERT_TRUE(s.ok()) << s.status();
    CheckInvariants(l, cfg, *s);
    if (HasFailure()) {
      ADD_FAILURE() << "round " << round << " batch " << batch << " heads " << heads;
      return;
    }
  }
}

// The device planner's fixed buffers (DevicePlan::ReserveForDevicePlanner)
// rely on these bounds: items <= tiles + (num_ctas - 1), partial slots <=
// 2 * (num_ctas - 1), merges <= num_ctas - 1.
TEST(Scheduler, OutputsFitTheDevicePlannersCapacities) {
  std::mt19937 rng(11);
  for (int round = 0; round < 300; ++round) {
    const int batch = 1 + rng() % 64;
    const int heads = 1 + rng() % 128;
    std::vector<int> q(batch), kv(batch);
    for (int b = 0; b < batch; ++b) {
      q[b] = rng() % 9;
      kv[b] = rng() % 3 == 0 ? static_cast<int>(rng() % 200000) : static_cast<int>(rng() % 500);
    }
    Layout l = MakeLayout(q, kv, heads, rng() % 2 == 0);
    const int bm = 16 << (rng() % 3);
    ScheduleConfig cfg{1 + static_cast<int>(rng() % 300), bm, bm == 16 ? 64 : 32,
                       static_cast<int>(rng() % 300)};
    auto s = BuildSchedule(l.view(), cfg);
    ASSERT_TRUE(s.ok()) << s.status();
    const MlaScheduleShape shape = ToShape(l.view(), cfg);
    int64_t tiles = 0;
    for (int b = 0; b < batch; ++b) tiles += MlaTilesOfSequence(q[b], shape);
    const int64_t cuts = cfg.num_ctas - 1;
    EXPECT_LE(static_cast<int64_t>(s->work.size()), tiles + cuts) << "round " << round;
    EXPECT_LE(s->num_partials, 2 * cuts) << "round " << round;
    EXPECT_LE(static_cast<int64_t>(s->combine.size()), cuts) << "round " << round;
    if (HasFailure()) return;
  }
}

// The shared algorithm's cuts never go backwards and interior cuts are
// distinct, which the piece enumeration and the partial numbering assume.
TEST(Scheduler, CutsAreMonotonicAndInteriorCutsDistinct) {
  std::mt19937 rng(5);
  int aligned_rounds = 0;
  for (int round = 0; round < 200; ++round) {
    const int batch = 1 + rng() % 20;
    std::vector<MlaTile> tiles;
    MlaScheduleShape shape{1 + static_cast<int>(rng() % 128), static_cast<int>(rng() % 2),
                           16 << (rng() % 3), 32, 1 + static_cast<int>(rng() % 264),
                           static_cast<int>(rng() % 300)};
    // Every other round a batch of equal sequences (some with one short or
    // empty one), which the aligned-pieces rule cuts.
    const bool equal = round % 2 == 1;
    const int common_q = 1 + rng() % 8, common_kv = static_cast<int>(rng() % 50000);
    const int odd_one = rng() % (2 * batch);
    for (int b = 0; b < batch; ++b) {
      int q_len = rng() % 9, kv_len = static_cast<int>(rng() % 50000);
      if (equal) {
        q_len = common_q;
        kv_len = b == odd_one ? kv_len % 300 : common_kv;
      }
      for (int i = 0; i < MlaTilesOfSequence(q_len, shape); ++i) {
        tiles.push_back(MlaMakeTile(b, i, q_len, kv_len, shape));
      }
    }
    std::vector<long long> start(tiles.size() + 1, 0);
    for (size_t t = 0; t < tiles.size(); ++t) start[t + 1] = start[t] + MlaTileCost(tiles[t]);
    long long max_cost = 0;
    for (const MlaTile& t : tiles) max_cost = std::max(max_cost, MlaTileCost(t));
    const MlaCutRule rule =
        MlaChooseCuts(start.back(), max_cost, static_cast<long long>(tiles.size()), shape);
    aligned_rounds += rule.pieces_per_tile > 0;
    MlaCut prev{0, 0};
    for (int c = 0; c <= shape.num_ctas; ++c) {
      const MlaCut cut = MlaFindCut(c, rule, start.data(), tiles.data(),
                                    static_cast<int>(tiles.size()), shape.block_n);
      ASSERT_TRUE(cut.tile > prev.tile || (cut.tile == prev.tile && cut.token >= prev.token))
          << "round " << round << " cut " << c;
      if (cut.token > 0) {
        EXPECT_FALSE(cut.tile == prev.tile && cut.token == prev.token) << "duplicate interior cut";
        EXPECT_LT(cut.token, tiles[cut.tile].kv_need);
        EXPECT_EQ(cut.token % shape.block_n, 0);
      }
      prev = cut;
    }
    EXPECT_EQ(prev.tile, static_cast<int>(tiles.size())) << "the last cut closes the line";
  }
  EXPECT_GT(aligned_rounds, 10) << "the aligned-pieces rule must be exercised";
}

TEST(Scheduler, RejectsBadLayouts) {
  Layout l = MakeLayout({1, 1, 1}, {40, 17, 5}, 16);
  l.kv = {0, 40, 17, 22};
  auto s = BuildSchedule(l.view(), {});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("kv_indptr[2]=17 < kv_indptr[1]=40"));

  l = MakeLayout({1, 9}, {4, 4}, 16);
  s = BuildSchedule(l.view(), {});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("q_len of sequence 1 = 9"));

  l = MakeLayout({1}, {4}, 129);
  EXPECT_THAT(BuildSchedule(l.view(), {}).status().message(), HasSubstr("num_heads=129"));

  l = MakeLayout({1}, {4}, 16);
  l.qo = {1, 2};
  EXPECT_THAT(BuildSchedule(l.view(), {}).status().message(), HasSubstr("qo_indptr[0]=1"));

  l = MakeLayout({1}, {4}, 16);
  LayoutView v = l.view();
  v.page_size = 16;
  std::vector<int32_t> lens = {65};  // 4 pages of 16 hold at most 64 tokens
  v.kv_lens = lens;
  EXPECT_THAT(ValidateLayout(v).message(), HasSubstr("kv_lens[0]=65"));
  v.page_size = 8;
  EXPECT_THAT(ValidateLayout(v).message(), HasSubstr("page_size=8"));
}

}  // namespace
}  // namespace mlajit::plan
