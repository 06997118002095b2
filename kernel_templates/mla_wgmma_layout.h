// Where the sm_90a warpgroup-MMA decode path (mla_decode_wgmma.cuh) keeps
// bytes in shared memory and which thread reads which. Plain C++ with no
// includes (include mla_params.h first), so that the CPU tests can check the
// properties the kernel's speed and correctness rest on: each map is a
// bijection, and every 16-byte shared access of a warp reaches 8 different
// 16-byte bank groups in each quarter warp (tests/unit/plan_wgmma_layout_test.cc).
// kv_format: 0 bf16, 1 fp8, 2 MXFP4 (laid out as bf16: the path converts its
// tiles to bf16 before either product reads them).
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_LAYOUT_H_
#define MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_LAYOUT_H_

// KV elements per 16-byte load, and the k16 steps of QK^T such a load feeds.
MLA_HOST_DEVICE constexpr int MlaWgmmaElemsPerLoad(int kv_format) { return kv_format == 1 ? 16 : 8; }
MLA_HOST_DEVICE constexpr int MlaWgmmaStepsPerLoad(int kv_format) {
  return MlaWgmmaElemsPerLoad(kv_format) / 4;
}

// ---- the staging tile: tokens whole, their 16-byte chunks swizzled --------
// Chunk c of tile token t (0..63) lies at chunk MlaWgmmaChunkSlot of the
// token's row. 128-bit shared loads are served per quarter warp (8 lanes);
// the key spreads the 8 lanes of every K load (2 tokens x 4 chunks) and every
// V load (4 tokens x 2 chunks) over 8 bank groups. fp8 tokens have 36 chunks:
// the last 4 (dims 512..575, read only as K) stay in place.
MLA_HOST_DEVICE constexpr int MlaWgmmaSwizzledChunks(int kv_format) {
  return kv_format == 1 ? 32 : 72;
}
MLA_HOST_DEVICE constexpr int MlaWgmmaSwizzleKey(int kv_format, int t) {
  return kv_format == 1 ? (t & 7) : (((t >> 1) & 1) | ((((t >> 2) ^ t) & 1) << 2));
}
MLA_HOST_DEVICE constexpr int MlaWgmmaChunkSlot(int kv_format, int t, int c) {
  return c < MlaWgmmaSwizzledChunks(kv_format) ? c ^ MlaWgmmaSwizzleKey(kv_format, t) : c;
}

// ---- QK^T: thread (warp, lane) reads chunk 4 kb + (lane & 3) of tile tokens
// t = 16 warp + (lane >> 2) and t + 8 (same key: only bits 0..2 count) -------
MLA_HOST_DEVICE constexpr int MlaWgmmaKToken(int warp, int lane) { return warp * 16 + (lane >> 2); }
struct MlaWgmmaKOffsets {
  int even, odd;  // byte offset of chunk quad (+ 4) within an 8-chunk group
  int last;       // fp8: the unswizzled last k-block
};
MLA_HOST_DEVICE constexpr MlaWgmmaKOffsets MlaWgmmaKOffsetsOf(int kv_format, int t, int quad) {
  return {(quad ^ MlaWgmmaSwizzleKey(kv_format, t)) * 16,
          (quad ^ MlaWgmmaSwizzleKey(kv_format, t) ^ 4) * 16,
          (MlaWgmmaSwizzledChunks(kv_format) + quad) * 16};
}
// Byte offset in the token row of k-block kb: chunk 4 kb + quad is
// 8 (kb / 2) + (4 (kb % 2) + quad), and the key only touches the low 3 bits.
MLA_HOST_DEVICE constexpr int MlaWgmmaKChunkOffset(int kv_format, int even, int odd, int last,
                                                   int kb) {
  return 4 * kb >= MlaWgmmaSwizzledChunks(kv_format) ? last : (kb / 2) * 128 + (kb % 2 ? odd : even);
}

// ---- P V: thread (warp, lane) reads, for k-step s and t = 0..3, tile token
// 16 s + 2 (lane & 3) + (t % 2) + 8 (t / 2): its 16 output dims
// warp * 128 + (lane >> 2) * 16 .. + 15 (one chunk of fp8, two of bf16) ----
MLA_HOST_DEVICE constexpr int MlaWgmmaVToken(int step, int lane, int t) {
  return 16 * step + 2 * (lane & 3) + (t % 2) + 8 * (t / 2);
}
// Byte offset in the token row of chunk h (bf16: 0 or 1) of those dims, for
// r = lane >> 2, quad = lane & 3; the token's key depends only on
// 2 quad + (t % 2) = 2 quad + odd.
MLA_HOST_DEVICE constexpr int MlaWgmmaVChunkOffset(int kv_format, int warp, int r, int quad, int odd,
                                                   int h) {
  return ((kv_format == 1 ? 8 * warp + r : 16 * warp + 2 * r + h) ^
          MlaWgmmaSwizzleKey(kv_format, 2 * quad + odd)) * 16;
}

// ---- Q^T: the QK^T permutation ----------------------------------------------
// The A fragment of k-step s holds, for lane quad q, the logical k columns
// {2q, 2q+1, 2q+8, 2q+9}; a thread's 16-byte load at byte 64 kb + 16 q of its
// token feeds k-steps StepsPerLoad * kb + i (elements 4i..4i+3 are that step's
// four columns). So logical (step s, column k) holds physical dim
//   4 E (s / L) + E ((k % 8) / 2) + 4 (s % L) + 2 (k / 8) + k % 2
// (E elements per load, L steps per load), and Q^T is stored that way, in
// core matrices of 8 rows x 16 bytes: [step][rows / 8][k / 8][row % 8][k % 8].
// Byte offset of physical dims (d, d + 1), d even, of tile row n (both share a
// step and a 4-byte word):
MLA_HOST_DEVICE constexpr int MlaWgmmaQOffset(int kv_format, int rows, int n, int d) {
  const int e = MlaWgmmaElemsPerLoad(kv_format);
  const int kb = d / (4 * e), rem = d % (4 * e);
  const int quad = rem / e, i = (rem % e) / 4, half = (rem % 4) / 2;
  const int step = kb * MlaWgmmaStepsPerLoad(kv_format) + i;
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

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_LAYOUT_H_
