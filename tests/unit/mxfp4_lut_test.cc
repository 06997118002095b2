// The MXFP4 lookup-table dequantisation of the mma.sync path
// (kernel_templates/mla_mxfp4_lut.h) against the reference decoder: for every
// e8m0 scale code (subnormal, huge, overflowing and NaN scales included) and
// every e2m1 code in every one of the eight positions of a 32-bit word, the
// bf16 it produces is the one the reference's value rounds to. On the CPU the
// permute is an emulation of PTX prmt, pinned here by examples that follow
// the PTX ISA's description.
#include <cmath>
#include <cstdint>
#include <random>

#include "gtest/gtest.h"
#include "kernel_templates/mla_mxfp4_lut.h"
#include "src/reference/formats.h"

namespace mlajit::reference {
namespace {

TEST(Mxfp4Lut, PrmtEmulationFollowsPtx) {
  const unsigned a = 0x03020100u, b = 0x87868584u;  // byte i of {b, a} is i, top bit set in b's
  EXPECT_EQ(MlaPrmt(a, b, 0x3210u), a);
  EXPECT_EQ(MlaPrmt(a, b, 0x7654u), b);
  EXPECT_EQ(MlaPrmt(a, b, 0x5140u), 0x85018400u);  // bytes 0, 4, 1, 5
  EXPECT_EQ(MlaPrmt(a, b, 0x0123u), 0x00010203u);
  // Bit 3 of a nibble: the selected byte's top bit, repeated.
  // Byte 3, the top bit of byte 0 (0), the top bit of byte 4 (1), byte 0.
  EXPECT_EQ(MlaPrmt(a, b, 0x0C83u), 0x00FF0003u);
}

// bf16x2 of two floats, each rounded to nearest even (as cvt.rn.bf16x2.f32).
unsigned Bf16Pair(float lo, float hi) {
  return static_cast<unsigned>(FloatToBf16(lo)) | (static_cast<unsigned>(FloatToBf16(hi)) << 16);
}

MlaMxTable TableFor(uint8_t scale_code) {
  const float f = E8m0ToFloat(scale_code);
  return MlaMxTableFromPairs(Bf16Pair(0.0f * f, 0.5f * f), Bf16Pair(1.0f * f, 1.5f * f),
                             Bf16Pair(2.0f * f, 3.0f * f), Bf16Pair(4.0f * f, 6.0f * f));
}

bool IsNanBf16(uint16_t bits) { return (bits & 0x7f80u) == 0x7f80u && (bits & 0x7fu) != 0; }

// Element e of the word x (the low nibble of byte e / 2 for even e) through
// the tables, against FloatToBf16(E2m1ToFloat(code) * scale).
void ExpectWordMatches(unsigned x, uint8_t scale_code, const MlaMxTable& table) {
  const MlaMxWords got = MlaMxToBf16x8(x, table);
  for (int e = 0; e < 8; ++e) {
    const uint8_t code = (x >> (4 * e)) & 15u;
    const uint16_t want = FloatToBf16(E2m1ToFloat(code) * E8m0ToFloat(scale_code));
    const uint16_t have = static_cast<uint16_t>(got.w[e / 2] >> (16 * (e % 2)));
    if (IsNanBf16(want)) {
      EXPECT_TRUE(IsNanBf16(have)) << "scale " << int{scale_code} << " code " << int{code};
    } else {
      EXPECT_EQ(have, want) << "scale " << int{scale_code} << " word " << std::hex << x
                            << " element " << e;
    }
  }
}

TEST(Mxfp4Lut, EveryCodeInEveryPositionForEveryScale) {
  std::mt19937 rng(12345);
  for (int s = 0; s < 256; ++s) {
    const uint8_t scale_code = static_cast<uint8_t>(s);
    const MlaMxTable table = TableFor(scale_code);
    // Every code in every position (the others cycling through the codes too).
    for (unsigned code = 0; code < 16; ++code) {
      for (int shift = 0; shift < 8; ++shift) {
        unsigned x = 0;
        for (int e = 0; e < 8; ++e) {
          x |= ((code + static_cast<unsigned>(e * shift)) & 15u) << (4 * e);
        }
        ExpectWordMatches(x, scale_code, table);
      }
    }
    for (int i = 0; i < 64; ++i) ExpectWordMatches(static_cast<unsigned>(rng()), scale_code, table);
  }
}

TEST(Mxfp4Lut, SignedZeroAndNanScale) {
  // Code 8 is -0: a negative zero in bf16, not +0.
  const MlaMxWords zeros = MlaMxToBf16x8(0x88888888u, TableFor(127));
  for (unsigned w : zeros.w) EXPECT_EQ(w, 0x80008000u);
  // Scale code 0xff is NaN: every element, zero magnitudes too, is NaN.
  const MlaMxWords nans = MlaMxToBf16x8(0x01234567u, TableFor(0xff));
  for (unsigned w : nans.w) {
    EXPECT_TRUE(IsNanBf16(static_cast<uint16_t>(w)));
    EXPECT_TRUE(IsNanBf16(static_cast<uint16_t>(w >> 16)));
  }
}

}  // namespace
}  // namespace mlajit::reference
