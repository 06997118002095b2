// The per-SM bounds of a case's host schedule against hand computations, and
// the scheduler parameters the bench reads back from a plan's description.
#include "tools/bench/schedule_report.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/plan/scheduler.h"
#include "src/plan/tile_policy.h"
#include "tools/bench/chain_floor.h"

namespace mlajit::bench {
namespace {

using ::testing::DoubleNear;
using ::testing::HasSubstr;

reference::BatchConfig Case(int batch, int q_len, int kv_len, int heads, KvFormat f) {
  reference::BatchConfig c;
  c.batch_size = batch;
  c.q_len = q_len;
  c.kv_len = kv_len;
  c.num_heads = heads;
  c.kv_format = f;
  c.seed = 1234;
  return c;
}

// The scheduler parameters the policy gives `c` on 132 SMs of sm_90a.
plan::ScheduleConfig PolicyConfig(const reference::BatchConfig& c,
                                  const reference::BatchLayout& layout) {
  const plan::BatchWork work = plan::MeasureBatch(LayoutViewOf(c, layout), 132);
  absl::StatusOr<plan::TileShape> t = plan::ChooseTilesWithOverrides(
      "sm_90a", c.q_len * c.num_heads, c.kv_format, &work, nullptr, 0);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? plan::ScheduleConfigFor(*t, 132) : plan::ScheduleConfig{};
}

// The policy's schedule of `c` and its bounds.
SmBounds PolicyBounds(const reference::BatchConfig& c) {
  const reference::BatchLayout layout = reference::GenerateLayout(c);
  absl::StatusOr<SmBounds> b = ScheduleBounds(c, layout, PolicyConfig(c, layout), 132);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.value_or(SmBounds{});
}

TEST(ScheduleBounds, OneLongItemPerSmMatchesTheHandCount) {
  // 128 sequences of 64 rows (q_len 4 x 16 heads), one unsplit item each:
  // 8192 bf16 tokens and 64 Q rows enter each busy SM, 9,510,912 bytes, at
  // 30.2 bytes a clock and 1980 MHz; 64 x 8192 x (576 + 512) x 2 FLOPs of
  // bf16 products at 4096 a clock; KV, Q and output at 4.45 TB/s.
  const SmBounds b = PolicyBounds(Case(128, 4, 8192, 16, KvFormat::kBf16));
  EXPECT_DOUBLE_EQ(b.sm_in_bytes, 8192.0 * 1152 + 64.0 * 1152);
  EXPECT_THAT(b.in_us, DoubleNear(9510912.0 / (30.2 * 1.98e9) * 1e6, 1e-6));
  EXPECT_THAT(b.mma_us, DoubleNear(64.0 * 8192 * 1088 * 2 / (4096 * 1.98e9) * 1e6, 1e-6));
  const double dram = 128.0 * 8192 * 1152 + 128.0 * 4 * 16 * (1152 + 1024);
  EXPECT_THAT(b.dram_us, DoubleNear(dram / 4.45e12 * 1e6, 1e-6));
  EXPECT_DOUBLE_EQ(b.bound_us(), b.dram_us);
}

TEST(ScheduleBounds, DramTakesTheReadRateGiven) {
  // The bench passes the read ceiling it measured: a device that reads at
  // 4.625 TB/s must not run under its own bound (RESULTS.md v59).
  const reference::BatchConfig c = Case(128, 1, 8192, 16, KvFormat::kBf16);
  const reference::BatchLayout layout = reference::GenerateLayout(c);
  absl::StatusOr<SmBounds> design = ScheduleBounds(c, layout, PolicyConfig(c, layout), 132);
  absl::StatusOr<SmBounds> measured =
      ScheduleBounds(c, layout, PolicyConfig(c, layout), 132, 4.625e12);
  ASSERT_TRUE(design.ok() && measured.ok());
  EXPECT_THAT(measured->dram_us, DoubleNear(design->dram_us * 4.45 / 4.625, 1e-9));
  EXPECT_DOUBLE_EQ(measured->in_us, design->in_us);
  EXPECT_DOUBLE_EQ(measured->mma_us, design->mma_us);
}

TEST(ScheduleBounds, ProductsTakeThePrecisionTheContractAllows) {
  // fp8 KV with bf16 Q: S as two e4m3 terms, as long as one bf16 product;
  // a8: S as one e4m3 product, at twice the bf16 rate. P V in bf16 in both.
  reference::BatchConfig a16 = Case(128, 4, 8192, 16, KvFormat::kFp8E4m3);
  reference::BatchConfig a8 = a16;
  a8.q_mode = QMode::kFp8;
  const SmBounds x = PolicyBounds(a16), y = PolicyBounds(a8);
  ASSERT_GT(x.mma_us, 0);
  EXPECT_THAT(y.mma_us / x.mma_us, DoubleNear((576.0 / 2 + 512) / (576.0 + 512), 1e-12));
  // fp8 tokens are 576 bytes: half the bf16 case's KV bytes into each SM.
  EXPECT_DOUBLE_EQ(x.sm_in_bytes, 8192.0 * 576 + 64.0 * 1152);
}

TEST(ScheduleBounds, RowTilesOfOneSequenceEachBringTheirKvIn) {
  // 32 heads in 16-row tiles: each KV tile enters the SMs of both row tiles,
  // so the SMs together take in twice the KV bytes (the mean bounds the
  // busiest from below).
  const reference::BatchConfig c = Case(32, 1, 1024, 32, KvFormat::kBf16);
  const SmBounds b = PolicyBounds(c);
  const double twice_kv = 2.0 * 32 * 1024 * 1152 + 32.0 * 32 * 1152;
  EXPECT_GE(b.sm_in_bytes, twice_kv / 132);
  EXPECT_LT(b.sm_in_bytes, 2 * twice_kv / 132);  // the schedule spreads it
}

// The chain floor's shapes (chain_floor.h) are the host schedule's pieces of
// their cases: its tile rows, CTAs, pieces per row tile and tiles per piece.
TEST(ChainShapes, AreTheirCasesHostSchedules) {
  struct Mirror {
    ChainShape shape;
    reference::BatchConfig c;
  };
  for (const Mirror& m : {Mirror{SmallestCaseChain(), Case(4, 1, 1024, 32, KvFormat::kFp8E4m3)},
                          Mirror{BatchOf32Chain(), Case(32, 1, 1024, 32, KvFormat::kFp8E4m3)},
                          Mirror{SmallestCaseChainBf16(), Case(4, 1, 1024, 32, KvFormat::kBf16)},
                          Mirror{BatchOf32ChainBf16(), Case(32, 1, 1024, 32, KvFormat::kBf16)}}) {
    const reference::BatchLayout layout = reference::GenerateLayout(m.c);
    const plan::ScheduleConfig sc = PolicyConfig(m.c, layout);
    absl::StatusOr<plan::Schedule> s = plan::BuildSchedule(LayoutViewOf(m.c, layout), sc);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(sc.block_m, m.shape.rows) << m.shape.name;
    EXPECT_EQ(sc.num_ctas, m.shape.ctas_per_sm * 132) << m.shape.name;
    EXPECT_EQ(s->active_ctas, m.shape.row_tiles * m.shape.splits) << m.shape.name;
    EXPECT_EQ(s->work.size(), static_cast<size_t>(m.shape.row_tiles * m.shape.splits))
        << m.shape.name;
    ASSERT_EQ(s->combine.size(), static_cast<size_t>(m.shape.row_tiles)) << m.shape.name;
    for (const MlaCombineItem& item : s->combine) {
      EXPECT_EQ(item.num_splits, m.shape.splits) << m.shape.name;
    }
    for (const MlaWorkItem& w : s->work) {
      EXPECT_EQ(w.kv_end - w.kv_start, m.shape.tiles_per_piece * 64) << m.shape.name;
    }
  }
}

TEST(ScheduleConfigOfPlan, ReadsTheSchedulersParameters) {
  absl::StatusOr<plan::ScheduleConfig> sc = ScheduleConfigOfPlan(
      R"({"kernel":"mla_sm_90a_x","block_m":16,"block_n":64,"num_warps":4,"num_stages":2,)"
      R"("num_ctas":264,"min_split_cost":256,"tuned":false,"kv_tensor_maps":true})");
  ASSERT_TRUE(sc.ok()) << sc.status();
  EXPECT_EQ(sc->block_m, 16);
  EXPECT_EQ(sc->block_n, 64);
  EXPECT_EQ(sc->num_ctas, 264);
  EXPECT_EQ(sc->min_cost_per_cta, 256);
}

TEST(ScheduleConfigOfPlan, NamesAMissingOrMalformedField) {
  absl::StatusOr<plan::ScheduleConfig> missing =
      ScheduleConfigOfPlan(R"({"block_m":16,"block_n":64,"num_ctas":264})");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("\"min_split_cost\""));
  absl::StatusOr<plan::ScheduleConfig> malformed =
      ScheduleConfigOfPlan(R"({"block_m":"x","block_n":64,"num_ctas":264,"min_split_cost":256})");
  ASSERT_FALSE(malformed.ok());
  EXPECT_THAT(malformed.status().message(), HasSubstr("\"block_m\""));
}

}  // namespace
}  // namespace mlajit::bench
