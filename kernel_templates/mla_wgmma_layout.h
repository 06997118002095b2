// Where the sm_90a warpgroup-MMA decode path (mla_decode_wgmma.cuh) keeps
// bytes in shared memory and which thread reads which. Plain C++ (include
// mla_params.h first; the one include is another such file), so that the CPU
// tests can check the properties the kernel's speed and correctness rest on:
// each map is a bijection, the swizzled offsets are the hardware's, and every
// 16-byte shared access of a warp reaches 8 different 16-byte bank groups in
// each quarter warp (tests/unit/plan_wgmma_layout_test.cc).
// kv_format: 0 bf16, 1 fp8, 2 MXFP4 (laid out as fp8: the path converts its
// tiles to e4m3 before either product reads them).
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_LAYOUT_H_
#define MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_LAYOUT_H_

#include "mla_wgmma_rows_layout.h"  // MlaRowsKvOffset: the 128-byte swizzle

// Bytes of one staged tile of 64 tokens: fp8 as stored and MXFP4 converted
// to e4m3 (36 KB), bf16 tiles with 1152 bytes per token.
MLA_HOST_DEVICE constexpr int MlaWgmmaStageBytes(int kv_format) {
  return 64 * MlaWgmmaTokenStride(kv_format);
}

// =============================================================================
// fp8 tiles (and MXFP4 tiles converted to e4m3): S = K Q^T is an e4m3 wgmma
// reading the tile through descriptors
// =============================================================================
// Chunk c (codes 16c .. 16c + 15) of token t. Dims 0..511 are four blocks of
// 128 codes in the 128-byte swizzle (the 64-row path's layout: 8 KB a block,
// token t's row at 128 t, its chunk c % 8 at position (c % 8) ^ (t % 8)); the
// rope dims 512..575 are a fifth block of 64 codes in the 64-byte swizzle
// (4 KB: token t's row at 64 t, chunk c - 32 at (c - 32) ^ ((t / 2) % 4)).
// Stages start at multiples of 1024 bytes, which both swizzles need.
constexpr int kMlaWgmmaFp8RopeBlock = 4 * 8192;
MLA_HOST_DEVICE constexpr int MlaWgmmaFp8Offset(int t, int c) {
  return c < 32 ? MlaRowsKvOffset(t, c)
                : kMlaWgmmaFp8RopeBlock + t * 64 + (((c - 32) ^ ((t >> 1) & 3)) << 4);
}
// Descriptor start (relative to the tile) of k32 step k of S: four steps of
// 32 bytes in each 128-code block, then two in the rope block.
MLA_HOST_DEVICE constexpr int MlaWgmmaFp8KStepOffset(int k) {
  return k < 16 ? MlaRowsKStepOffset(k) : kMlaWgmmaFp8RopeBlock + (k - 16) * 32;
}

// The tile copy: thread tid takes token tok0 = tid / 8 (+ 16 per pass) and
// its chunks first + 8 i (first = tid % 8): eight lanes copy 128 contiguous
// bytes of a token into 8 different bank groups. Both keys are the same for
// all of a thread's tokens (they are 16 apart).
MLA_HOST_DEVICE constexpr int MlaWgmmaFp8CopyOffset(int tok0, int first, int pass, int i) {
  return i < 4
             ? i * 8192 + (tok0 + 16 * pass) * 128 + ((first ^ (tok0 & 7)) << 4)
             : kMlaWgmmaFp8RopeBlock + (tok0 + 16 * pass) * 64 + ((first ^ ((tok0 >> 1) & 3)) << 4);
}

// Q^T as e4m3 codes, the B operand of S (K-major, no swizzle): `rows` columns
// (2 x 16 or 2 x 32 for bf16 Q as two terms, else 16 or 32), k32 step
// d / 32, core matrices of 8 rows x 16 codes, 128 bytes apart along K and
// 256 along N. Byte of code d of row n:
MLA_HOST_DEVICE constexpr int MlaWgmmaQ8Offset(int rows, int n, int d) {
  return (d / 32) * rows * 32 + (n / 8) * 256 + ((d % 32) / 16) * 128 + (n % 8) * 16 + d % 16;
}

// =============================================================================
// 16-bit tiles (bf16): tokens whole, 16-byte chunks swizzled
// =============================================================================
// Chunk c of tile token t (0..63) lies at chunk MlaWgmmaChunkSlot of the
// token's row. 128-bit shared loads are served per quarter warp (8 lanes);
// the key spreads the 8 lanes of every K load (2 tokens x 4 chunks) and every
// V load (4 tokens x 2 chunks) over 8 bank groups.
MLA_HOST_DEVICE constexpr int MlaWgmmaSwizzleKey(int t) {
  return ((t >> 1) & 1) | ((((t >> 2) ^ t) & 1) << 2);
}
MLA_HOST_DEVICE constexpr int MlaWgmmaChunkSlot(int t, int c) { return c ^ MlaWgmmaSwizzleKey(t); }

// ---- QK^T: thread (warp, lane) reads chunk 4 kb + (lane & 3) of tile tokens
// t = 16 warp + (lane >> 2) and t + 8 (same key: only bits 0..2 count) -------
// Each 16-byte load (8 elements) feeds two k16 steps.
MLA_HOST_DEVICE constexpr int MlaWgmmaKToken(int warp, int lane) { return warp * 16 + (lane >> 2); }
struct MlaWgmmaKOffsets {
  int even, odd;  // byte offset of chunk quad (+ 4) within an 8-chunk group
};
MLA_HOST_DEVICE constexpr MlaWgmmaKOffsets MlaWgmmaKOffsetsOf(int t, int quad) {
  return {(quad ^ MlaWgmmaSwizzleKey(t)) * 16, (quad ^ MlaWgmmaSwizzleKey(t) ^ 4) * 16};
}
// Byte offset in the token row of k-block kb: chunk 4 kb + quad is
// 8 (kb / 2) + (4 (kb % 2) + quad), and the key only touches the low 3 bits.
MLA_HOST_DEVICE constexpr int MlaWgmmaKChunkOffset(int even, int odd, int kb) {
  return (kb / 2) * 128 + (kb % 2 ? odd : even);
}

// ---- P V: thread (warp, lane) reads, for k-step s and t = 0..3, tile token
// 16 s + 2 (lane & 3) + (t % 2) + 8 (t / 2): its 16 output dims
// warp * 128 + (lane >> 2) * 16 .. + 15 (one chunk of fp8, two of bf16) ----
MLA_HOST_DEVICE constexpr int MlaWgmmaVToken(int step, int lane, int t) {
  return 16 * step + 2 * (lane & 3) + (t % 2) + 8 * (t / 2);
}
// Bytes between consecutive tokens' rows where the V loads read.
MLA_HOST_DEVICE constexpr int MlaWgmmaVTokenPitch(int kv_format) {
  return kv_format != 0 ? 128 : MlaWgmmaTokenStride(kv_format);
}
// Byte offset from the token's row of chunk h (bf16: 0 or 1) of those dims,
// for r = lane >> 2, quad = lane & 3; the token's key depends only on
// 2 quad + (t % 2) = 2 quad + odd. fp8: chunk 8 warp + r is block `warp`,
// position r ^ (token % 8) (MlaWgmmaFp8Offset).
MLA_HOST_DEVICE constexpr int MlaWgmmaVChunkOffset(int kv_format, int warp, int r, int quad,
                                                   int odd, int h) {
  return kv_format != 0 ? warp * 8192 + ((r ^ (2 * quad + odd)) << 4)
                        : ((16 * warp + 2 * r + h) ^ MlaWgmmaSwizzleKey(2 * quad + odd)) * 16;
}

// ---- Q^T: the QK^T permutation (16-bit tiles) --------------------------------
// The A fragment of k-step s holds, for lane quad q, the logical k columns
// {2q, 2q+1, 2q+8, 2q+9}; a thread's 16-byte load at byte 64 kb + 16 q of its
// token feeds k-steps 2 kb + i (elements 4i..4i+3 are that step's four
// columns). So logical (step s, column k) holds physical dim
//   32 (s / 2) + 8 ((k % 8) / 2) + 4 (s % 2) + 2 (k / 8) + k % 2
// and Q^T is stored that way, in core matrices of 8 rows x 16 bytes:
// [step][rows / 8][k / 8][row % 8][k % 8]. Byte offset of physical dims
// (d, d + 1), d even, of tile row n (both share a step and a 4-byte word):
MLA_HOST_DEVICE constexpr int MlaWgmmaQOffset(int rows, int n, int d) {
  const int kb = d / 32, rem = d % 32;
  const int quad = rem / 8, i = (rem % 8) / 4, half = (rem % 4) / 2;
  const int step = kb * 2 + i;
  return step * rows * 32 + ((n / 8) * 2 + half) * 128 + (n % 8) * 16 + quad * 4;
}

// Output dim of accumulator row m (0..63) of M block b (0..7) of O^T: warp
// m / 16 holds rows r = m % 8 and r + 8, and a thread's 16 dims (both of its
// rows in all 8 blocks) are consecutive, starting at MlaWgmmaOutDimBase.
MLA_HOST_DEVICE constexpr int MlaWgmmaOutDim(int b, int m) {
  return (m / 16) * 128 + (m % 8) * 16 + 2 * b + (m % 16) / 8;
}
MLA_HOST_DEVICE constexpr int MlaWgmmaOutDimBase(int warp, int lane) {
  return warp * 128 + (lane >> 2) * 16;
}

// The epilogue stages its normalised rows in fp32, kMlaWgmmaEpilogueStride
// words apart, and 16-byte chunk q of a row (dims 4q .. 4q + 3) at word
// MlaWgmmaStagedChunk(q): chunks swap in pairs where bit 2 of q is set. A
// thread writes chunks q = dims / 4 of its rows n = 8 j + 2 quad + e; in each
// phase of a 16-byte store (8 lanes: quad 0..3, r even and odd) the rows put
// quad 8 words apart and r puts 16 apart, so without the swap odd r lands on
// the banks of quad + 2; the swap moves odd r by 4 words instead. Readers, 8
// lanes on 8 consecutive chunks, read them permuted, also conflict-free.
constexpr int kMlaWgmmaEpilogueStride = 512 + 4;
MLA_HOST_DEVICE constexpr int MlaWgmmaStagedChunk(int q) { return 4 * (q ^ ((q >> 2) & 1)); }

// =============================================================================
// The warp-specialised 64-row path (mla_decode_wgmma_rows_ws.cuh): fp8 stages
// as above, P V as O^T += V^T P^T with V^T in registers
// =============================================================================
// Accumulating warpgroup a (0, 1) holds output dims 256 a .. 256 a + 255, its
// thread (warp w, lane = 4 r + quad) the 8 consecutive dims from
// MlaRowsWsDimBase: accumulator row 16 w + r + 8 h of M block b (0..3) is
// dim base + 2 b + h.
MLA_HOST_DEVICE constexpr int MlaRowsWsDimBase(int a, int w, int r) {
  return 256 * a + 64 * w + 8 * r;
}
MLA_HOST_DEVICE constexpr int MlaRowsWsOutDim(int a, int b, int m) {
  return MlaRowsWsDimBase(a, m / 16, m % 8) + 2 * b + (m % 16) / 8;
}
// Where in a stage those 8 codes of token t lie: 8 bytes inside chunk
// base / 16 (MlaWgmmaFp8Offset). A warp's load of tokens 2 quad + odd (+ 16 k
// + 8 h) reads 256 bytes in two wavefronts, the fewest there are.
MLA_HOST_DEVICE constexpr int MlaRowsWsVOffset(int a, int w, int r, int t) {
  return MlaWgmmaFp8Offset(t, MlaRowsWsDimBase(a, w, r) / 16) + (r % 2) * 8;
}

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_LAYOUT_H_
