// The autotuner on a GPU: mlajit_tune times every candidate shape, records
// the fastest in the cache directory, and later plans of the batch's class
// (in this runtime and in a new one on the same directory) run it. Every
// candidate shape of several classes is also run on its own against the CPU
// reference, outputs poisoned first, since the tuner may pick any of them.
#include <cstdlib>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "mlajit/mlajit.h"
#include "src/plan/scheduler.h"
#include "src/tune/candidates.h"
#include "tests/gpu/harness_suite.h"  // ScopedEnv
#include "tests/unit/temp_dir.h"
#include "tools/harness/decode_harness.h"

namespace mlajit {
namespace {

using harness::DecodeHarness;
using harness::DeviceBatch;
using harness::FreshSeed;
using harness::OutputTolerance;
using reference::BatchConfig;

// The candidates array's entries, in order.
std::vector<std::string> Candidates(const std::string& json) {
  std::vector<std::string> out;
  size_t at = json.find("{\"shape\"");
  while (at != std::string::npos) {
    const size_t next = json.find("{\"shape\"", at + 1);
    out.push_back(json.substr(at, next == std::string::npos ? std::string::npos : next - at));
    at = next;
  }
  return out;
}


std::unique_ptr<DecodeHarness> HarnessOn(const std::string& cache_dir, std::string* skip) {
  mlajit_cache_options_t co = MLAJIT_CACHE_OPTIONS_INIT;
  co.cache_dir = cache_dir.c_str();
  auto h = DecodeHarness::Create(0, &co);
  if (!h.ok()) {
    *skip = std::string(h.status().message());
    return nullptr;
  }
  return *std::move(h);
}

TEST(GpuTune, RecordsTheFastestAndLaterPlansUseIt) {
  test_support::TempDir dir;
  const std::string cache_dir = dir.Sub("cache");
  std::string skip;
  std::unique_ptr<DecodeHarness> h = HarnessOn(cache_dir, &skip);
  if (h == nullptr) GTEST_SKIP() << "no GPU: " << skip;

  BatchConfig c;  // (4,1,1024,32): a small batch, where the shapes differ most
  c.batch_size = 4;
  c.num_heads = 32;
  c.q_len = 1;
  c.kv_len = 1024;
  c.kv_format = KvFormat::kFp8E4m3;
  c.seed = FreshSeed();
  const reference::Batch layout = reference::GenerateBatch(c);
  const mlajit_plan_config_t pc = harness::PlanConfigFor(c, layout.sm_scale, true);
  mlajit_tune_options_t o = MLAJIT_TUNE_OPTIONS_INIT;
  o.warmup_calls = 2;
  o.timed_calls = 20;
  o.device_plans = 1;
  char* raw = nullptr;
  ASSERT_EQ(mlajit_tune(h->runtime(), &pc, c.batch_size, layout.qo_indptr.data(),
                        layout.kv_indptr.data(), nullptr, &o, &raw),
            MLAJIT_STATUS_OK)
      << mlajit_last_error();
  const std::string json = TakeJson(raw);
  const std::vector<std::string> candidates = Candidates(json);
  ASSERT_GE(candidates.size(), 3u) << json;
  for (const std::string& cand : candidates) {
    // Every candidate agreed with the default shape and was timed.
    EXPECT_NE(cand.find("\"status\":\"ok\""), std::string::npos) << cand;
    EXPECT_EQ(cand.find("\"median_us\":-1"), std::string::npos) << cand;
  }
  EXPECT_NE(json.find("\"persisted\":true"), std::string::npos) << json;
  const int chosen = IntField(json, "chosen");
  ASSERT_GE(chosen, 0);
  ASSERT_LT(chosen, static_cast<int>(candidates.size()));
  const std::string& best = candidates[chosen];
  std::ifstream file(cache_dir + "/tuning.jsonl");
  std::stringstream text;
  text << file.rdbuf();
  EXPECT_NE(text.str().find(absl::StrCat("\"block_m\":", IntField(best, "block_m"))),
            std::string::npos)
      << text.str();

  // A plan of the same class, fresh inputs: the tuned shape, and correct.
  auto expect_tuned_plan = [&](DecodeHarness& harness, bool tuned) {
    c.seed = FreshSeed();
    absl::StatusOr<std::unique_ptr<DeviceBatch>> db = harness.Upload(c, true);
    ASSERT_TRUE(db.ok()) << db.status();
    const std::string d = DescribePlan(**db);
    EXPECT_EQ(d.find("\"tuned\":true") != std::string::npos, tuned) << d;
    if (tuned) {
      for (const char* f : {"block_m", "block_n", "num_warps", "num_stages", "min_split_cost"}) {
        EXPECT_EQ(IntField(d, f), IntField(best, f)) << f << "\n" << d << "\n" << best;
      }
    }
    absl::StatusOr<harness::CaseResult> r = harness.Check(**db, {});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->out.Passes(OutputTolerance(c))) << r->spec << "\n" << r->out.ToString();
    // A device-built plan of the config (options.device_plans) too.
    mlajit_plan_limits_t lim = MLAJIT_PLAN_LIMITS_INIT;
    lim.max_batch_size = 64;
    lim.max_q_len = c.q_len;
    mlajit_plan_t dp = nullptr;
    ASSERT_EQ(mlajit_plan_create_device(harness.runtime(), &pc, &lim, &dp), MLAJIT_STATUS_OK)
        << mlajit_last_error();
    char* dj = nullptr;
    ASSERT_EQ(mlajit_plan_describe_json(dp, &dj), MLAJIT_STATUS_OK) << mlajit_last_error();
    const std::string dd = TakeJson(dj);
    mlajit_plan_free(dp);
    EXPECT_EQ(dd.find("\"tuned\":true") != std::string::npos, tuned) << dd;
    if (tuned) {
      EXPECT_EQ(IntField(dd, "block_m"), IntField(best, "block_m")) << dd;
    }
  };
  expect_tuned_plan(*h, true);
  h.reset();
  // A new runtime on the same directory reads the record back.
  std::unique_ptr<DecodeHarness> again = HarnessOn(cache_dir, &skip);
  ASSERT_NE(again, nullptr) << skip;
  expect_tuned_plan(*again, true);
  again.reset();
  {
    ScopedEnv off("MLAJIT_TUNED", "0");
    std::unique_ptr<DecodeHarness> untuned = HarnessOn(cache_dir, &skip);
    ASSERT_NE(untuned, nullptr) << skip;
    expect_tuned_plan(*untuned, false);
  }
}

TEST(GpuTune, RejectsBadArgumentsWithoutTouchingTheTable) {
  test_support::TempDir dir;
  std::string skip;
  std::unique_ptr<DecodeHarness> h = HarnessOn(dir.Sub("cache"), &skip);
  if (h == nullptr) GTEST_SKIP() << "no GPU: " << skip;
  mlajit_plan_config_t pc = MLAJIT_PLAN_CONFIG_INIT;
  pc.num_heads = 16;
  pc.sm_scale = 0.07f;
  const int32_t qo[] = {0, 1}, kv[] = {0, 100};
  mlajit_tune_options_t o = MLAJIT_TUNE_OPTIONS_INIT;
  o.timed_calls = 0;
  EXPECT_EQ(mlajit_tune(h->runtime(), &pc, 1, qo, kv, nullptr, &o, nullptr),
            MLAJIT_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mlajit_last_error()).find("options.timed_calls=0"), std::string::npos)
      << mlajit_last_error();
  const int32_t bad_kv[] = {0, -5};
  EXPECT_EQ(mlajit_tune(h->runtime(), &pc, 1, qo, bad_kv, nullptr, nullptr, nullptr),
            MLAJIT_STATUS_INVALID_ARGUMENT);
  const int32_t no_rows[] = {0, 0};
  EXPECT_EQ(mlajit_tune(h->runtime(), &pc, 1, no_rows, kv, nullptr, nullptr, nullptr),
            MLAJIT_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mlajit_last_error()).find("no query rows"), std::string::npos)
      << mlajit_last_error();
  std::ifstream file(dir.Sub("cache") + "/tuning.jsonl");
  EXPECT_FALSE(file.good());
}

// Every candidate the tuner would time for a class, forced through the
// MLAJIT_TILES / MLAJIT_SPLIT_MIN_COST knobs, against the CPU reference.
class GpuTuneCandidates : public ::testing::TestWithParam<BatchConfig> {};

TEST_P(GpuTuneCandidates, EachMatchesTheReference) {
  auto h = DecodeHarness::Create(0);
  if (!h.ok()) GTEST_SKIP() << "no GPU: " << h.status().message();
  BatchConfig c = GetParam();
  absl::StatusOr<gpu::DeviceProperties> props = (*h)->backend()->GetDeviceProperties(0);
  ASSERT_TRUE(props.ok()) << props.status();
  const reference::Batch layout = reference::GenerateBatch(c);
  plan::LayoutView view;
  view.num_heads = c.num_heads;
  view.page_size = c.page_size;
  view.causal = c.causal;
  view.qo_indptr = layout.qo_indptr;
  view.kv_indptr = layout.kv_indptr;
  view.kv_lens = layout.kv_lens;
  const plan::BatchWork work = plan::MeasureBatch(view, props->sm_count);
  const std::vector<plan::TileShape> shapes =
      tune::Candidates(props->arch, c.q_len * c.num_heads, c.kv_format, &work, c.page_size);
  for (const plan::TileShape& t : shapes) {
    SCOPED_TRACE(tune::ShapeName(t));
    ScopedEnv tiles("MLAJIT_TILES", absl::StrCat(t.block_m, ",", t.block_n, ",", t.num_warps, ",",
                                                 t.num_stages, ",", t.ctas_per_sm));
    ScopedEnv split("MLAJIT_SPLIT_MIN_COST", absl::StrCat(t.min_split_cost));
    c.seed = FreshSeed();
    absl::StatusOr<std::unique_ptr<DeviceBatch>> db = (*h)->Upload(c, true);
    ASSERT_TRUE(db.ok()) << db.status();
    const std::string d = DescribePlan(**db);
    EXPECT_EQ(IntField(d, "block_m"), t.block_m) << d;
    EXPECT_EQ(IntField(d, "num_stages"), t.num_stages) << d;
    EXPECT_EQ(IntField(d, "num_ctas"), t.ctas_per_sm * props->sm_count) << d;
    absl::StatusOr<harness::CaseResult> r = (*h)->Check(**db, {});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->out.Passes(OutputTolerance(c))) << r->spec << "\n  out: " << r->out.ToString();
    EXPECT_TRUE(r->lse.Passes(1e-3)) << r->spec << "\n  lse: " << r->lse.ToString();
  }
}

BatchConfig Case(int bs, int q_len, int kv_len, int heads, KvFormat f, int page = 0,
                 QMode q = QMode::kBf16) {
  BatchConfig c;
  c.batch_size = bs;
  c.q_len = q_len;
  c.kv_len = kv_len;
  c.num_heads = heads;
  c.kv_format = f;
  c.page_size = page;
  c.q_mode = q;
  c.lengths = reference::LengthDistribution::kUniform;
  return c;
}

INSTANTIATE_TEST_SUITE_P(
    Classes, GpuTuneCandidates,
    ::testing::Values(Case(4, 1, 1024, 32, KvFormat::kFp8E4m3),
                      Case(8, 4, 777, 16, KvFormat::kFp8E4m3),
                      Case(8, 1, 1500, 16, KvFormat::kBf16),
                      Case(4, 1, 1024, 16, KvFormat::kMxfp4),
                      Case(6, 2, 900, 16, KvFormat::kMxfp4, 64, QMode::kFp8),
                      Case(5, 1, 1200, 32, KvFormat::kMxfp4, 16),
                      Case(6, 2, 900, 16, KvFormat::kFp8E4m3, 64, QMode::kFp8)));

}  // namespace
}  // namespace mlajit
