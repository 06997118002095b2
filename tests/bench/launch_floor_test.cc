// The launch floor's host side: its kernel, the chain probe's two
// (chain_floor.h), the SM fill and exchange probes' (sm_fill.h, sm_exchange.h,
// sm_90a only) and the
// stream hold's compile for
// the targets the bench runs on (NVRTC sm_90a with the dependent-launch
// instructions, hiprtc gfx90a without), and its report line. The timings
// need a GPU.
#include "tools/bench/launch_floor.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/jit/compiler.h"
#include "tools/bench/bench_kernel.h"
#include "tools/bench/chain_floor.h"
#include "tools/bench/sm_exchange.h"
#include "tools/bench/sm_fill.h"
#include "tools/bench/stream_hold.h"

namespace mlajit::bench {
namespace {

using ::testing::HasSubstr;

void ExpectBenchKernelCompiles(const std::string& name, const char* source,
                               const std::string& arch) {
  absl::StatusOr<jit::Compiler*> compiler = jit::CompilerForArch(arch);
  if (!compiler.ok()) {
    GTEST_SKIP() << "no compiler for " << arch << ": " << compiler.status().message();
  }
  if (!(*compiler)->CheckArch(arch).ok()) GTEST_SKIP() << (*compiler)->Name() << " lacks " << arch;
  absl::StatusOr<jit::CompiledBinary> binary =
      CompileBenchKernel(name, source, arch);
  ASSERT_TRUE(binary.ok()) << binary.status();
  EXPECT_NE(binary->binary.find(name), std::string::npos);
}
void ExpectLaunchFloorKernelCompiles(const std::string& arch) {
  ExpectBenchKernelCompiles("mlajit_launch_floor", LaunchFloorKernelSource(), arch);
}
void ExpectStreamHoldKernelCompiles(const std::string& arch) {
  ExpectBenchKernelCompiles("mlajit_stream_hold", StreamHoldKernelSource(), arch);
}

TEST(LaunchFloorKernel, CompilesWithNvrtcForSm90a) { ExpectLaunchFloorKernelCompiles("sm_90a"); }
TEST(LaunchFloorKernel, CompilesWithNvrtcForSm80) { ExpectLaunchFloorKernelCompiles("sm_80"); }
TEST(LaunchFloorKernel, CompilesWithHiprtcForGfx90a) { ExpectLaunchFloorKernelCompiles("gfx90a"); }
TEST(StreamHoldKernel, CompilesWithNvrtcForSm90a) { ExpectStreamHoldKernelCompiles("sm_90a"); }
TEST(StreamHoldKernel, CompilesWithNvrtcForSm80) { ExpectStreamHoldKernelCompiles("sm_80"); }
TEST(StreamHoldKernel, CompilesWithHiprtcForGfx90a) { ExpectStreamHoldKernelCompiles("gfx90a"); }

// The SM fill probe's source holds one kernel per way of copying.
TEST(SmFillKernels, CompileWithNvrtcForSm90a) {
  for (SmFillCopy copy :
       {SmFillCopy::kBulk, SmFillCopy::kBulkNoFence, SmFillCopy::kBulkWarps, SmFillCopy::kCpAsync,
        SmFillCopy::kLoads, SmFillCopy::kPeerLoads, SmFillCopy::kMulticast}) {
    ExpectBenchKernelCompiles(KernelName(copy), SmFillKernelSource(), "sm_90a");
  }
}

// The SM exchange probe's kernel, built on the fill probe's helpers.
TEST(SmExchangeKernel, CompilesWithNvrtcForSm90a) {
  ExpectBenchKernelCompiles(kSmExchangeKernel, SmExchangeKernelSource(), "sm_90a");
}

// The chain probe's source holds both kernels; each is looked up by name.
void ExpectChainFloorKernelsCompile(const std::string& arch) {
  ExpectBenchKernelCompiles("mlajit_chain_decode", ChainFloorKernelSource(), arch);
  ExpectBenchKernelCompiles("mlajit_chain_merge", ChainFloorKernelSource(), arch);
}
TEST(ChainFloorKernels, CompileWithNvrtcForSm90a) { ExpectChainFloorKernelsCompile("sm_90a"); }
TEST(ChainFloorKernels, CompileWithNvrtcForSm80) { ExpectChainFloorKernelsCompile("sm_80"); }
TEST(ChainFloorKernels, CompileWithHiprtcForGfx90a) { ExpectChainFloorKernelsCompile("gfx90a"); }

TEST(FormatChainFloor, NamesTheShapeAndEveryFigure) {
  ChainFloor f;
  f.shape = SmallestCaseChain();
  f.kv_copies = 67;
  f.decode_only_us = 6.5;
  f.decode_merge_us = 8.25;
  f.decode_merge_l2_us = 7.75;
  const std::string line = FormatChainFloor(f);
  EXPECT_THAT(line, HasSubstr("(4,1,1024,32) fp8 with no arithmetic: 8 row tiles x 8 pieces of "
                              "2 KV tiles, 16 rows"));
  EXPECT_THAT(line, HasSubstr("decode alone 6.50 us"));
  EXPECT_THAT(line, HasSubstr("decode + merge 8.25 us (KV rotated over 67 buffers)"));
  EXPECT_THAT(line, HasSubstr("7.75 us (KV in L2)"));
}

TEST(ChainShapes, MatchTheirCasesWork) {
  // 32 rows per sequence in 16-row tiles; a piece per CTA covers the
  // sequence's 1024 tokens in 64-token tiles.
  // (The host schedule's own pieces: schedule_report_test.cc.)
  for (const ChainShape& s :
       {SmallestCaseChain(), BatchOf32Chain(), SmallestCaseChainBf16(), BatchOf32ChainBf16()}) {
    EXPECT_EQ(s.rows, 16) << s.name;
    EXPECT_EQ(s.splits * s.tiles_per_piece * 64, 1024) << s.name;
  }
  EXPECT_EQ(SmallestCaseChain().row_tiles, 4 * 2);
  EXPECT_EQ(BatchOf32Chain().row_tiles, 32 * 2);
  EXPECT_EQ(SmallestCaseChainBf16().row_tiles, 4 * 2);
  EXPECT_EQ(BatchOf32ChainBf16().row_tiles, 32 * 2);
  EXPECT_EQ(SmallestCaseChain().token_bytes, 576);
  EXPECT_EQ(SmallestCaseChainBf16().token_bytes, 1152);
}

TEST(StreamHold, OutlastsTheHostsEnqueueing) {
  // The hold must exceed what the host spends per timed call, with margin.
  for (double host_us : {0.0, 4.0, 12.5, 80.0}) {
    EXPECT_GT(StreamHold::UsFor(host_us), 2 * host_us) << host_us;
    EXPECT_GE(StreamHold::UsFor(host_us), 10.0) << host_us;
  }
}

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
  f.held_one_cta_us = 1.5;
  f.held_full_grid_us = 2.25;
  f.held_two_chained_us = 3.75;
  f.held_three_chained_us = 5.0;
  const std::string line = FormatLaunchFloor(f);
  EXPECT_THAT(line, HasSubstr("1 CTA 4.01 us"));
  EXPECT_THAT(line, HasSubstr("264 CTAs 4.52 us"));
  EXPECT_THAT(line, HasSubstr("2 chained 6.25 us"));
  EXPECT_THAT(line, HasSubstr("3 chained 8.50 us"));
  EXPECT_THAT(line, HasSubstr("3.13 us per pair"));
  EXPECT_THAT(line, HasSubstr("programmatic dependents"));
  EXPECT_THAT(line, HasSubstr("plain stream order: 2 5.50 us, 3 7.25 us, back to back 4.75 us"));
  EXPECT_THAT(line, HasSubstr("held before each call (device only): 1 CTA 1.50 us, 264 CTAs "
                              "2.25 us, 2 chained 3.75 us, 3 chained 5.00 us"));
  f.dependent_launch = false;
  EXPECT_THAT(FormatLaunchFloor(f), HasSubstr("no programmatic dependent launch"));
}

}  // namespace
}  // namespace mlajit::bench
