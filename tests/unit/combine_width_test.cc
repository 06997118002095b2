// The merge's lane width: the host picks the merge kernel of the width the
// in-kernel choice would give, so both read MlaCombineLaneColumns.
#include "gtest/gtest.h"
#include "kernel_templates/mla_params.h"

namespace {

// 132 SMs of two 8-warp merge CTAs each: 2112 groups.
constexpr long long kGroups = 132 * 2 * 8;

TEST(CombineLaneColumns, QuartersWhileEachGroupHasAQuarterAtMost) {
  EXPECT_EQ(MlaCombineLaneColumns(0, kGroups), 4);
  EXPECT_EQ(MlaCombineLaneColumns(1, kGroups), 4);
  EXPECT_EQ(MlaCombineLaneColumns(kGroups / 4, kGroups), 4);
  EXPECT_NE(MlaCombineLaneColumns(kGroups / 4 + 1, kGroups), 4);
}

TEST(CombineLaneColumns, HalvesWhileEachGroupHasAHalfAtMost) {
  EXPECT_EQ(MlaCombineLaneColumns(kGroups / 4 + 1, kGroups), 8);
  EXPECT_EQ(MlaCombineLaneColumns(kGroups / 2, kGroups), 8);
}

TEST(CombineLaneColumns, WholeRowsWhereHalvesWouldGiveAGroupTwo) {
  EXPECT_EQ(MlaCombineLaneColumns(kGroups / 2 + 1, kGroups), 16);
  EXPECT_EQ(MlaCombineLaneColumns(kGroups, kGroups), 16);
}

TEST(CombineLaneColumns, HalvesPastARowAGroup) {
  EXPECT_EQ(MlaCombineLaneColumns(kGroups + 1, kGroups), 8);
  EXPECT_EQ(MlaCombineLaneColumns(100 * kGroups, kGroups), 8);
  // 12-warp merges: one CTA an SM, 1584 groups.
  EXPECT_EQ(MlaCombineLaneColumns(1584 + 1, 1584), 8);
  EXPECT_EQ(MlaCombineLaneColumns(1584, 1584), 16);
}

}  // namespace
