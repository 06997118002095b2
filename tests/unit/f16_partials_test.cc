// The f16 conversions of the split partials (kernel_templates/mla_f16.h)
// against the compiler's own _Float16 conversions, which round to nearest
// even: every f16 pattern both ways, the rounding boundaries (halfway cases,
// the subnormal grid, overflow to infinity), NaN and random floats.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "gtest/gtest.h"
#include "kernel_templates/mla_f16.h"

namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
uint16_t CompilerF16(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t b;
  std::memcpy(&b, &h, sizeof b);
  return b;
}
bool IsNanF16(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

void ExpectRoundsLikeCompiler(float f) {
  const uint16_t want = CompilerF16(f), have = MlaF32BitsToF16(Bits(f));
  if (std::isnan(f)) {
    EXPECT_TRUE(IsNanF16(have)) << f;
  } else {
    EXPECT_EQ(have, want) << std::hexfloat << f;
  }
}

TEST(F16Partials, EveryF16PatternWidensExactlyAndRoundTrips) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const uint16_t b = static_cast<uint16_t>(h);
    _Float16 v;
    std::memcpy(&v, &b, sizeof v);
    const float want = static_cast<float>(v);
    const float have = FromBits(MlaF16ToF32Bits(b));
    if (IsNanF16(b)) {
      EXPECT_TRUE(std::isnan(have)) << std::hex << h;
      EXPECT_TRUE(IsNanF16(MlaF32BitsToF16(Bits(have)))) << std::hex << h;
      continue;
    }
    EXPECT_EQ(Bits(have), Bits(want)) << std::hex << h;
    EXPECT_EQ(MlaF32BitsToF16(Bits(have)), b) << std::hex << h;
  }
}

TEST(F16Partials, RoundsToNearestEvenAtEveryBoundary) {
  // Halfway between neighbours and just either side, for every finite f16
  // magnitude (normal and subnormal, both signs): the tie goes to the even one.
  for (uint32_t h = 0; h < 0x7c00u; ++h) {
    const float lo = FromBits(MlaF16ToF32Bits(static_cast<uint16_t>(h)));
    const float hi = FromBits(MlaF16ToF32Bits(static_cast<uint16_t>(h + 1)));
    const float mid = lo + (hi - lo) / 2;  // exact: a float has more bits
    for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      ExpectRoundsLikeCompiler(f);
      ExpectRoundsLikeCompiler(-f);
    }
  }
  for (float f : {65504.0f, 65519.996f, 65520.0f, 1e9f, INFINITY, -INFINITY, 0.0f, -0.0f,
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
                  2.9802322e-8f, 2.9802326e-8f, 5.9604645e-8f, 6.1035156e-5f, 6.1035152e-5f,
                  std::numeric_limits<float>::quiet_NaN(),
                  -std::numeric_limits<float>::quiet_NaN()}) {
    ExpectRoundsLikeCompiler(f);
  }
}

TEST(F16Partials, RandomFloatsRoundLikeTheCompiler) {
  std::mt19937 rng(20261130);
  std::uniform_real_distribution<float> mag(-30.0f, 17.0f);  // 2^-30 .. 2^17
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 200000; ++i) {
    const float f = std::ldexp(1.0f + any(rng) * 0x1p-32f, static_cast<int>(mag(rng)));
    ExpectRoundsLikeCompiler(i % 2 ? f : -f);
    ExpectRoundsLikeCompiler(FromBits(any(rng)));  // every float pattern, NaNs included
  }
}

}  // namespace
