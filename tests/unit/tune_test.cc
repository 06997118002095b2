// The autotuner's host side: tuning keys, the record file, the candidate
// shapes and the choice among measured ones. The GPU side (timing, the
// cross-check, plans picking up records) is tests/gpu/tune_test.cc.
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/plan/scheduler.h"
#include "src/plan/tile_policy.h"
#include "src/tune/candidates.h"
#include "src/tune/tuning_table.h"
#include "tests/unit/sample_tuning_record.h"
#include "tests/unit/temp_dir.h"

namespace mlajit::tune {
namespace {

using ::testing::HasSubstr;

TuningRecord Sample(int rows, int bucket) {
  return testing_util::SampleTuningRecord(rows, bucket, "1.2.3");
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(TuneKey, WorkBucketIsTheOctaveOfTheWork) {
  EXPECT_EQ(WorkBucket(nullptr), -1);
  plan::BatchWork w{0, 132};
  EXPECT_EQ(WorkBucket(&w), 0);
  w.wide_units = 1;
  EXPECT_EQ(WorkBucket(&w), 0);
  w.wide_units = 2;
  EXPECT_EQ(WorkBucket(&w), 1);
  w.wide_units = 1023;
  EXPECT_EQ(WorkBucket(&w), 9);
  w.wide_units = 1024;
  EXPECT_EQ(WorkBucket(&w), 10);
}

TEST(TuneKey, NameShowsEveryField) {
  const TuningKey k = Sample(32, 13).key;
  EXPECT_EQ(KeyName(k), "NVIDIA H200 sm_90a/132 fp8 a16 p64 rows32 work2^13");
  TuningKey l = k;
  l.work_bucket = -1;
  l.page_size = 0;
  l.q_mode = 1;
  EXPECT_EQ(KeyName(l), "NVIDIA H200 sm_90a/132 fp8 a8 flat rows32 limits");
}

TEST(TuneRecord, JsonLineRoundTrips) {
  const TuningRecord r = Sample(64, 7);
  const std::string line = ToJsonLine(r);
  absl::StatusOr<TuningRecord> back = ParseJsonLine(line);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->key, r.key);
  EXPECT_TRUE(SameShape(back->shape, r.shape));
  EXPECT_EQ(back->median_ns, r.median_ns);
  EXPECT_EQ(back->default_ns, r.default_ns);
  EXPECT_EQ(back->candidates, r.candidates);
  EXPECT_EQ(back->unix_s, r.unix_s);
  EXPECT_EQ(back->library_version, r.library_version);
  EXPECT_EQ(ToJsonLine(*back), line);
}

TEST(TuneRecord, MalformedLinesNameTheProblem) {
  std::string line = ToJsonLine(Sample(16, 3));
  EXPECT_FALSE(ParseJsonLine("not json").ok());
  std::string no_rows = line;
  no_rows.replace(no_rows.find("\"rows\""), 6, "\"ro_ws\"");
  absl::StatusOr<TuningRecord> r = ParseJsonLine(no_rows);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("rows"));
  std::string bad_format = line;
  bad_format.replace(bad_format.find("\"kv_format\":1"), 13, "\"kv_format\":7");
  EXPECT_FALSE(ParseJsonLine(bad_format).ok());
}

TEST(TuneTable, PutFindAndReplace) {
  TuningTable t("1.2.3");
  EXPECT_FALSE(t.Find(Sample(16, 3).key).has_value());
  t.Put(Sample(16, 3));
  TuningRecord other = Sample(16, 3);
  other.shape.num_stages = 2;
  t.Put(other);
  ASSERT_TRUE(t.Find(other.key).has_value());
  EXPECT_EQ(t.Find(other.key)->shape.num_stages, 2);
  EXPECT_FALSE(t.Find(Sample(16, 4).key).has_value());  // another octave of work
  EXPECT_EQ(t.All().size(), 1u);
}

TEST(TuneTable, SaveThenLoadInAnotherTable) {
  test_support::TempDir dir;
  TuningTable a("1.2.3");
  a.Put(Sample(16, 3));
  a.Put(Sample(64, 9));
  ASSERT_TRUE(a.Save(dir.path()).ok());
  TuningTable b("1.2.3");
  absl::StatusOr<int> n = b.Load(dir.path());
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 2);
  ASSERT_TRUE(b.Find(Sample(64, 9).key).has_value());
  EXPECT_EQ(b.Find(Sample(64, 9).key)->median_ns, 15070);
}

TEST(TuneTable, MissingFileLoadsNothing) {
  test_support::TempDir dir;
  TuningTable t("1.2.3");
  absl::StatusOr<int> n = t.Load(dir.path());
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 0);
}

TEST(TuneTable, OtherVersionsAreIgnoredButKeptOnDisk) {
  test_support::TempDir dir;
  TuningTable old("1.0.0");
  TuningRecord r = Sample(16, 3);
  r.library_version = "1.0.0";
  old.Put(r);
  ASSERT_TRUE(old.Save(dir.path()).ok());
  TuningTable now("1.2.3");
  EXPECT_EQ(*now.Load(dir.path()), 0);
  now.Put(Sample(32, 5));
  ASSERT_TRUE(now.Save(dir.path()).ok());
  const std::string text = ReadAll(dir.path() + "/tuning.jsonl");
  EXPECT_THAT(text, HasSubstr("\"library_version\":\"1.0.0\""));
  EXPECT_THAT(text, HasSubstr("\"library_version\":\"1.2.3\""));
  TuningTable again("1.0.0");
  EXPECT_EQ(*again.Load(dir.path()), 1);
}

TEST(TuneTable, SaveMergesWhatAnotherProcessWrote) {
  test_support::TempDir dir;
  TuningTable first("1.2.3"), second("1.2.3");
  first.Put(Sample(16, 3));
  ASSERT_TRUE(first.Save(dir.path()).ok());
  TuningRecord mine = Sample(16, 3);
  mine.median_ns = 1;  // the same key: this table's record wins
  second.Put(mine);
  second.Put(Sample(32, 4));
  ASSERT_TRUE(second.Save(dir.path()).ok());
  TuningTable check("1.2.3");
  EXPECT_EQ(*check.Load(dir.path()), 2);
  EXPECT_EQ(check.Find(mine.key)->median_ns, 1);
}

TEST(TuneTable, MalformedLinesAreSkipped) {
  test_support::TempDir dir;
  {
    std::ofstream f(dir.path() + "/tuning.jsonl");
    f << "garbage\n" << ToJsonLine(Sample(16, 3)) << "\n{\"device\":1}\n";
  }
  TuningTable t("1.2.3");
  absl::StatusOr<int> n = t.Load(dir.path());
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 1);
  EXPECT_TRUE(t.Find(Sample(16, 3).key).has_value());
}

struct CandidateCase {
  std::string arch;
  int rows;
  KvFormat format;
  int64_t wide_units;
};

class TuneCandidates : public ::testing::TestWithParam<CandidateCase> {};

TEST_P(TuneCandidates, PolicyFirstAllRunnableNoRepeats) {
  const CandidateCase& c = GetParam();
  plan::BatchWork work{c.wide_units, 132};
  const std::vector<plan::TileShape> list = Candidates(c.arch, c.rows, c.format, &work);
  ASSERT_FALSE(list.empty());
  EXPECT_TRUE(SameShape(list[0], plan::ChooseTiles(c.arch, c.rows, c.format, &work)));
  EXPECT_LE(list.size(), 16u);
  for (size_t i = 0; i < list.size(); ++i) {
    if (i > 0 || plan::HasTensorCorePath(c.arch)) {
      EXPECT_TRUE(plan::CheckTileShape(c.arch, c.format, list[i]).ok()) << ShapeName(list[i]);
    }
    EXPECT_EQ(list[i].smem_bytes,
              plan::HasTensorCorePath(c.arch)
                  ? plan::DecodeSmemBytes(c.arch, c.format, list[i].block_m, list[i].block_n,
                                          list[i].num_warps, list[i].num_stages)
                  : list[0].smem_bytes)
        << ShapeName(list[i]);
    // No tile taller than the rows need.
    EXPECT_LE(list[i].block_m, c.rows <= 16 ? 16 : c.rows <= 32 ? 32 : 64) << ShapeName(list[i]);
    EXPECT_LE(list[i].num_stages, 4);
    for (size_t j = 0; j < i; ++j) {
      EXPECT_FALSE(SameShape(list[i], list[j])) << ShapeName(list[i]);
    }
  }
  if (!plan::HasTensorCorePath(c.arch)) {
    EXPECT_EQ(list.size(), 1u);  // the portable path has one shape
  } else {
    EXPECT_GE(list.size(), 3u);  // at least the two split floors besides the policy's
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, TuneCandidates,
    ::testing::Values(CandidateCase{"sm_90a", 16, KvFormat::kFp8E4m3, 8192},
                      CandidateCase{"sm_90a", 32, KvFormat::kFp8E4m3, 64},
                      CandidateCase{"sm_90a", 64, KvFormat::kFp8E4m3, 1024},
                      CandidateCase{"sm_90a", 128, KvFormat::kBf16, 4096},
                      CandidateCase{"sm_90a", 16, KvFormat::kBf16, 8192},
                      CandidateCase{"sm_90a", 32, KvFormat::kMxfp4, 512},
                      CandidateCase{"sm_90a", 128, KvFormat::kMxfp4, 4096},
                      CandidateCase{"sm_80", 16, KvFormat::kFp8E4m3, 512},
                      CandidateCase{"sm_89", 64, KvFormat::kBf16, 512},
                      CandidateCase{"gfx90a", 16, KvFormat::kFp8E4m3, 512}));

TEST(TuneCandidates, HopperRowsPathOnlyForTallRows) {
  plan::BatchWork work{4096, 132};
  auto has_rows_path = [](const std::vector<plan::TileShape>& l) {
    for (const plan::TileShape& t : l) {
      if (t.block_m == 64 && t.num_warps == 8) return true;
    }
    return false;
  };
  EXPECT_TRUE(has_rows_path(Candidates("sm_90a", 64, KvFormat::kFp8E4m3, &work)));
  EXPECT_FALSE(has_rows_path(Candidates("sm_90a", 32, KvFormat::kFp8E4m3, &work)));
  // Tiles of half the rows stay candidates (more CTAs per KV byte), shorter
  // ones do not (each row tile reads the KV again), except fp8's 16-row
  // swap-AB tiles for up to 128 rows, which small batches run faster.
  auto heights = [&](int rows, KvFormat f) {
    std::set<int> m;
    for (const plan::TileShape& t : Candidates("sm_90a", rows, f, &work)) m.insert(t.block_m);
    return m;
  };
  EXPECT_EQ(heights(64, KvFormat::kFp8E4m3), (std::set<int>{16, 32, 64}));
  EXPECT_EQ(heights(128, KvFormat::kFp8E4m3), (std::set<int>{16, 32, 64}));
  EXPECT_EQ(heights(256, KvFormat::kFp8E4m3), (std::set<int>{32, 64}));
  EXPECT_EQ(heights(64, KvFormat::kBf16), (std::set<int>{32, 64}));
  // fp8's 16-row candidate for tall rows is the policy's small-batch shape:
  // two CTAs an SM.
  const plan::BatchWork small{4 * 132, 132};
  const plan::TileShape narrow = plan::ChooseTiles("sm_90a", 64, KvFormat::kFp8E4m3, &small);
  ASSERT_EQ(narrow.block_m, 16);
  bool listed = false;
  for (const plan::TileShape& t : Candidates("sm_90a", 64, KvFormat::kFp8E4m3, &work)) {
    listed |= SameShape(t, narrow);
  }
  EXPECT_TRUE(listed);
  // bf16 tiles of 32 rows also as two warpgroups of 16 rows (8 warps), on
  // the swap-AB path; fp8 has no such shape.
  auto has_row_pairs = [](const std::vector<plan::TileShape>& list, KvFormat f) {
    for (const plan::TileShape& t : list) {
      if (t.block_m == 32 && t.num_warps == 8 &&
          plan::RunsWgmmaPath("sm_90a", f, t.block_m, t.block_n, t.num_warps)) {
        return true;
      }
    }
    return false;
  };
  EXPECT_TRUE(has_row_pairs(Candidates("sm_90a", 32, KvFormat::kBf16, &work), KvFormat::kBf16));
  EXPECT_FALSE(has_row_pairs(Candidates("sm_90a", 16, KvFormat::kBf16, &work), KvFormat::kBf16));
  EXPECT_FALSE(
      has_row_pairs(Candidates("sm_90a", 32, KvFormat::kFp8E4m3, &work), KvFormat::kFp8E4m3));
}

// The candidate with these fields, or null.
const plan::TileShape* Find(const std::vector<plan::TileShape>& list, int block_m, int stages,
                            int ctas, int split) {
  for (const plan::TileShape& t : list) {
    if (t.block_m == block_m && t.num_stages == stages && t.ctas_per_sm == ctas &&
        t.min_split_cost == split) {
      return &t;
    }
  }
  return nullptr;
}

TEST(TuneCandidates, NoSplitOnThePolicyShapeAndOneCtaWithMoreStages) {
  plan::BatchWork work{8192, 132};
  // fp8 16-row tiles: the policy runs two CTAs an SM with two stages.
  const std::vector<plan::TileShape> fp8 = Candidates("sm_90a", 16, KvFormat::kFp8E4m3, &work);
  ASSERT_EQ(fp8[0].ctas_per_sm, 2);
  EXPECT_NE(Find(fp8, 16, fp8[0].num_stages, 2, plan::kMaxSplitCost), nullptr);
  const plan::TileShape* one = Find(fp8, 16, 4, 1, plan::kMaxSplitCost);
  ASSERT_NE(one, nullptr);
  EXPECT_TRUE(plan::CheckTileShape("sm_90a", KvFormat::kFp8E4m3, *one).ok());
  // bf16 16-row tiles already run one CTA an SM: only the unsplit policy.
  const std::vector<plan::TileShape> bf16 = Candidates("sm_90a", 16, KvFormat::kBf16, &work);
  ASSERT_EQ(bf16[0].ctas_per_sm, 1);
  int unsplit = 0;
  for (const plan::TileShape& t : bf16) unsplit += t.min_split_cost == plan::kMaxSplitCost;
  EXPECT_EQ(unsplit, 1);
  EXPECT_NE(Find(bf16, 16, bf16[0].num_stages, 1, plan::kMaxSplitCost), nullptr);
}

// `batch` sequences of one query and `kv` tokens, flat.
struct UniformLayout {
  UniformLayout(int batch, int kv, int heads) {
    for (int b = 0; b <= batch; ++b) {
      qo.push_back(b);
      kv_indptr.push_back(b * kv);
    }
    view.num_heads = heads;
    view.qo_indptr = qo;
    view.kv_indptr = kv_indptr;
  }
  std::vector<int32_t> qo, kv_indptr;
  plan::LayoutView view;
};

TEST(TuneCandidates, RepeatedSchedulesAreDroppedOtherShapesKept) {
  // (128,1,8192,16) fp8: the policy cuts each sequence in two pieces of 4096
  // tokens, so split floors of 256 and 1024 give its schedule again, and no
  // split gives another.
  const UniformLayout l(128, 8192, 16);
  const plan::BatchWork work = plan::MeasureBatch(l.view, 132);
  const std::vector<plan::TileShape> all = Candidates("sm_90a", 16, KvFormat::kFp8E4m3, &work);
  const std::vector<plan::TileShape> kept = DropRepeatedSchedules(all, l.view, 132);
  ASSERT_FALSE(kept.empty());
  EXPECT_TRUE(SameShape(kept[0], all[0]));
  const int stages = all[0].num_stages;
  ASSERT_NE(Find(all, 16, stages, 2, 256), nullptr);
  EXPECT_EQ(Find(kept, 16, stages, 2, 256), nullptr);
  EXPECT_EQ(Find(kept, 16, stages, 2, 1024), nullptr);
  EXPECT_NE(Find(kept, 16, stages, 2, plan::kMaxSplitCost), nullptr);
  // One CTA an SM (132 CTAs) takes each sequence whole at the policy's
  // floor already, so its unsplit twin repeats it.
  EXPECT_NE(Find(kept, 16, 4, 1, all[0].min_split_cost), nullptr);
  EXPECT_EQ(Find(kept, 16, 4, 1, plan::kMaxSplitCost), nullptr);
  // Other kernels with the policy's split floor stay even where their
  // schedule is the policy's (more stages: the same cut, another kernel).
  int all_default = 0, kept_default = 0;
  for (const plan::TileShape& t : all) all_default += t.min_split_cost == all[0].min_split_cost;
  for (const plan::TileShape& t : kept) kept_default += t.min_split_cost == all[0].min_split_cost;
  EXPECT_EQ(kept_default, all_default);
  EXPECT_EQ(kept.size(), all.size() - 3);

  // bf16: one CTA an SM takes one sequence whole already, so every split
  // floor repeats the policy's schedule.
  const std::vector<plan::TileShape> bf16 = Candidates("sm_90a", 16, KvFormat::kBf16, &work);
  const std::vector<plan::TileShape> bf16_kept = DropRepeatedSchedules(bf16, l.view, 132);
  for (const plan::TileShape& t : bf16_kept) {
    if (t.block_m == 16 && t.num_stages == bf16[0].num_stages && t.ctas_per_sm == 1) {
      EXPECT_EQ(t.min_split_cost, bf16[0].min_split_cost) << ShapeName(t);
    }
  }
  EXPECT_EQ(bf16_kept.size(), bf16.size() - 3);

  // (4,1,1024,32) fp8, a small batch: the floors of 256 and 1024 cut
  // differently from the policy's, and 1024 already leaves each sequence
  // whole, so only the unsplit policy shape repeats one.
  const UniformLayout small(4, 1024, 32);
  const plan::BatchWork small_work = plan::MeasureBatch(small.view, 132);
  const std::vector<plan::TileShape> s = Candidates("sm_90a", 32, KvFormat::kFp8E4m3, &small_work);
  const std::vector<plan::TileShape> s_kept = DropRepeatedSchedules(s, small.view, 132);
  ASSERT_EQ(s[0].block_m, 16);
  EXPECT_NE(Find(s_kept, 16, s[0].num_stages, 2, 256), nullptr);
  EXPECT_NE(Find(s_kept, 16, s[0].num_stages, 2, 1024), nullptr);
  EXPECT_EQ(Find(s_kept, 16, s[0].num_stages, 2, plan::kMaxSplitCost), nullptr);
  EXPECT_NE(Find(s_kept, 16, 4, 1, plan::kMaxSplitCost), nullptr);
  EXPECT_EQ(s_kept.size(), s.size() - 1);
}

TEST(TunePick, PolicyStaysUnlessBeatenByTheMargin) {
  EXPECT_EQ(PickFastest({100.0, 99.0, 98.5}, 0.02), 0);   // within 2 %
  EXPECT_EQ(PickFastest({100.0, 99.0, 97.0}, 0.02), 2);
  EXPECT_EQ(PickFastest({100.0, -1.0, 50.0}, 0.02), 2);   // failed ones never win
  EXPECT_EQ(PickFastest({100.0, -1.0, -1.0}, 0.02), 0);
  EXPECT_EQ(PickFastest({-1.0, 10.0}, 0.02), -1);         // nothing to compare with
  EXPECT_EQ(PickFastest({}, 0.02), -1);
}

TEST(TuneShape, CheckNamesTheShape) {
  plan::TileShape t;
  t.block_m = 48;
  absl::Status s = plan::CheckTileShape("sm_90a", KvFormat::kFp8E4m3, t);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("48x64"));
  t.block_m = 16;
  t.num_warps = 4;
  t.min_split_cost = 10;
  s = plan::CheckTileShape("sm_90a", KvFormat::kFp8E4m3, t);
  EXPECT_THAT(s.message(), HasSubstr("min_split_cost 10"));
  t.min_split_cost = 64;
  absl::StatusOr<plan::TileShape> done = plan::CompleteTileShape("sm_90a", KvFormat::kFp8E4m3, t);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->smem_bytes, plan::DecodeSmemBytes("sm_90a", KvFormat::kFp8E4m3, 16, 64, 4, 2));
  EXPECT_FALSE(plan::CheckTileShape("gfx90a", KvFormat::kFp8E4m3, t).ok());
}

}  // namespace
}  // namespace mlajit::tune
