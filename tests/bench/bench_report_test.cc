// The bench's table and JSON from made-up results: every column, the
// geometric means per suite, the per-SM bound where a case has one, and a
// JSON document that parses.
#include "tools/bench/bench_report.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mlajit::bench {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

CaseResult Result(const std::string& suite, int batch, double median_us, double bound_us) {
  CaseResult r;
  r.c.suite = suite;
  r.c.config.batch_size = batch;
  r.c.config.q_len = 1;
  r.c.config.kv_len = 1024;
  r.c.config.num_heads = 32;
  r.c.config.kv_format = KvFormat::kBf16;
  r.median_us = r.min_us = r.paced_us = r.burst_us = median_us;
  r.host_us = 5;
  r.bytes = 4.0e6 * median_us;  // 4 TB/s
  r.flops = 1e8 * median_us;
  r.floor_us = r.contract_floor_us = median_us / 2;
  r.bounds.in_us = bound_us;  // 0: none
  r.rel_err = 2e-3;
  r.passed = true;
  r.times_us = {median_us, median_us + 0.5};
  r.plan_json = R"({"block_m":16,"num_ctas":132})";
  return r;
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

TEST(ResultsTable, RowsCarryTheBoundAndItsShareOfTheMedian) {
  const std::string table = ResultsTable({Result("bf16", 4, 20, 5), Result("bf16", 32, 80, 40)},
                                         /*checked=*/true);
  const std::vector<std::string> lines = Lines(table);
  ASSERT_EQ(lines.size(), 4u);  // header, two cases, geomean
  EXPECT_THAT(lines[0], ContainsRegex("contract_us +%contract +bound_us +%bound +rel_err"));
  EXPECT_THAT(lines[1], HasSubstr("(4,1,1024,32) bf16"));
  EXPECT_THAT(lines[1], ContainsRegex(" 5\\.00 +25\\.0% +2\\.00e-03 +yes "));
  EXPECT_THAT(lines[2], ContainsRegex(" 40\\.00 +50\\.0% "));
  // Geomeans: median sqrt(20 * 80) = 40, bound sqrt(5 * 40) = 14.14 (35.4 %).
  EXPECT_THAT(lines[3], ContainsRegex("^bf16 +geomean +40\\.00 "));
  EXPECT_THAT(lines[3], ContainsRegex(" 14\\.14 +35\\.4%$"));
}

TEST(ResultsTable, ACaseWithoutABoundShowsADashAndDropsTheSuitesBoundMean) {
  const std::string table =
      ResultsTable({Result("fp8", 4, 20, 0), Result("fp8", 32, 80, 40), Result("mxfp4", 4, 30, 10)},
                   /*checked=*/false);
  const std::vector<std::string> lines = Lines(table);
  ASSERT_EQ(lines.size(), 6u);  // header, two cases and a geomean, one case and a geomean
  EXPECT_THAT(lines[1], ContainsRegex(" - +- +2\\.00e-03 +- "));  // no bound, not checked
  EXPECT_THAT(lines[3], ContainsRegex("^fp8 +geomean "));
  EXPECT_THAT(lines[3], Not(HasSubstr("%%")));
  EXPECT_THAT(lines[3], ContainsRegex("50\\.0%$"));  // ends at %contract: no bound columns
  EXPECT_THAT(lines[5], ContainsRegex("^mxfp4 +geomean .* 10\\.00 +33\\.3%$"));
}

TEST(ResultsJson, IsOneDocumentWithEveryCaseAndItsBounds) {
  Ceilings ceilings = AssumedCeilings("assumed");
  std::vector<CaseResult> results = {Result("bf16", 4, 20, 5), Result("bf16", 32, 80, 0)};
  results[0].bounds.sm_in_bytes = 165888;
  results[0].bounds.mma_us = 0.5;
  results[0].bounds.dram_us = 1.1;
  results[0].checked = true;  // the second timed under --no-check
  const std::string json = ResultsJson(ceilings, std::nullopt, {}, 200, 200.0, results);
  EXPECT_THAT(json, HasSubstr(R"("passed":true,"checked":true,)"));
  EXPECT_THAT(json, HasSubstr(R"("checked":false,)"));
  EXPECT_THAT(json, HasSubstr(R"("runs":200,"warmup_ms":200,"cases":[)"));
  EXPECT_THAT(json, HasSubstr(R"("case":"(4,1,1024,32) bf16","median_us":20)"));
  EXPECT_THAT(json, HasSubstr(R"("bounds":{"sm_in_bytes":165888,"in_us":5.000,"mma_us":0.500,)"
                              R"("dram_us":1.100,"bound_us":5.000})"));
  EXPECT_THAT(json, HasSubstr(R"("bounds":null)"));
  EXPECT_THAT(json, HasSubstr(R"("times_us":[20.00,20.50])"));
  EXPECT_THAT(json, HasSubstr(R"("plan":{"block_m":16,"num_ctas":132})"));
  EXPECT_THAT(json, Not(HasSubstr("launch_floor")));
  // Balanced brackets outside strings: one document.
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char ch : json) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (ch == '\\') {
        escaped = true;
      } else if (ch == '"') {
        in_string = false;
      }
      continue;
    }
    if (ch == '"') in_string = true;
    if (ch == '{' || ch == '[') ++depth;
    if (ch == '}' || ch == ']') --depth;
    ASSERT_GE(depth, 0) << json;
  }
  EXPECT_EQ(depth, 0) << json;
  EXPECT_FALSE(in_string) << json;
}

TEST(ResultsJson, CarriesThePowerWindowsWhereMeasured) {
  Ceilings ceilings = AssumedCeilings("assumed");
  std::vector<CaseResult> results = {Result("fp8", 4, 20, 5), Result("fp8", 32, 80, 0)};
  PowerWindow w;
  w.watts = 700;
  w.device_ms = 1000;
  w.calls = 4000;  // 250 us a call at 700 W: 0.175 J
  w.clocks.sm_mhz_median = 1545;
  w.clocks.energy_steps = 40;
  results[0].power = w;
  const std::string without = ResultsJson(ceilings, std::nullopt, {}, 200, 200.0, results);
  EXPECT_THAT(without, HasSubstr(R"(}},"runs":200,)"));  // the ceilings, then no windows of its own
  EXPECT_THAT(without, HasSubstr(R"("power":{"watts":700.00,"device_ms":1000.000,"calls":4000,)"
                                 R"("us_per_call":250.0000,"joules_per_call":0.175,)"
                                 R"("sm_mhz_median":1545,)"));
  EXPECT_THAT(without, HasSubstr(R"("power":null)"));  // the second case
  w.watts = 160;
  const std::string with =
      ResultsJson(ceilings, std::nullopt, {}, 200, 200.0, results, {{"waiting", w}, {"fp8", w}});
  EXPECT_THAT(with, HasSubstr(R"("power":{"waiting":{"watts":160.00,)"));
  EXPECT_THAT(with, HasSubstr(R"(,"fp8":{"watts":160.00,)"));
}

TEST(PowerWindow, JoulesAndMicrosecondsPerCall) {
  PowerWindow w;
  EXPECT_EQ(w.JoulesPerCall(), 0);  // no calls: no figure, not a division by zero
  EXPECT_EQ(w.UsPerCall(), 0);
  w.watts = 500;
  w.device_ms = 200;
  w.calls = 1000;
  EXPECT_DOUBLE_EQ(w.UsPerCall(), 200);
  EXPECT_DOUBLE_EQ(w.JoulesPerCall(), 0.1);  // 500 W x 0.2 s / 1000
  EXPECT_THAT(FormatPowerWindow("x", w), HasSubstr("x: 500 W at 0 MHz"));
  EXPECT_THAT(FormatPowerWindow("x", w), HasSubstr("0.200 ms a call, 0.1000 J a call"));
}

TEST(CaseName, NamesShapeFormatAndOptions) {
  reference::BatchConfig c;
  c.batch_size = 128;
  c.q_len = 2;
  c.kv_len = 8192;
  c.num_heads = 16;
  c.kv_format = KvFormat::kFp8E4m3;
  c.q_mode = QMode::kFp8;
  c.page_size = 64;
  c.lengths = reference::LengthDistribution::kSkewed;
  EXPECT_EQ(CaseName(c), "(128,2,8192,16) fp8_e4m3 a8 p64 skewed");
}

}  // namespace
}  // namespace mlajit::bench
