// A GPU test suite sharing one DecodeHarness (runtime, backend, device 0) across
// its tests: created once per suite, and every test skips with the reason when
// no GPU is present.
//
//   class MyGpuTest : public HarnessSuite {};
//   TEST_F(MyGpuTest, Works) { auto r = harness_->RunCase(config, {}); ... }
#ifndef MLAJIT_TESTS_GPU_HARNESS_SUITE_H_
#define MLAJIT_TESTS_GPU_HARNESS_SUITE_H_

#include <memory>
#include <regex>
#include <string>

#include "gtest/gtest.h"
#include "mlajit/mlajit.h"
#include "tests/unit/scoped_env.h"
#include "tools/harness/decode_harness.h"

namespace mlajit {

class HarnessSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto h = harness::DecodeHarness::Create(0);
    if (!h.ok()) {
      skip_reason_ = std::string(h.status().message());
      return;
    }
    harness_ = h->release();
  }
  static void TearDownTestSuite() {
    delete harness_;
    harness_ = nullptr;
  }
  // Derived fixtures that override SetUp call this first and return when
  // IsSkipped().
  void SetUp() override {
    if (harness_ == nullptr) GTEST_SKIP() << "no GPU: " << skip_reason_;
  }

  static inline harness::DecodeHarness* harness_ = nullptr;
  static inline std::string skip_reason_ = "unknown";
};

// A JSON string from the library, freed here.
inline std::string TakeJson(char* p) {
  std::string s = p != nullptr ? p : "";
  mlajit_free(p);
  return s;
}

// The integer value of "name" where it first appears in `json` (-999: absent).
inline int IntField(const std::string& json, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + name + "\":(-?[0-9]+)"))) return -999;
  return std::stoi(m[1]);
}

// What the batch's plan runs: mlajit_plan_describe_json (kernel, tiles, CTAs).
inline std::string DescribePlan(const harness::DeviceBatch& db) {
  char* json = nullptr;
  EXPECT_EQ(mlajit_plan_describe_json(db.plan, &json), MLAJIT_STATUS_OK) << mlajit_last_error();
  return TakeJson(json);
}

using test_support::ScopedEnv;

}  // namespace mlajit

#endif  // MLAJIT_TESTS_GPU_HARNESS_SUITE_H_
