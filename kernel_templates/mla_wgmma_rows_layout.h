// Where the sm_90a 64-row decode path (mla_decode_wgmma_rows.cuh) keeps bytes
// in shared memory and which thread moves which. Plain C++ with no includes
// (include mla_params.h first), so that the CPU tests can check what the
// kernel's speed and correctness rest on: every tile position is written
// exactly once, the swizzled offsets are the hardware's 128-byte swizzle, and
// each quarter warp's 16-byte accesses reach 8 different bank groups
// (tests/unit/plan_wgmma_rows_layout_test.cc). Offsets are in bytes; all
// arguments are non-negative, so the masks and shifts below are the divisions
// and remainders they stand for.
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_ROWS_LAYOUT_H_
#define MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_ROWS_LAYOUT_H_

// ---- operand tiles ----------------------------------------------------------
// The KV operand (64 tokens x 576 16-bit dims, 128-byte swizzle): 16-byte chunk
// c (dims 8c .. 8c + 7) of token t. Blocks of 64 dims are 8 KB apart; in a
// block, token t is the 128-byte row t and its chunk c % 8 sits at position
// (c % 8) ^ (t % 8) (MlaRowsKvRowOffset, c < 8).
MLA_HOST_DEVICE constexpr int MlaRowsKvRowOffset(int t, int c) {
  return t * 128 + ((c ^ (t & 7)) << 4);
}
MLA_HOST_DEVICE constexpr int MlaRowsKvOffset(int t, int c) {
  return (c >> 3) * 8192 + MlaRowsKvRowOffset(t, c & 7);
}

// Descriptor starts (relative to the tile) of k-step k. For S (K-major, 16
// dims a step): block k / 4, 32 bytes a step inside the block, where the
// hardware swizzles the address as it reads. For P V (MN-major through the
// transpose bit, 16 tokens a step): 16 token rows a step, from the base of
// warpgroup wg's 256 dims (blocks 4 wg .. 4 wg + 3).
MLA_HOST_DEVICE constexpr int MlaRowsKStepOffset(int k) { return (k >> 2) * 8192 + (k & 3) * 32; }
MLA_HOST_DEVICE constexpr int MlaRowsVBase(int wg) { return wg * 4 * 8192; }
MLA_HOST_DEVICE constexpr int MlaRowsVStepOffset(int k) { return k * 2048; }

// Q and P (64 rows, K-major without swizzle): 16-byte chunk c of row x.
MLA_HOST_DEVICE constexpr int MlaRowsChunkedOffset(int x, int c) { return (c * 64 + x) * 16; }

// ---- who moves what ------------------------------------------------------------
// bf16 tile copy (all 256 threads, cp.async): pass p (0, 1) of warp w copies
// token 32 p + 4 w + lane / 8, and of it chunks lane % 8 + 8 b (block b), to
// MlaRowsKvRowOffset(token, lane % 8) + 8192 b.
MLA_HOST_DEVICE constexpr int MlaRowsCopyToken(int warp, int lane, int pass) {
  return 32 * pass + 4 * warp + (lane >> 3);
}

// bf16 tiles on the seesaw schedule (mla_decode_wgmma_rows_seesaw.cuh): each
// warpgroup copies the blocks it frees, 128 threads a block: pass p (0..3) of
// warp w (0..3 of its warpgroup) copies token 16 p + 4 w + lane / 8, chunk
// lane % 8 of each such block, to MlaRowsKvRowOffset(token, lane % 8) + 8192 b.
MLA_HOST_DEVICE constexpr int MlaRowsSeesawCopyToken(int w, int lane, int pass) {
  return 16 * pass + 4 * w + (lane >> 3);
}
// Whether warpgroup wg copies block b (0..8) into tile buffer `buf` (0, 1):
// its own V blocks (4 wg .. 4 wg + 3), which only its P V reads, and the rope
// block, which holds P after S and whose last reader is the warpgroup that
// did not score the buffer's tiles (warpgroup `buf` scores buffer `buf`).
MLA_HOST_DEVICE constexpr bool MlaRowsSeesawCopiesBlock(int wg, int buf, int b) {
  return b == 8 ? wg != buf : b / 4 == wg;
}

// fp8 (warpgroup 1, warp w = 0..3 of it): the 8 lanes of quarter q = lane / 8
// take tokens t0 + 16 k (k = 0..3), t0 = 4 w + q, as two pairs
// (t0 + 32 pair, t0 + 32 pair + 16): the pair's 72 raw 16-byte chunks of
// 16 codes, flattened as f = 36 half + c, go to lane f % 8 as its chunk
// i = f / 8 (nine per lane: 72 registers for a tile, none idle). Chunk i of
// lane c0 is chunk c = c0 + 8 i - 36 half of the pair's token `half`, so a
// quarter reads 128 contiguous bytes of one token per load but for i = 4,
// which reads the first token's last 64 bytes and the second's first 64.
MLA_HOST_DEVICE constexpr int MlaRowsFp8Token(int w, int lane, int pair, int half) {
  return 32 * pair + 16 * half + 4 * w + (lane >> 3);
}
MLA_HOST_DEVICE constexpr int MlaRowsFp8Half(int c0, int i) { return c0 + 8 * i >= 36 ? 1 : 0; }
MLA_HOST_DEVICE constexpr int MlaRowsFp8Chunk(int c0, int i) {
  return c0 + 8 * i - 36 * MlaRowsFp8Half(c0, i);
}
// Raw chunk c becomes f16 chunks 2c and 2c + 1 of block c / 4. As 2 x 36 is a
// multiple of 8, (2c) % 8 = (2 c0) % 8 for both tokens of a pair, and t % 8 is
// the same for all four tokens of a quarter; lanes with c0 >= 4 store 2c + 1
// first, so that the 8 lanes of a quarter store to 8 different positions in
// each of the two stores (`which` 0 and 1).
MLA_HOST_DEVICE constexpr int MlaRowsFp8StoreChunk(int c0, int i, int which) {
  return 2 * MlaRowsFp8Chunk(c0, i) + ((c0 >= 4 ? 1 : 0) ^ which);
}
MLA_HOST_DEVICE constexpr int MlaRowsFp8Slot(int c0, int t0, int which) {
  return (((2 * c0) & 7) + ((c0 >= 4 ? 1 : 0) ^ which)) ^ (t0 & 7);
}
// Where store `which` of chunk i of pair `pair` goes, relative to the tile:
// MlaRowsKvOffset(token, MlaRowsFp8StoreChunk(c0, i, which)).
MLA_HOST_DEVICE constexpr int MlaRowsFp8StoreOffset(int c0, int t0, int pair, int i, int which) {
  return (MlaRowsFp8Chunk(c0, i) >> 2) * 8192 +
         (t0 + 32 * pair + 16 * MlaRowsFp8Half(c0, i)) * 128 + (MlaRowsFp8Slot(c0, t0, which) << 4);
}

// Q load (all 256 threads): thread tid takes row tid / 4 and its 16-byte
// chunks tid % 4 + 4 i, stored at MlaRowsChunkedOffset.
// a8 with S in fp8: the same loads (8 values each) become 8 codes, half of
// code chunk (sub / 2) + 2 i (16 codes a chunk), sub = tid % 4.
MLA_HOST_DEVICE constexpr int MlaRowsQ8Offset(int row, int sub, int i) {
  return MlaRowsChunkedOffset(row, sub >> 1) + (sub & 1) * 8 + i * 2048;
}

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_ROWS_LAYOUT_H_
