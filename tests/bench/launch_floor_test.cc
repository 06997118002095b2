// The launch floor's host side: its kernel compiles for the targets the
// bench runs on (NVRTC sm_90a with the dependent-launch instructions, hiprtc
// gfx90a without), and its report line. The timings need a GPU.
#include "tools/bench/launch_floor.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/jit/compiler.h"
#include "tools/bench/bench_kernel.h"

namespace mlajit::bench {
namespace {

using ::testing::HasSubstr;

void ExpectLaunchFloorKernelCompiles(const std::string& arch) {
  absl::StatusOr<jit::Compiler*> compiler = jit::CompilerForArch(arch);
  if (!compiler.ok()) {
    GTEST_SKIP() << "no compiler for " << arch << ": " << compiler.status().message();
  }
  if (!(*compiler)->CheckArch(arch).ok()) GTEST_SKIP() << (*compiler)->Name() << " lacks " << arch;
  absl::StatusOr<jit::CompiledBinary> binary =
      CompileBenchKernel("mlajit_launch_floor", LaunchFloorKernelSource(), arch);
  ASSERT_TRUE(binary.ok()) << binary.status();
  EXPECT_NE(binary->binary.find("mlajit_launch_floor"), std::string::npos);
}

TEST(LaunchFloorKernel, CompilesWithNvrtcForSm90a) { ExpectLaunchFloorKernelCompiles("sm_90a"); }
TEST(LaunchFloorKernel, CompilesWithNvrtcForSm80) { ExpectLaunchFloorKernelCompiles("sm_80"); }
TEST(LaunchFloorKernel, CompilesWithHiprtcForGfx90a) { ExpectLaunchFloorKernelCompiles("gfx90a"); }

TEST(FormatLaunchFloor, NamesEveryFigure) {
  LaunchFloor f;
  f.grid = 264;
  f.one_cta_us = 4.01;
  f.full_grid_us = 4.52;
  f.two_chained_us = 6.25;
  f.three_chained_us = 8.5;
  f.two_burst_us = 3.13;
  f.dependent_launch = true;
  f.two_plain_us = 5.5;
  f.three_plain_us = 7.25;
  f.two_burst_plain_us = 4.75;
  const std::string line = FormatLaunchFloor(f);
  EXPECT_THAT(line, HasSubstr("1 CTA 4.01 us"));
  EXPECT_THAT(line, HasSubstr("264 CTAs 4.52 us"));
  EXPECT_THAT(line, HasSubstr("2 chained 6.25 us"));
  EXPECT_THAT(line, HasSubstr("3 chained 8.50 us"));
  EXPECT_THAT(line, HasSubstr("3.13 us per pair"));
  EXPECT_THAT(line, HasSubstr("programmatic dependents"));
  EXPECT_THAT(line, HasSubstr("plain stream order: 2 5.50 us, 3 7.25 us, back to back 4.75 us"));
  f.dependent_launch = false;
  EXPECT_THAT(FormatLaunchFloor(f), HasSubstr("no programmatic dependent launch"));
}

}  // namespace
}  // namespace mlajit::bench
