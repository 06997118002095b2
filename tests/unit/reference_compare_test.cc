// The comparison helper: tolerance, NaN, poison (unwritten) and -inf handling.
#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "src/reference/compare.h"
#include "src/reference/formats.h"

namespace mlajit {
namespace reference {
namespace {

std::vector<float> Ramp(int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = std::sin(0.37f * i) * 3.0f;
  return v;
}

std::vector<uint16_t> ToBf16(const std::vector<float>& v) {
  std::vector<uint16_t> out;
  for (float x : v) out.push_back(FloatToBf16(x));
  return out;
}

TEST(Compare, PoisonPatternsAreNaNsThatArithmeticNeverMakes) {
  EXPECT_TRUE(std::isnan(Bf16ToFloat(kPoisonBf16)));
  EXPECT_TRUE(std::isnan(BitsToFloat(kPoisonF32)));
  // Quiet bit clear: not what an operation or a conversion produces.
  EXPECT_EQ(kPoisonBf16 & 0x0040, 0);
  EXPECT_EQ(kPoisonF32 & 0x00400000u, 0u);
  EXPECT_NE(FloatToBf16(std::nanf("")), kPoisonBf16);
  EXPECT_NE(FloatToBf16(BitsToFloat(kPoisonF32)), kPoisonBf16);
}

TEST(Compare, Bf16RoundingPassesTightTolerance) {
  const std::vector<float> ref = Ramp(1000);
  const Comparison c = CompareBf16(ToBf16(ref), ref);
  EXPECT_EQ(c.count, 1000);
  EXPECT_EQ(c.nan_count, 0);
  EXPECT_EQ(c.unwritten_count, 0);
  EXPECT_GT(c.rel_l2, 0);     // bf16 rounding is visible ...
  EXPECT_LT(c.rel_l2, 4e-3);  // ... and within half an ulp of 8 bits
  EXPECT_TRUE(c.Passes(5e-3)) << c.ToString();
}

TEST(Compare, ToleranceBoundary) {
  const std::vector<float> ref = Ramp(500);
  std::vector<float> got = ref;
  for (float& v : got) v *= 1.02f;  // rel_l2 exactly ~0.02
  const Comparison c = CompareF32(got, ref);
  EXPECT_NEAR(c.rel_l2, 0.02, 1e-6);
  EXPECT_TRUE(c.Passes(0.021)) << c.ToString();
  EXPECT_FALSE(c.Passes(0.019)) << c.ToString();
  EXPECT_NEAR(c.max_abs, 0.06, 1e-3);
}

TEST(Compare, NanNeverPasses) {
  const std::vector<float> ref = Ramp(100);
  std::vector<uint16_t> got = ToBf16(ref);
  got[17] = 0x7FC0;
  Comparison c = CompareBf16(got, ref);
  EXPECT_EQ(c.nan_count, 1);
  EXPECT_FALSE(c.Passes(1e9));
  EXPECT_NE(c.ToString().find("nan=1"), std::string::npos) << c.ToString();
  // A NaN in the reference fails too.
  std::vector<float> bad_ref = ref;
  bad_ref[3] = std::nanf("");
  c = CompareBf16(ToBf16(ref), bad_ref);
  EXPECT_EQ(c.nan_count, 1);
  EXPECT_FALSE(c.Passes(1e9));
  std::vector<float> gotf = ref;
  gotf[0] = -std::nanf("");
  EXPECT_FALSE(CompareF32(gotf, ref).Passes(1e9));
}

TEST(Compare, PoisonCountsAsUnwritten) {
  const std::vector<float> ref = Ramp(64);
  std::vector<uint16_t> got = ToBf16(ref);
  got[0] = kPoisonBf16;
  got[63] = kPoisonBf16;
  const Comparison c = CompareBf16(got, ref, kPoisonBf16);
  EXPECT_EQ(c.unwritten_count, 2);
  EXPECT_EQ(c.nan_count, 0);
  EXPECT_FALSE(c.Passes(1e9));
  std::vector<float> gotf = ref;
  gotf[5] = BitsToFloat(kPoisonF32);
  const Comparison cf = CompareF32(gotf, ref, kPoisonF32);
  EXPECT_EQ(cf.unwritten_count, 1);
  EXPECT_FALSE(cf.Passes(1e9));
}

TEST(Compare, InfinitiesInLse) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const std::vector<float> ref = {1.0f, ninf, 2.0f};
  EXPECT_TRUE(CompareF32({1.0f, ninf, 2.0f}, ref).Passes(1e-6));
  const Comparison c = CompareF32({1.0f, 0.0f, 2.0f}, ref);  // an empty row that got a value
  EXPECT_FALSE(c.Passes(1e9)) << c.ToString();
  EXPECT_FALSE(CompareF32({ninf, ninf, 2.0f}, ref).Passes(1e9));
  EXPECT_FALSE(CompareF32({1.0f, -ninf, 2.0f}, ref).Passes(1e9));
}

TEST(Compare, SizeMismatchAndZeroReference) {
  const std::vector<float> ref = Ramp(10);
  EXPECT_FALSE(CompareF32(absl::MakeConstSpan(ref).subspan(1), ref).Passes(1e9));
  EXPECT_FALSE(CompareBf16(ToBf16(Ramp(11)), ref).Passes(1e9));
  // All-zero reference (kv_len 0 rows): exact zeros pass, anything else fails.
  const std::vector<float> zeros(8, 0.0f);
  EXPECT_TRUE(CompareF32(zeros, zeros).Passes(1e-9));
  std::vector<float> almost = zeros;
  almost[2] = 0.5f;
  EXPECT_FALSE(CompareF32(almost, zeros).Passes(0.1));
}

}  // namespace
}  // namespace reference
}  // namespace mlajit
