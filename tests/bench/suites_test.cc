// The bench's named suites (tools/bench/suites.h): the 8 cases of DESIGN.md
// §4 in each format and mode, the extra suites' shapes, and nothing for an
// unknown name.
#include "tools/bench/suites.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_split.h"

namespace mlajit::bench {
namespace {

std::vector<std::string> Names(const std::vector<Case>& cases) {
  std::vector<std::string> names;
  for (const Case& c : cases) names.push_back(CaseName(c.config));
  return names;
}

TEST(SuiteCases, TheDefaultSuiteIsDesignsEightCasesWithFp8Kv) {
  const std::vector<Case> cases = SuiteCases("default");
  EXPECT_EQ(Names(cases),
            (std::vector<std::string>{"(4,1,1024,32) fp8_e4m3", "(4,4,8192,32) fp8_e4m3",
                                      "(32,1,8192,16) fp8_e4m3", "(32,4,1024,16) fp8_e4m3",
                                      "(32,1,1024,32) fp8_e4m3", "(32,4,8192,32) fp8_e4m3",
                                      "(128,1,8192,16) fp8_e4m3", "(128,4,8192,16) fp8_e4m3"}));
  for (const Case& c : cases) {
    EXPECT_EQ(c.suite, "default");
    EXPECT_EQ(c.config.q_mode, QMode::kBf16);
    EXPECT_EQ(c.config.page_size, 0);
  }
  EXPECT_EQ(Names(SuiteCases("fp8")), Names(cases));  // the suite's other name
}

TEST(SuiteCases, EachFormatAndModeRunsTheSameShapes) {
  const std::vector<Case> fp8 = SuiteCases("default");
  for (const char* name : {"bf16", "a8", "mxfp4", "paged64", "paged1"}) {
    const std::vector<Case> cases = SuiteCases(name);
    ASSERT_EQ(cases.size(), fp8.size()) << name;
    for (size_t i = 0; i < cases.size(); ++i) {
      const reference::BatchConfig &c = cases[i].config, &d = fp8[i].config;
      EXPECT_EQ(cases[i].suite, name);
      EXPECT_EQ(std::tie(c.batch_size, c.q_len, c.kv_len, c.num_heads),
                std::tie(d.batch_size, d.q_len, d.kv_len, d.num_heads))
          << name << " case " << i;
    }
  }
  EXPECT_EQ(SuiteCases("bf16")[0].config.kv_format, KvFormat::kBf16);
  EXPECT_EQ(SuiteCases("mxfp4")[0].config.kv_format, KvFormat::kMxfp4);
  EXPECT_EQ(SuiteCases("a8")[7].config.q_mode, QMode::kFp8);
  EXPECT_EQ(SuiteCases("a8")[7].config.kv_format, KvFormat::kFp8E4m3);
  EXPECT_EQ(SuiteCases("paged64")[3].config.page_size, 64);
  EXPECT_EQ(SuiteCases("paged1")[3].config.page_size, 1);
}

TEST(SuiteCases, TheExtraSuitesShapes) {
  EXPECT_EQ(Names(SuiteCases("heads128")),
            (std::vector<std::string>{"(64,1,8192,128) fp8_e4m3", "(16,2,8192,128) fp8_e4m3",
                                      "(64,1,8192,128) bf16", "(16,2,8192,128) bf16"}));
  EXPECT_EQ(Names(SuiteCases("skewed")),
            (std::vector<std::string>{
                "(64,1,65536,16) fp8_e4m3 skewed", "(64,2,16384,32) fp8_e4m3 uniform",
                "(64,1,65536,16) mxfp4 skewed", "(64,2,16384,32) mxfp4 uniform"}));
  EXPECT_GT(SuiteCases("skewed")[1].config.zero_length_fraction, 0);  // empty sequences too
}

TEST(SuiteCases, AllNamesEverySuiteAndAnUnknownNameHasNone) {
  for (absl::string_view name : absl::StrSplit(kAllSuites, ',')) {
    EXPECT_FALSE(SuiteCases(std::string(name)).empty()) << name;
  }
  EXPECT_TRUE(SuiteCases("fp16").empty());
  EXPECT_TRUE(SuiteCases("").empty());
}

}  // namespace
}  // namespace mlajit::bench
