// The C ABI on a machine without a GPU (and argument checks that need none).
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mlajit/mlajit.h"
#include "src/gpu/backend.h"

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
