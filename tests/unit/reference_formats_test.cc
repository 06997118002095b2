// Number formats against the OCP definitions, computed here independently
// (formulas with std::ldexp, brute-force nearest-value searches).
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "src/reference/formats.h"

namespace mlajit {
namespace reference {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// OCP FP8 e4m3fn: (-1)^s * 2^(1-7) * m/8 for e == 0, (-1)^s * 2^(e-7) * (1 + m/8)
// otherwise, S.1111.111 = NaN.
double OcpE4m3(int code) {
  const int s = code >> 7, e = (code >> 3) & 0xF, m = code & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double mag = e == 0 ? std::ldexp(m / 8.0, 1 - 7) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -mag : mag;
}

// OCP MX e2m1: 1 sign, 2 exponent bits (bias 1), 1 mantissa bit, no specials.
double OcpE2m1(int code) {
  const int s = code >> 3, e = (code >> 1) & 3, m = code & 1;
  const double mag = e == 0 ? m * 0.5 : std::ldexp(1.0 + m / 2.0, e - 1);
  return s ? -mag : mag;
}

// Nearest of `count` sorted non-negative values, ties to the even index, clamped
// to the largest: the reference rounding for any small format.
int NearestEvenIndex(double a, const std::vector<double>& values) {
  int best = 0;
  for (int i = 1; i < static_cast<int>(values.size()); ++i) {
    const double d_best = std::fabs(a - values[best]), d = std::fabs(a - values[i]);
    if (d < d_best || (d == d_best && i % 2 == 0)) best = i;
  }
  return best;
}

TEST(Fp8E4m3, AllCodesDecodeToOcpValues) {
  int nans = 0;
  for (int c = 0; c < 256; ++c) {
    const double want = OcpE4m3(c);
    const float got = Fp8E4m3ToFloat(static_cast<uint8_t>(c));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "code " << c;
      ++nans;
    } else {
      EXPECT_EQ(static_cast<double>(got), want) << "code " << c;
      EXPECT_EQ(std::signbit(got), c >= 128) << "code " << c;
    }
  }
  EXPECT_EQ(nans, 2);  // 0x7F and 0xFF only: e4m3fn has no infinities
  EXPECT_EQ(Fp8E4m3ToFloat(0x7E), 448.0f);
  EXPECT_EQ(Fp8E4m3ToFloat(0xFE), -448.0f);
  EXPECT_EQ(Fp8E4m3ToFloat(0x38), 1.0f);
  EXPECT_EQ(Fp8E4m3ToFloat(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(Fp8E4m3ToFloat(0x08), std::ldexp(1.0f, -6));
}

TEST(Fp8E4m3, EveryFiniteCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    EXPECT_EQ(FloatToFp8E4m3(Fp8E4m3ToFloat(static_cast<uint8_t>(c))), c) << "code " << c;
  }
}

TEST(Fp8E4m3, MidpointsRoundToEven) {
  // Consecutive positive codes c, c+1: the midpoint goes to the even code (the
  // mantissa's last bit is the code's last bit); a hair off it goes to the nearer.
  for (int c = 0; c < 0x7E; ++c) {
    const float lo = Fp8E4m3ToFloat(static_cast<uint8_t>(c));
    const float hi = Fp8E4m3ToFloat(static_cast<uint8_t>(c + 1));
    const float mid = (lo + hi) / 2;  // exact in float
    ASSERT_EQ(static_cast<double>(mid), (static_cast<double>(lo) + hi) / 2);
    const int even = c % 2 == 0 ? c : c + 1;
    EXPECT_EQ(FloatToFp8E4m3(mid), even) << "between codes " << c << " and " << c + 1;
    EXPECT_EQ(FloatToFp8E4m3(-mid), 0x80 | even);
    EXPECT_EQ(FloatToFp8E4m3(std::nextafter(mid, 0.0f)), c);
    EXPECT_EQ(FloatToFp8E4m3(std::nextafter(mid, kInf)), c + 1);
  }
  // Explicit ties: 1 + 1/16 lies between 1 (0x38) and 1.125 (0x39) -> 0x38;
  // 1.1875 between 1.125 (0x39) and 1.25 (0x3A) -> 0x3A; 2^-10 between 0 and 2^-9 -> 0.
  EXPECT_EQ(FloatToFp8E4m3(1.0625f), 0x38);
  EXPECT_EQ(FloatToFp8E4m3(1.1875f), 0x3A);
  EXPECT_EQ(FloatToFp8E4m3(std::ldexp(1.0f, -10)), 0x00);
  EXPECT_EQ(FloatToFp8E4m3(std::ldexp(3.0f, -11)), 0x01);
}

TEST(Fp8E4m3, MatchesBruteForceNearest) {
  std::vector<double> values;
  for (int c = 0; c <= 0x7E; ++c) values.push_back(OcpE4m3(c));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> exp(-14, 10);
  for (int i = 0; i < 20000; ++i) {
    const float x = std::ldexp(mant(rng), exp(rng));
    const int want = NearestEvenIndex(x, values);
    ASSERT_EQ(FloatToFp8E4m3(x), want) << "x=" << x;
    ASSERT_EQ(FloatToFp8E4m3(-x), 0x80 | want) << "x=" << -x;
  }
}

TEST(Fp8E4m3, SaturatesAndKeepsNan) {
  for (float x : {448.0f, 449.0f, 464.0f, 480.0f, 1e6f, std::numeric_limits<float>::max(), kInf}) {
    EXPECT_EQ(FloatToFp8E4m3(x), 0x7E) << x;
    EXPECT_EQ(FloatToFp8E4m3(-x), 0xFE) << -x;
  }
  EXPECT_TRUE(std::isnan(Fp8E4m3ToFloat(FloatToFp8E4m3(kNan))));
  EXPECT_TRUE(std::isnan(Fp8E4m3ToFloat(FloatToFp8E4m3(-kNan))));
  EXPECT_EQ(FloatToFp8E4m3(kNan) & 0x7F, 0x7F);
  EXPECT_EQ(FloatToFp8E4m3(std::numeric_limits<float>::denorm_min()), 0x00);
  EXPECT_EQ(FloatToFp8E4m3(-0.0f), 0x80);
}

TEST(Fp8E4m3, PerTensorQuantiser) {
  const std::vector<float> x = {0.5f, -3.0f, 1.25f, 2.0f, 0.0f};
  std::vector<uint8_t> codes(x.size());
  const float scale = QuantizeFp8PerTensor(x, absl::MakeSpan(codes));
  EXPECT_EQ(scale, 3.0f / 448.0f);
  EXPECT_EQ(codes[1], 0xFE);  // the amax element maps to -448 exactly
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(codes[i], FloatToFp8E4m3(x[i] / scale));
    EXPECT_NEAR(Fp8E4m3ToFloat(codes[i]) * scale, x[i], std::fabs(x[i]) * 0.0625 + 1e-9);
  }
  // All zeros: scale 1. An infinity does not set the scale and saturates.
  std::vector<float> zeros(4, 0.0f);
  EXPECT_EQ(QuantizeFp8PerTensor(zeros, absl::MakeSpan(codes).subspan(0, 4)), 1.0f);
  EXPECT_EQ(codes[0], 0);
  const std::vector<float> with_inf = {1.0f, kInf, -2.0f};
  std::vector<uint8_t> c3(3);
  EXPECT_EQ(QuantizeFp8PerTensor(with_inf, absl::MakeSpan(c3)), 2.0f / 448.0f);
  EXPECT_EQ(c3[1], 0x7E);
  EXPECT_EQ(c3[2], 0xFE);
}

TEST(E8m0, AllCodes) {
  for (int c = 0; c < 255; ++c) {
    EXPECT_EQ(static_cast<double>(E8m0ToFloat(static_cast<uint8_t>(c))), std::ldexp(1.0, c - 127))
        << "code " << c;
  }
  EXPECT_TRUE(std::isnan(E8m0ToFloat(0xFF)));
}

TEST(E2m1, AllCodesDecodeAndRoundTrip) {
  for (int c = 0; c < 16; ++c) {
    EXPECT_EQ(static_cast<double>(E2m1ToFloat(static_cast<uint8_t>(c))), OcpE2m1(c)) << c;
    EXPECT_EQ(FloatToE2m1(static_cast<float>(OcpE2m1(c))), c) << c;  // code 8 is -0
  }
  EXPECT_EQ(E2m1ToFloat(0x7), 6.0f);
  EXPECT_EQ(E2m1ToFloat(0xF), -6.0f);
}

TEST(E2m1, RoundsToNearestEvenAndSaturates) {
  std::vector<double> values;
  for (int c = 0; c < 8; ++c) values.push_back(OcpE2m1(c));
  // Every midpoint and a grid around them.
  for (int c = 0; c < 7; ++c) {
    const float mid = static_cast<float>((values[c] + values[c + 1]) / 2);
    EXPECT_EQ(FloatToE2m1(mid), c % 2 == 0 ? c : c + 1) << "midpoint " << mid;
    EXPECT_EQ(FloatToE2m1(std::nextafter(mid, 0.0f)), c) << mid;
    EXPECT_EQ(FloatToE2m1(std::nextafter(mid, kInf)), c + 1) << mid;
  }
  for (float x = 0.0f; x < 8.0f; x += 1.0f / 64) {
    const int want = NearestEvenIndex(x, values);
    EXPECT_EQ(FloatToE2m1(x), want) << x;
    EXPECT_EQ(FloatToE2m1(-x), x == 0.0f ? 0x8 : (0x8 | want)) << -x;
  }
  EXPECT_EQ(FloatToE2m1(100.0f), 0x7);
  EXPECT_EQ(FloatToE2m1(-kInf), 0xF);
  EXPECT_EQ(E2m1ToFloat(FloatToE2m1(kNan)), 0.0f);
}

TEST(E2m1, PackLowNibbleIsEven) {
  const uint8_t b = PackE2m1(0x3, 0xC);
  EXPECT_EQ(b, 0xC3);
  EXPECT_EQ(UnpackE2m1(b, 0), 0x3);
  EXPECT_EQ(UnpackE2m1(b, 1), 0xC);
}

TEST(Mxfp4, BlockScaleAndErrorBound) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;  // any values will do; not a golden test
  std::uniform_int_distribution<int> exp(-40, 40);
  for (int trial = 0; trial < 500; ++trial) {
    float x[kMxBlock];
    const int k = exp(rng);
    for (float& v : x) v = std::ldexp(normal(rng), k);
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    uint8_t codes[kMxBlock];
    const uint8_t scale = QuantizeMxfp4Block(x, codes);
    const int shared = static_cast<int>(std::floor(std::log2(static_cast<double>(amax)))) - 2;
    ASSERT_EQ(scale, shared + 127) << "amax=" << amax;
    const double step = std::ldexp(1.0, shared);
    for (int i = 0; i < kMxBlock; ++i) {
      const double q = E2m1ToFloat(codes[i]) * static_cast<double>(E8m0ToFloat(scale));
      const double err = std::fabs(q - x[i]);
      // Inside the e2m1 range the error is at most half the widest spacing (2);
      // above 6 (saturation) at most 8 - 6; both relative to the block scale.
      ASSERT_LE(err, std::fabs(x[i]) <= 6 * step ? step : 2 * step) << "x=" << x[i];
      ASSERT_LE(err, amax / 2.0);
      ASSERT_EQ(codes[i], FloatToE2m1(static_cast<float>(x[i] / step)));
    }
  }
}

TEST(Mxfp4, SpecialBlocks) {
  float x[kMxBlock] = {};
  uint8_t codes[kMxBlock];
  EXPECT_EQ(QuantizeMxfp4Block(x, codes), 0);  // amax 0: smallest scale, all zeros
  for (uint8_t c : codes) EXPECT_EQ(c & 0x7, 0);
  x[3] = 1.0f;
  EXPECT_EQ(QuantizeMxfp4Block(x, codes), 125);  // floor(log2 1) - 2 = -2
  EXPECT_EQ(codes[3], 0x6);                       // 1 / 2^-2 = 4
  x[5] = kNan;
  EXPECT_EQ(QuantizeMxfp4Block(x, codes), 0xFF);  // NaN poisons the block scale
  x[5] = 0;
  x[7] = std::numeric_limits<float>::max();  // floor(log2) = 127 -> 125, in range
  EXPECT_EQ(QuantizeMxfp4Block(x, codes), 125 + 127);
  x[7] = std::ldexp(1.0f, -140);  // tiny: exponent clamps to -127
  x[3] = 0;
  EXPECT_EQ(QuantizeMxfp4Block(x, codes), 0);
}

TEST(Mxfp4, TokenLayout) {
  std::vector<float> v(kHeadDimQk, 0.0f);
  v[0] = 1.0f;    // block 0 amax 1 -> scale 2^-2, code 4.0 = 0x6
  v[1] = -0.5f;   // -> -2.0 = 0xC
  v[33] = 3.0f;   // block 1 amax 3 -> scale 2^-1, 6.0 = 0x7, odd element: high nibble
  v[575] = 48.0f; // block 17 amax 48 -> scale 2^3, 6.0
  uint8_t token[kMxfp4TokenBytes];
  EncodeMxfp4Token(v.data(), token);
  EXPECT_EQ(token[0], 0xC6);
  EXPECT_EQ(token[16], 0x70);
  EXPECT_EQ(token[287], 0x70);
  EXPECT_EQ(token[288 + 0], 125);
  EXPECT_EQ(token[288 + 1], 126);
  EXPECT_EQ(token[288 + 17], 130);
  std::vector<float> back(kHeadDimQk);
  DecodeMxfp4Token(token, back.data());
  EXPECT_EQ(back, v);
  token[288 + 2] = 0xFF;
  DecodeMxfp4Token(token, back.data());
  EXPECT_TRUE(std::isnan(back[64]));
  EXPECT_FALSE(std::isnan(back[63]));
}

TEST(Bf16, RoundTripAndTiesToEven) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = Bf16ToFloat(static_cast<uint16_t>(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(FloatToBf16(f), b);
  }
  EXPECT_EQ(Bf16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);      // tie -> even (1.0)
  EXPECT_EQ(FloatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);  // tie -> even (0x3F82)
  EXPECT_EQ(FloatToBf16(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f)), 0x3F81);
  EXPECT_EQ(FloatToBf16(-(1.0f + std::ldexp(1.0f, -8))), 0xBF80);
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max()), 0x7F80);  // rounds to +inf
  EXPECT_EQ(FloatToBf16(kInf), 0x7F80);
  // A NaN whose payload sits only in the low bits must not truncate to inf.
  const uint16_t n = FloatToBf16(BitsToFloat(0x7F800001u));
  EXPECT_TRUE(std::isnan(Bf16ToFloat(n)));
  EXPECT_NE(n & 0x0040, 0);
  EXPECT_TRUE(std::signbit(Bf16ToFloat(FloatToBf16(BitsToFloat(0xFF800001u)))));
}

}  // namespace
}  // namespace reference
}  // namespace mlajit
