// Inputs that the fuzzers in fuzz/ found to crash or misbehave, kept as plain
// unit tests so that they run in every build (any compiler, no libFuzzer). Each
// test names the fuzz target that found it and writes the input out readably.
#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/plan/scheduler.h"

namespace mlajit {
namespace {

using ::testing::HasSubstr;

// fuzz_plan: paged layout without kv_lens (full pages), where the token count
// pages * page_size overflowed int (undefined behaviour, then a negative
// kv_len) although every indptr entry was a valid int32. mlajit_plan_create
// passes a caller's arrays straight here.
TEST(FuzzRegressions, FullPagesBeyondInt32TokensAreRejected) {
  const std::vector<int32_t> qo = {0, 1, 2};
  const std::vector<int32_t> kv = {0, 16, (1 << 24) + 16};  // 2^24 pages of 128 = 2^31 tokens
  plan::LayoutView l;
  l.num_heads = 16;
  l.page_size = 128;
  l.qo_indptr = qo;
  l.kv_indptr = kv;
  absl::Status s = plan::ValidateLayout(l);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("kv_indptr[2] - kv_indptr[1] = 16777216 pages of 128"));
  EXPECT_EQ(plan::BuildSchedule(l, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FuzzRegressions, FullPagesUpToInt32TokensAreScheduled) {
  const std::vector<int32_t> qo = {0, 1};
  const std::vector<int32_t> kv = {0, INT32_MAX / 128};
  plan::LayoutView l;
  l.num_heads = 16;
  l.page_size = 128;
  l.qo_indptr = qo;
  l.kv_indptr = kv;
  absl::StatusOr<plan::Schedule> s = plan::BuildSchedule(l, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->seqs[0].kv_len, INT32_MAX / 128 * 128);
}

// fuzz_plan: a config with block_n = INT32_MAX (BuildSchedule accepts any
// positive block size from its caller). The aligned-pieces rule computed
// 2 * block_n in int, which overflowed (undefined behaviour) before the tile
// could be found too short to split.
TEST(FuzzRegressions, HugeBlockNDoesNotOverflowTheAlignedCut) {
  const std::vector<int32_t> qo = {0, 1, 2};
  const std::vector<int32_t> kv = {0, 100, 300};
  plan::LayoutView l;
  l.num_heads = 16;
  l.qo_indptr = qo;
  l.kv_indptr = kv;
  plan::ScheduleConfig c;
  c.num_ctas = 4;
  c.block_n = INT32_MAX;
  absl::StatusOr<plan::Schedule> s = plan::BuildSchedule(l, c);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->pieces_per_tile, 1);  // too short to split: one CTA per tile
  ASSERT_EQ(s->work.size(), 2u);
  EXPECT_EQ(s->num_partials, 0);
  for (int b = 0; b < 2; ++b) {
    EXPECT_EQ(s->work[b].seq, b);
    EXPECT_EQ(s->work[b].kv_start, 0);
    EXPECT_EQ(s->work[b].kv_end, kv[b + 1] - kv[b]);
    EXPECT_EQ(s->work[b].partial, -1);
  }
}

}  // namespace
}  // namespace mlajit
