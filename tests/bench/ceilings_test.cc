// The benchmark's ceilings (tools/bench/ceilings.h). Timing them needs a GPU;
// what must hold everywhere is the host side of their checks, and that the
// streaming-read kernel compiles for the targets the library builds for.
#include "tools/bench/ceilings.h"

#include <gtest/gtest.h>

#include <cmath>

#include "src/jit/compiler.h"
#include "src/reference/formats.h"
#include "tools/bench/bench_kernel.h"

namespace mlajit::bench {
namespace {

// The product check decodes its inputs and outputs with these.
using reference::Bf16ToFloat;
using reference::Fp8E4m3ToFloat;

TEST(DecodeE4m3, NormalSubnormalAndNan) {
  EXPECT_EQ(Fp8E4m3ToFloat(0x38), 1.0f);  // exponent 7 = bias
  EXPECT_EQ(Fp8E4m3ToFloat(0xB8), -1.0f);
  EXPECT_EQ(Fp8E4m3ToFloat(0x3F), 1.875f);  // the largest magnitude the matmul inputs use
  EXPECT_EQ(Fp8E4m3ToFloat(0x7E), 448.0f);  // the format's largest finite value
  EXPECT_EQ(Fp8E4m3ToFloat(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(Fp8E4m3ToFloat(0x00), 0.0f);
  EXPECT_TRUE(std::isnan(Fp8E4m3ToFloat(0x7F)));
  EXPECT_TRUE(std::isnan(Fp8E4m3ToFloat(0xFF)));
}

TEST(DecodeBf16, IsTheHighHalfOfAFloat) {
  EXPECT_EQ(Bf16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(Bf16ToFloat(0xC000), -2.0f);
  EXPECT_EQ(Bf16ToFloat(0x3E00), 0.125f);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(0xFFFF)));  // the matmul's poison
}

TEST(MatmulElementClose, AcceptsOutputRoundingRejectsWrongSums) {
  EXPECT_TRUE(MatmulElementClose(100.0, 100.3, 2000));   // bf16 step at 100 is 0.5
  EXPECT_TRUE(MatmulElementClose(-3.0, -3.1, 5000));     // accumulation order, large terms
  EXPECT_FALSE(MatmulElementClose(100.0, 110.0, 2000));  // a missing term's worth
  EXPECT_FALSE(MatmulElementClose(0.0, 50.0, 3000));     // an output never written
  EXPECT_FALSE(MatmulElementClose(std::nan(""), 1.0, 10));
}

TEST(ExpectedReadChecksum, SumsEveryWordModulo2To32) {
  EXPECT_EQ(ExpectedReadChecksum(16, 0x01, 1), 4 * 0x01010101u);
  EXPECT_EQ(ExpectedReadChecksum(16, 0x01, 3), 12 * 0x01010101u);
  // 2 GiB is 2^29 words; 2^29 * 0x5b5b5b5b keeps only the word's low three
  // bits (3) above bit 29: 0x60000000.
  EXPECT_EQ(ExpectedReadChecksum(uint64_t{1} << 31, 0x5b, 1), 0x60000000u);
  EXPECT_EQ(ExpectedReadChecksum(0, 0x5b, 20), 0u);
}

void ExpectStreamReadCompiles(const std::string& arch) {
  absl::StatusOr<jit::Compiler*> compiler = jit::CompilerForArch(arch);
  if (!compiler.ok())
    GTEST_SKIP() << "no compiler for " << arch << ": " << compiler.status().message();
  if (!(*compiler)->CheckArch(arch).ok()) GTEST_SKIP() << (*compiler)->Name() << " lacks " << arch;
  absl::StatusOr<jit::CompiledBinary> binary =
      CompileBenchKernel("mlajit_stream_read", StreamReadKernelSource(), arch);
  ASSERT_TRUE(binary.ok()) << binary.status().message();
  EXPECT_NE(binary->binary.find("mlajit_stream_read"), std::string::npos);
}

TEST(StreamReadKernel, CompilesWithNvrtcForSm90a) { ExpectStreamReadCompiles("sm_90a"); }
TEST(StreamReadKernel, CompilesWithHiprtcForGfx90a) { ExpectStreamReadCompiles("gfx90a"); }

}  // namespace
}  // namespace mlajit::bench
