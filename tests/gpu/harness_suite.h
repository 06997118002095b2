// A GPU test suite sharing one DecodeHarness (runtime, backend, device 0) across
// its tests: created once per suite, and every test skips with the reason when
// no GPU is present.
//
//   class MyGpuTest : public HarnessSuite {};
//   TEST_F(MyGpuTest, Works) { auto r = harness_->RunCase(config, {}); ... }
#ifndef MLAJIT_TESTS_GPU_HARNESS_SUITE_H_
#define MLAJIT_TESTS_GPU_HARNESS_SUITE_H_

#include <memory>
#include <string>

#include "gtest/gtest.h"
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

}  // namespace mlajit

#endif  // MLAJIT_TESTS_GPU_HARNESS_SUITE_H_
