// Pieces both sm_90a paths for tiles of 64 query rows share: the
// two-warpgroup path (mla_decode_wgmma_rows.cuh) and the warp-specialised
// fp8 one (mla_decode_wgmma_rows_ws.cuh). Both compute S with the rows as M
// (accumulator layout of m64n64: thread (warp w, lane = 4 r + quad) holds
// rows 16 w + r and 16 w + r + 8, token columns 8 j + 2 quad + e, in register
// 4 j + 2 h + e) and keep P in the same K-major chunked layout.
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_ROWS_COMMON_CUH_
#define MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_ROWS_COMMON_CUH_

#include "mla_wgmma_common.cuh"

namespace mla_wgmma {

constexpr int ROWS_Q_PASSES = HEAD_DIM_QK / 8 / 4;  // 16-byte loads per thread of a Q row: 18

// Query row `row` (of the tile starting at row_start) into registers: its
// 16-byte chunks sub + 4 i, all 18 loads in flight; rows past the sequence's
// read as zeros. Four threads (sub = 0..3) take a row.
MLA_INLINE void LoadQRowChunks(const MlaDecodeParams& p, const MlaSeqInfo& s, int row_start,
                               int row, int sub, uint4 (&v)[ROWS_Q_PASSES]) {
  const bool valid = row_start + row < s.q_len * NUM_HEADS;
  const u16* q = static_cast<const u16*>(p.q) +
                 (static_cast<long long>(s.qo_start) * NUM_HEADS + row_start + row) * HEAD_DIM_QK +
                 sub * 8;
#pragma unroll
  for (int i = 0; i < ROWS_Q_PASSES; ++i) {
    v[i] = valid ? *reinterpret_cast<const uint4*>(q + i * 32) : make_uint4(0, 0, 0, 0);
  }
}

// The largest |q| of this thread's chunks.
MLA_INLINE float ThreadQAbsMax(const uint4 (&v)[ROWS_Q_PASSES]) {
  u32 m2 = 0;  // bf16x2 running max of |q|
#pragma unroll
  for (int i = 0; i < ROWS_Q_PASSES; ++i) AbsMaxBf16x8(m2, v[i]);
  return fmaxf(Bf16ToFloat(m2 & 0xffffu), Bf16ToFloat(m2 >> 16));
}
// The largest |q| of this warp's chunks (every lane gets it).
MLA_INLINE float WarpQAbsMax(const uint4 (&v)[ROWS_Q_PASSES]) {
  float amax = ThreadQAbsMax(v);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  return amax;
}
// a8: the scale of the row whose chunks this thread and the three lanes
// beside it hold (LoadQRowChunks' four threads a row).
MLA_INLINE float QuadQRowScale(const uint4 (&v)[ROWS_Q_PASSES]) {
  float amax = ThreadQAbsMax(v);
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
  return QScaleFromAmax(amax);
}

// Masks the scores of tokens at or past each row's limit (tokens j0 + 8 j +
// e, j0 = the tile's first position + 2 quad), on the tiles that need it.
MLA_INLINE void MaskScores(float (&sc)[32], const int (&lim)[2], int j0, bool needed) {
  if (!needed) return;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      float& v = sc[4 * (i / 2) + 2 * h + (i % 2)];
      v = j0 + 8 * (i / 2) + (i % 2) < lim[h] ? v : NegInf();
    }
  }
}

// A row's running maximum moves only when a tile's exceeds it by more than
// this (log2 units), so P stays below 2^RESCALE_SLACK: f16 and bf16 P keep
// their relative precision there and f32 sums their range, while alpha stays
// exactly 1 on most tiles and the accumulators skip the rescale of O
// (RESULTS.md v36: it ran on 85 % of tiles, a quarter of the accumulating
// warps' instructions). The swap-AB path's 16-row tiles defer their maxima
// the same way (HEADROOM in mla_decode_wgmma.cuh).
constexpr float RESCALE_SLACK = 8.0f;

// The online softmax of this thread's two rows (row0, row0 + 8) over a
// tile's scores: P (PackOperand) into `p` (64 rows in chunks of 8 tokens,
// 1024 bytes apart; row x at 16 x), the rows' rescale factors into `alpha`
// (quad 0), m and l (this thread's part of the sum) updated. Scores stay
// unscaled until exp2(s * scale - m), one FFMA each, with each row's own
// scale (a8's row scales differ); m is the maximum so far to within
// RESCALE_SLACK, which the sums and the LSE use alike.
MLA_INLINE void SoftmaxRowsToP(const float (&sc)[32], const float (&score_scale)[2], float (&m)[2],
                               float (&l)[2], u8* p, float* alpha, int row0, int quad) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = NegInf();
#pragma unroll
    for (int j = 0; j < 8; ++j) mx = fmaxf(mx, fmaxf(sc[4 * j + 2 * h], sc[4 * j + 2 * h + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    // (-inf + slack is -inf: the first visible tile always sets m.)
    const float mn = mx * score_scale[h] > m[h] + RESCALE_SLACK ? mx * score_scale[h] : m[h];
    const float base = mn == NegInf() ? 0.0f : mn;  // nothing visible yet: avoid inf - inf
    const float a = Exp2(m[h] - base);
    m[h] = mn;
    float sum = 0.0f;
    u8* prow = p + (row0 + 8 * h) * 16 + quad * 4;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float p0 = Exp2(fmaf(sc[4 * j + 2 * h], score_scale[h], -base));
      const float p1 = Exp2(fmaf(sc[4 * j + 2 * h + 1], score_scale[h], -base));
      sum += p0 + p1;
      *reinterpret_cast<u32*>(prow + j * 1024) = PackOperand(p0, p1);
    }
    l[h] = l[h] * a + sum;  // the quad is summed at the end
    if (quad == 0) alpha[row0 + 8 * h] = a;
  }
}

}  // namespace mla_wgmma

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_ROWS_COMMON_CUH_
