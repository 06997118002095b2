// The SM fill probe's report line names every figure (its kernels' compile
// is in launch_floor_test.cc with the bench's other kernels). The
// measurement itself needs a GPU.
#include "tools/bench/sm_fill.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mlajit::bench {
namespace {

using ::testing::HasSubstr;

TEST(FormatSmFill, NamesCopySourceCtasInFlightAndRatesWithTheirSpread) {
  SmFill f;
  f.copy = SmFillCopy::kCpAsync;
  f.from_dram = true;
  f.ctas = 132;
  f.chunk = 16384;
  f.slots = 9;
  f.bytes_per_cta = uint64_t{8} << 20;
  f.bytes_per_cycle = 31.25;
  f.slowest_bytes_per_cycle = 24.5;
  f.fastest_bytes_per_cycle = 32.0;
  f.total_bytes_per_s = 4.1e12;
  f.launch_us = 270.5;
  const std::string line = FormatSmFill(f);
  EXPECT_THAT(line, HasSubstr("cp.async"));
  EXPECT_THAT(line, HasSubstr("dram"));
  EXPECT_THAT(line, HasSubstr("132 CTAs"));
  EXPECT_THAT(line, HasSubstr(" 9 x 16 KB in flight"));
  EXPECT_THAT(line, HasSubstr("31.2 B/clk per SM (median CTA;  24.5- 32.0)"));
  EXPECT_THAT(line, HasSubstr("4.10 TB/s"));
  EXPECT_THAT(line, HasSubstr("270.5 us for 8 MB"));
}

}  // namespace
}  // namespace mlajit::bench
