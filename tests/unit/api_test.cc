// The C ABI on a machine without a GPU (and argument checks that need none).
#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mlajit/mlajit.h"
#include "src/gpu/backend.h"
#include "tests/unit/temp_dir.h"

namespace {

using ::testing::HasSubstr;

TEST(CApi, VersionAndErrors) {
  EXPECT_STREQ(mlajit_version(), "0.1.0");
  EXPECT_EQ(mlajit_plan_create(nullptr, nullptr, 0, nullptr, nullptr, nullptr, nullptr),
            MLAJIT_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(mlajit_last_error(), HasSubstr("plan (output) is null"));
  mlajit_plan_t plan = reinterpret_cast<mlajit_plan_t>(0x1);
  EXPECT_EQ(mlajit_plan_create(nullptr, nullptr, 0, nullptr, nullptr, nullptr, &plan),
            MLAJIT_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(plan, nullptr) << "outputs are cleared on failure";
  EXPECT_EQ(mlajit_decode(nullptr, nullptr, nullptr), MLAJIT_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(mlajit_last_error(), HasSubstr("plan is null"));
}

TEST(CApi, RuntimeWithoutGpuIsAFailedPrecondition) {
  if (mlajit::gpu::DefaultBackend().ok()) GTEST_SKIP() << "a GPU is present: covered by tests/gpu";
  mlajit_runtime_t rt = reinterpret_cast<mlajit_runtime_t>(0x1);
  EXPECT_EQ(mlajit_runtime_create(nullptr, &rt), MLAJIT_STATUS_FAILED_PRECONDITION);
  EXPECT_EQ(rt, nullptr);
  EXPECT_STRNE(mlajit_last_error(), "");
}

TEST(CApi, RuntimeOptionsStructSizeIsChecked) {
  mlajit_runtime_options_t o = MLAJIT_RUNTIME_OPTIONS_INIT;
  o.struct_size = 4;
  mlajit_runtime_t rt = nullptr;
  EXPECT_EQ(mlajit_runtime_create(&o, &rt), MLAJIT_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(mlajit_last_error(), HasSubstr("options->struct_size=4"));
}

}  // namespace

// The C++ layer over the same calls.
#include "mlajit/mlajit.hpp"

namespace {

TEST(CppApi, StatusCarriesTheMessage) {
  auto rt = mlajit::Runtime::Create(-1);
  ASSERT_FALSE(rt.ok());
  // No GPU: FAILED_PRECONDITION; with a GPU: device -1 is an INVALID_ARGUMENT.
  EXPECT_TRUE(rt.status().code() == absl::StatusCode::kFailedPrecondition ||
              rt.status().code() == absl::StatusCode::kInvalidArgument)
      << rt.status();
  EXPECT_FALSE(rt.status().message().empty());
}

TEST(CppApi, CacheWarmsWithoutAGpu) {
  mlajit::test_support::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  mlajit_cache_options_t o = MLAJIT_CACHE_OPTIONS_INIT;
  o.cache_dir = dir.path().c_str();
  auto cache = mlajit::KernelCache::Open(&o);
  ASSERT_TRUE(cache.ok()) << cache.status();
  auto stats = cache->StatsJson();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_NE(stats->find("\"entries\":0"), std::string::npos) << *stats;
  absl::Status missing = cache->Warm("/nonexistent/manifest.jsonl", "sm_90a");
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(std::string(missing.message()).find("/nonexistent/manifest.jsonl"), std::string::npos)
      << missing;
  auto tuning = cache->TuningJson();
  ASSERT_TRUE(tuning.ok()) << tuning.status();
  EXPECT_EQ(*tuning, "{\"records\":[],\"malformed\":0}");
}

TEST(CppApi, PlanDescribeOfNoPlanIsAnError) {
  mlajit::Plan none;
  absl::StatusOr<std::string> d = none.DescribeJson();
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(d.status().message()).find("plan is null"), std::string::npos) << d.status();
}

}  // namespace
