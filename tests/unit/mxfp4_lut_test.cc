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

// ---- e4m3 tiles: a tile-wide power-of-two shift, then one byte per element ----

// As the kernel builds it (mla_wgmma_mxfp4.cuh), with the reference's
// rounding to e4m3 (nearest even, saturating, NaN kept) in place of
// cvt.rn.satfinite.e4m3x2.f32.
MlaMxE4m3Table E4m3TableFor(uint8_t scale_code, uint8_t tile_max_code) {
  const float f = scale_code == 0xff
                      ? std::nanf("")
                      : std::ldexp(1.0f, MlaMxShiftedExponent(scale_code, tile_max_code));
  auto pair = [&](float lo, float hi) {
    return static_cast<unsigned>(FloatToFp8E4m3(lo * f)) |
           (static_cast<unsigned>(FloatToFp8E4m3(hi * f)) << 8);
  };
  return MlaMxE4m3TableFromPairs(pair(0.0f, 0.5f), pair(1.0f, 1.5f), pair(2.0f, 3.0f),
                                 pair(4.0f, 6.0f));
}

// Element e of x through the table, as a value (times the tile's power of
// two), against the reference decoder: exact for blocks within 14 powers of
// two of the tile's largest scale, within 2^-10 of a code unit below that.
void ExpectE4m3WordMatches(unsigned x, uint8_t scale_code, uint8_t tile_max_code) {
  const MlaMxE4m3Words got = MlaMxToE4m3x8(x, E4m3TableFor(scale_code, tile_max_code));
  const int unit = MlaMxTileExponent(tile_max_code);
  for (int e = 0; e < 8; ++e) {
    const uint8_t code = (x >> (4 * e)) & 15u;
    const uint8_t have = static_cast<uint8_t>((e < 4 ? got.lo : got.hi) >> (8 * (e % 4)));
    const double want = static_cast<double>(E2m1ToFloat(code)) * E8m0ToFloat(scale_code);
    const double value = std::ldexp(static_cast<double>(Fp8E4m3ToFloat(have)), unit);
    if (std::isnan(want)) {
      EXPECT_EQ(have & 0x7fu, 0x7fu) << "scale " << int{scale_code} << " code " << int{code};
      continue;
    }
    EXPECT_EQ(have >> 7, code >> 3) << "the sign, scale " << int{scale_code} << " code "
                                    << int{code};
    if (scale_code + 14 >= tile_max_code) {
      EXPECT_EQ(value, want) << "scale " << int{scale_code} << " tile max " << int{tile_max_code}
                             << " code " << int{code};
    } else {
      EXPECT_LE(std::fabs(value - want), std::ldexp(1.0, unit - 10))
          << "scale " << int{scale_code} << " tile max " << int{tile_max_code} << " code "
          << int{code};
    }
  }
}

TEST(Mxfp4Lut, E4m3TilesHoldEveryBlockWithinTheirShift) {
  std::mt19937 rng(777);
  for (int top : {0, 1, 14, 15, 100, 127, 200, 254}) {
    const uint8_t tile_max = static_cast<uint8_t>(top);
    for (int s = 0; s <= top; ++s) {
      const uint8_t scale_code = static_cast<uint8_t>(s);
      for (unsigned code = 0; code < 16; ++code) {
        for (int shift = 0; shift < 8; ++shift) {
          unsigned x = 0;
          for (int e = 0; e < 8; ++e) {
            x |= ((code + static_cast<unsigned>(e * shift)) & 15u) << (4 * e);
          }
          ExpectE4m3WordMatches(x, scale_code, tile_max);
        }
      }
      for (int i = 0; i < 8; ++i) ExpectE4m3WordMatches(static_cast<unsigned>(rng()), scale_code, tile_max);
    }
  }
  // The largest magnitude of the tile's largest block is 384, inside e4m3.
  const MlaMxE4m3Words top = MlaMxToE4m3x8(0x77777777u, E4m3TableFor(200, 200));
  EXPECT_EQ(Fp8E4m3ToFloat(static_cast<uint8_t>(top.lo)), 384.0f);
  // A NaN scale (which is also the tile's largest code) makes NaN codes.
  const MlaMxE4m3Words nans = MlaMxToE4m3x8(0x01234567u, E4m3TableFor(0xff, 0xff));
  for (int e = 0; e < 8; ++e) {
    EXPECT_EQ(((e < 4 ? nans.lo : nans.hi) >> (8 * (e % 4)) & 0x7fu), 0x7fu);
  }
  // -0 stays -0.
  EXPECT_EQ(MlaMxToE4m3x8(0x88888888u, E4m3TableFor(120, 127)).lo, 0x80808080u);
}

}  // namespace
}  // namespace mlajit::reference
