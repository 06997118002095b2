// The SM exchange probe's report line names every figure (its kernel's
// compile is in launch_floor_test.cc with the bench's other kernels). The
// measurement itself needs a GPU.
#include "tools/bench/sm_exchange.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mlajit::bench {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(FormatSmExchange, NamesBothPartsTheTileTimeAndTheRateIn) {
  SmExchange e;
  e.l2_bytes = 40 * 1024;
  e.push_bytes = 24 * 1024;
  e.piece = 8 * 1024;
  e.ctas = 132;
  e.cycles_per_tile = 2048;
  e.slowest_cycles_per_tile = 2100;
  e.launch_us = 300.25;
  const std::string line = FormatSmExchange(e);
  EXPECT_THAT(line, HasSubstr("40 KB from L2 + 24 KB from the other SM a tile in  8 KB copies"));
  EXPECT_THAT(line, HasSubstr("132 CTAs"));
  EXPECT_THAT(line, HasSubstr("2048 cycles a tile (median CTA; slowest   2100)"));
  EXPECT_THAT(line, HasSubstr(" 32.0 B/clk in"));  // 65536 bytes in 2048 cycles
  EXPECT_THAT(line, HasSubstr("300.2 us"));
  EXPECT_THAT(line, Not(HasSubstr("relayed")));
  e.relay = true;
  EXPECT_THAT(FormatSmExchange(e),
              HasSubstr("24 KB from the other SM a tile (its L2 part, relayed by bulk copies)"));
}

}  // namespace
}  // namespace mlajit::bench
