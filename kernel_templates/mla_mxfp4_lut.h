// MXFP4 -> bf16 through byte-permute lookup tables, as the mma.sync path's
// ConvertKvTile (mla_decode_mma.cuh) dequantises, and MXFP4 -> e4m3 (after a
// power-of-two shift per tile), as the wgmma path's converting warpgroups
// (mla_wgmma_mxfp4.cuh) do. Plain C++ (mla_params.h
// only): the permute is PTX prmt on the GPU and an emulation of it on the CPU,
// so that tests/unit/mxfp4_lut_test.cc checks the tables and selectors
// against the reference decoder for every scale code.
//
// A 32-element block shares one e8m0 scale, so its eight possible magnitudes
// times the scale become two 8-entry byte tables (the high and the low bytes
// of their bf16 values); prmt looks up four elements at once with their 3-bit
// magnitudes as selector nibbles, and prmt's sign-replicating selectors bring
// in the signs. About 2 instructions per element (tools/bench/RESULTS.md,
// v12d).
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_MXFP4_LUT_H_
#define MLAJIT_KERNEL_TEMPLATES_MLA_MXFP4_LUT_H_

#include "mla_params.h"  // MLA_HOST_DEVICE

// prmt.b32 in its default mode: byte i of the result is byte (sel >> 4i) & 7
// of the 8-byte value {b, a} (a's bytes first), or, when bit 3 of that nibble
// is set, that byte's top bit repeated 8 times.
MLA_HOST_DEVICE inline unsigned MlaPrmt(unsigned a, unsigned b, unsigned sel) {
#if defined(__CUDA_ARCH__)
  unsigned r;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
#else
  const unsigned long long both = (static_cast<unsigned long long>(b) << 32) | a;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) {
    const unsigned nibble = (sel >> (4 * i)) & 15u;
    unsigned byte = static_cast<unsigned>(both >> (8 * (nibble & 7u))) & 0xffu;
    if (nibble & 8u) byte = (byte & 0x80u) ? 0xffu : 0u;
    r |= byte << (8 * i);
  }
  return r;
#endif
}

// The high and low bytes of a block's eight bf16 magnitudes: entries 0..3 in
// hi0 / lo0, 4..7 in hi1 / lo1.
struct MlaMxTable {
  unsigned hi0, hi1, lo0, lo1;
};
// From the bf16x2 pairs (low half first) of magnitudes {0, 0.5}, {1, 1.5},
// {2, 3} and {4, 6} times the block's scale.
MLA_HOST_DEVICE inline MlaMxTable MlaMxTableFromPairs(unsigned p01, unsigned p23, unsigned p45,
                                                      unsigned p67) {
  return {MlaPrmt(p01, p23, 0x7531u), MlaPrmt(p45, p67, 0x7531u), MlaPrmt(p01, p23, 0x6420u),
          MlaPrmt(p45, p67, 0x6420u)};
}

// Eight e2m1 codes (element 2i in the low nibble of byte i) -> four bf16x2,
// elements 2i and 2i + 1 in word i.
struct MlaMxWords {
  unsigned w[4];
};
MLA_HOST_DEVICE inline MlaMxWords MlaMxToBf16x8(unsigned x, const MlaMxTable& t) {
  const unsigned sel_lo = x & 0x7777u, sel_hi = (x >> 16) & 0x7777u;  // magnitudes 0-3, 4-7
  // Element e's sign as the top bit of byte e % 4: the sign-replicating
  // selectors take odd elements' signs from x (bits 7, 15, 23, 31) and even
  // elements' from x << 4.
  const unsigned y = x << 4;
  const unsigned s_lo = MlaPrmt(y, x, 0xD9C8u), s_hi = MlaPrmt(y, x, 0xFBEAu);
  const unsigned h_lo = MlaPrmt(t.hi0, t.hi1, sel_lo) | (s_lo & 0x80808080u);
  const unsigned h_hi = MlaPrmt(t.hi0, t.hi1, sel_hi) | (s_hi & 0x80808080u);
  const unsigned l_lo = MlaPrmt(t.lo0, t.lo1, sel_lo), l_hi = MlaPrmt(t.lo0, t.lo1, sel_hi);
  return {{MlaPrmt(l_lo, h_lo, 0x5140u), MlaPrmt(l_lo, h_lo, 0x7362u), MlaPrmt(l_hi, h_hi, 0x5140u),
           MlaPrmt(l_hi, h_hi, 0x7362u)}};
}

// ---- MXFP4 -> e4m3 (the swap-AB wgmma path's e4m3 tiles) --------------------
// A tile's block scales are first shifted by one power of two for the whole
// tile (mla_wgmma_mxfp4.cuh), after which a block's eight magnitudes are e4m3
// codes: one byte each, so one 8-entry table t0 (entries 0..3) / t1 (4..7).
// From the e4m3x2 pairs (low byte first) of magnitudes {0, 0.5}, {1, 1.5},
// {2, 3} and {4, 6} times the block's shifted scale.
struct MlaMxE4m3Table {
  unsigned t0, t1;
};
MLA_HOST_DEVICE inline MlaMxE4m3Table MlaMxE4m3TableFromPairs(unsigned p01, unsigned p23,
                                                              unsigned p45, unsigned p67) {
  return {(p01 & 0xffffu) | (p23 << 16), (p45 & 0xffffu) | (p67 << 16)};
}
// Eight e2m1 codes (element 2i in the low nibble of byte i) -> eight e4m3
// codes, element e in byte e % 4 of word e / 4. The magnitudes index the
// table, the signs come in as MlaMxToBf16x8's do: 9 instructions per 8
// elements, and half the bytes to store. (prmt reads only the low 16 bits of
// its selector, so one mask serves both halves.)
struct MlaMxE4m3Words {
  unsigned lo, hi;
};
MLA_HOST_DEVICE inline MlaMxE4m3Words MlaMxToE4m3x8(unsigned x, const MlaMxE4m3Table& t) {
  const unsigned sel_lo = x & 0x77777777u, sel_hi = sel_lo >> 16;
  const unsigned y = x << 4;
  const unsigned s_lo = MlaPrmt(y, x, 0xD9C8u), s_hi = MlaPrmt(y, x, 0xFBEAu);
  return {MlaPrmt(t.t0, t.t1, sel_lo) | (s_lo & 0x80808080u),
          MlaPrmt(t.t0, t.t1, sel_hi) | (s_hi & 0x80808080u)};
}

// The tile's shift: with s_max its largest scale code, block scale code s
// becomes 2^(s - s_max + 6), so that the tile's largest magnitude, 6 x 2^6 =
// 384, stays inside e4m3's 448; the tile's values are its codes times
// 2^(s_max - 133) (e8m0's bias 127, and 6). Every block within 14 powers of
// two of s_max converts exactly (0.5 x 2^-8 is e4m3's smallest subnormal,
// 2^-9); those further below round to e4m3's subnormal grid, an absolute
// error of at most 2^-10 x 2^(s_max - 133), 2^-16 of the tile's largest
// block scale (bf16 Q's two e4m3 terms drop what lies under 2^-13 of its
// largest magnitude). The block's exponent, clamped where every magnitude
// rounds to zero anyway:
MLA_HOST_DEVICE constexpr int MlaMxShiftedExponent(int scale_code, int tile_max_code) {
  return scale_code - tile_max_code + 6 < -40 ? -40 : scale_code - tile_max_code + 6;
}
MLA_HOST_DEVICE constexpr int MlaMxTileExponent(int tile_max_code) { return tile_max_code - 133; }

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_MXFP4_LUT_H_
