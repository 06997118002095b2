// bf16 Q as two e4m3 terms, the way the sm_90a swap-AB path feeds an fp8
// product with bf16 Q (kernel_templates/mla_wgmma_common.cuh, SplitE4m3x2):
// Q is scaled by a power of two so that the tile's largest magnitude lies in
// [128, 256), then y = hi + lo / 16 with hi = e4m3(y) and lo = e4m3((y - hi) * 16),
// both rounded to nearest even and saturated (as cvt.rn.satfinite does and as
// the reference's encoder does). Checked for every bf16 value below 256:
//   - the low term never saturates (|(y - hi) * 16| <= |y| < 256 from 2^-6
//     up, at most 16 |y| below);
//   - the two terms hold y exactly from 2^-6 up, which is 2^-13 of the
//     largest magnitude at most (bf16 has 8 significant bits: hi keeps 4, and the
//     remainder is a multiple of y's last bit of at most 8 of them, which
//     e4m3 holds exactly once it is a normal or subnormal e4m3 value);
//   - below 2^-6 the error is at most 2^-14 (half the low term's grid).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "gtest/gtest.h"
#include "src/reference/formats.h"

namespace {

using mlajit::reference::FloatToFp8E4m3;
using mlajit::reference::Fp8E4m3ToFloat;

float Bf16Value(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

float E4m3(float x) { return Fp8E4m3ToFloat(FloatToFp8E4m3(x)); }

TEST(QSplit, TwoE4m3TermsHoldEveryScaledBf16Value) {
  int exact = 0, checked = 0;
  for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const float y = Bf16Value(static_cast<uint16_t>(bits));
    if (!std::isfinite(y) || std::fabs(y) >= 256.0f) continue;
    ++checked;
    const float hi = E4m3(y);
    const float rest = (y - hi) * 16.0f;  // exact: y and hi are close and short
    ASSERT_LT(std::fabs(rest), 448.0f) << y;
    if (std::fabs(y) >= 0x1p-6f) {
      ASSERT_LE(std::fabs(rest), std::fabs(y)) << y;
    }
    const float lo = E4m3(rest);
    const float back = hi + lo / 16.0f;
    if (std::fabs(y) >= 0x1p-6f) {
      ASSERT_EQ(back, y) << std::hexfloat << y << " hi " << hi << " lo " << lo;
      ++exact;
    } else {
      ASSERT_LE(std::fabs(back - y), 0x1p-14f) << std::hexfloat << y;
    }
  }
  // bf16 values in [2^-6, 256): 14 binades of 128 values, both signs.
  EXPECT_EQ(exact, 2 * 14 * 128);
  EXPECT_GT(checked, exact);
}

}  // namespace
