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
// Chunk first + 8 i of token tok0 + 16 pass where it lies in 128-byte-swizzled
// block i: every block of a bf16 tile, placed as fp8's latent blocks above.
MLA_HOST_DEVICE constexpr int MlaWgmmaBlockCopyOffset(int tok0, int first, int pass, int i) {
  return i * 8192 + (tok0 + 16 * pass) * 128 + ((first ^ (tok0 & 7)) << 4);
}

// Q^T as e4m3 codes, the B operand of S (K-major, no swizzle): `rows` columns
// (2 x 16 or 2 x 32 for bf16 Q as two terms, else 16 or 32), k32 step
// d / 32, core matrices of 8 rows x 16 codes, 128 bytes apart along K and
// 256 along N. Byte of code d of row n:
MLA_HOST_DEVICE constexpr int MlaWgmmaQ8Offset(int rows, int n, int d) {
  return (d / 32) * rows * 32 + (n / 8) * 256 + ((d % 32) / 16) * 128 + (n % 8) * 16 + d % 16;
}

// =============================================================================
// bf16 tiles: the 64-row path's stage (MlaRowsKvOffset), nine blocks of 64
// dims in the 128-byte swizzle, so that S reads K through descriptors as for
// fp8 (one bf16 product a k16 step, MlaRowsKStepOffset) and tensor copies
// fill the stage, one box a block. (Until v66 the tokens stayed whole, 1152
// bytes a row, and S took K from registers: 36 chained products and their
// shared loads, about 1800 cycles a tile; tools/bench/RESULTS.md v66.)
// =============================================================================
// The tile copy by cp.async is MlaWgmmaBlockCopyOffset's: chunk first + 8 i
// lies in block i, for all nine blocks.

// Q^T as bf16, the B operand of S: K-major in the same 128-byte swizzle, its
// `rows` rows of 128 bytes a block of 64 dims (blocks rows * 128 bytes
// apart). Byte of dim d of row n:
MLA_HOST_DEVICE constexpr int MlaWgmmaQ16Offset(int rows, int n, int d) {
  return (d >> 6) * rows * 128 + n * 128 + ((((d & 63) >> 3) ^ (n & 7)) << 4) + (d & 7) * 2;
}
// Descriptor start of k16 step k of Q^T: block k / 4, 32 bytes a step.
MLA_HOST_DEVICE constexpr int MlaWgmmaQ16KStepOffset(int rows, int k) {
  return (k >> 2) * rows * 128 + (k & 3) * 32;
}

// =============================================================================
// P V (every format): O^T += V^T P^T with V^T from registers
// =============================================================================
// Thread (warp, lane) reads, for k-step s and t = 0..3, tile token
// 16 s + 2 (lane & 3) + (t % 2) + 8 (t / 2), and of it the 16-byte chunk
// MlaWgmmaVChunk of each h < 16 / (bytes per element): fp8 chunk 8 warp + r
// (16 codes), bf16 chunks 16 warp + r + 8 h (8 dims each), r = lane >> 2.
// Both layouts keep chunk c of token t in block c / 8 at position
// (c % 8) ^ (t % 8), and t % 8 = 2 quad + (t % 2): the 8 lanes of a quarter
// warp (r and r + 1, quad 0..3) reach 8 positions.
MLA_HOST_DEVICE constexpr int MlaWgmmaVToken(int step, int lane, int t) {
  return 16 * step + 2 * (lane & 3) + (t % 2) + 8 * (t / 2);
}
MLA_HOST_DEVICE constexpr int MlaWgmmaVChunk(int kv_format, int warp, int r, int h) {
  return kv_format != 0 ? 8 * warp + r : 16 * warp + r + 8 * h;
}
// Bytes between consecutive tokens' rows where the V loads read.
constexpr int kMlaWgmmaVTokenPitch = 128;
// Byte offset from the token's row of chunk h for r = lane >> 2, quad =
// lane & 3 and odd = t % 2 (a token's key depends only on 2 quad + odd).
MLA_HOST_DEVICE constexpr int MlaWgmmaVChunkOffset(int kv_format, int warp, int r, int quad,
                                                   int odd, int h) {
  return (MlaWgmmaVChunk(kv_format, warp, r, h) >> 3) * 8192 + ((r ^ (2 * quad + odd)) << 4);
}

// Output dim of accumulator row m (0..63) of M block b (0..7) of O^T: warp
// m / 16 holds rows r = m % 8 and r + 8. The V fragments take word b % 4 of
// chunk h = b / 4 (bf16) or bytes 2b, 2b + 1 of the chunk (fp8): a thread's
// 16 dims are 16 consecutive ones from 128 warp + 16 r (fp8), or 8 from
// 128 warp + 8 r and 8 from 64 more (bf16).
MLA_HOST_DEVICE constexpr int MlaWgmmaOutDim(int kv_format, int b, int m) {
  return kv_format != 0 ? (m / 16) * 128 + (m % 8) * 16 + 2 * b + (m % 16) / 8
                        : (m / 16) * 128 + (m % 8) * 8 + 64 * (b / 4) + 2 * (b % 4) + (m % 16) / 8;
}
// The 4-dim chunk (dims 4q .. 4q + 3) that accumulators b, b + 1 (b even) of
// thread (warp, lane) hold, both rows of each.
MLA_HOST_DEVICE constexpr int MlaWgmmaOutChunk(int kv_format, int warp, int lane, int b) {
  return MlaWgmmaOutDim(kv_format, b, 16 * warp + (lane >> 2)) / 4;
}

// The epilogue stages its normalised rows in fp32, kMlaWgmmaEpilogueStride
// words apart, and 16-byte chunk q of a row (dims 4q .. 4q + 3) at word
// MlaWgmmaStagedChunk(kv_format, q): chunks swap in pairs where bit 2 (fp8)
// or bit 1 (bf16) of q is set. A thread writes chunks MlaWgmmaOutChunk of its
// rows n = 8 j + 2 quad + e; in each phase of a 16-byte store (8 lanes: quad
// 0..3, r even and odd) the rows put quad 8 words apart and r puts 16 (fp8)
// or 8 (bf16) apart, so without the swap odd r lands on the banks of quad + 2
// or quad + 1; the swap moves odd r by 4 words instead. Readers, 8 lanes on 8
// consecutive chunks, read them permuted, also conflict-free.
constexpr int kMlaWgmmaEpilogueStride = 512 + 4;
MLA_HOST_DEVICE constexpr int MlaWgmmaStagedChunk(int kv_format, int q) {
  return 4 * (q ^ ((q >> (kv_format != 0 ? 2 : 1)) & 1));
}

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
