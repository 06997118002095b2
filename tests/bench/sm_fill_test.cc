// The SM fill probe's host side: its kernels compile for sm_90a with NVRTC
// (bulk copies, mbarriers and cluster loads in inline PTX), and its report
// line names every figure. The measurement itself needs a GPU.
#include "tools/bench/sm_fill.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/jit/compiler.h"
#include "tools/bench/bench_kernel.h"

namespace mlajit::bench {
namespace {

using ::testing::HasSubstr;

TEST(SmFillKernels, CompileWithNvrtcForSm90a) {
  absl::StatusOr<jit::Compiler*> compiler = jit::CompilerForArch("sm_90a");
  if (!compiler.ok()) GTEST_SKIP() << "no compiler for sm_90a: " << compiler.status().message();
  if (!(*compiler)->CheckArch("sm_90a").ok()) GTEST_SKIP() << (*compiler)->Name() << " lacks sm_90a";
  for (SmFillCopy copy : {SmFillCopy::kBulk, SmFillCopy::kCpAsync, SmFillCopy::kLoads,
                          SmFillCopy::kPeerLoads, SmFillCopy::kMulticast}) {
    const std::string name = KernelName(copy);
    absl::StatusOr<jit::CompiledBinary> binary =
        CompileBenchKernel(name, SmFillKernelSource(), "sm_90a");
    ASSERT_TRUE(binary.ok()) << name << ": " << binary.status();
    EXPECT_NE(binary->binary.find(name), std::string::npos) << name;
  }
}

TEST(FormatSmFill, NamesCopySourceCtasInFlightAndRates) {
  SmFill f;
  f.copy = SmFillCopy::kCpAsync;
  f.from_dram = true;
  f.ctas = 132;
  f.chunk = 16384;
  f.slots = 9;
  f.bytes_per_cta = uint64_t{8} << 20;
  f.bytes_per_cycle = 31.25;
  f.total_bytes_per_s = 4.1e12;
  f.launch_us = 270.5;
  const std::string line = FormatSmFill(f);
  EXPECT_THAT(line, HasSubstr("cp.async"));
  EXPECT_THAT(line, HasSubstr("dram"));
  EXPECT_THAT(line, HasSubstr("132 CTAs"));
  EXPECT_THAT(line, HasSubstr(" 9 x 16 KB in flight"));
  EXPECT_THAT(line, HasSubstr("31.2 B/clk per SM"));
  EXPECT_THAT(line, HasSubstr("4.10 TB/s"));
  EXPECT_THAT(line, HasSubstr("270.5 us for 8 MB"));
}

}  // namespace
}  // namespace mlajit::bench
