// Loads of the sm_90a warpgroup-MMA decode path (mla_decode_wgmma.cuh): Q
// into its permuted core-matrix layout, KV tiles into the swizzled staging
// buffer, and the K / V^T A fragments from there into registers.
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_LOADS_CUH_
#define MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_LOADS_CUH_

#include "mla_wgmma_common.cuh"

namespace mla_wgmma {

// ---- layout: mla_wgmma_layout.h ---------------------------------------------
// Plain row-major staging left the V loads 4-way bank conflicted (measured:
// 16 wavefronts per 128-bit load, ideal 4); the chunk swizzle fixed it.
constexpr int SWZ_CHUNKS = MlaWgmmaSwizzledChunks(KV_FORMAT);
MLA_INLINE int SwzKey(int t) { return MlaWgmmaSwizzleKey(KV_FORMAT, t); }

// ---- loads ----------------------------------------------------------------

// Q rows [row_start, row_start + N) -> Smem::q in the permuted core-matrix
// layout, as f16 scaled by a power of two (fp8 KV) or as bf16 (bf16 KV).
// Returns the factor that undoes the scaling in the scores. Block-wide.
// Coalesced 16-byte global loads, a batch per thread in flight at once (the
// item's first tile waits on this), stored as 4-byte words.
MLA_INLINE float LoadQ(const MlaDecodeParams& p, const MlaSeqInfo& s, int row_start,
                       const Smem& sm, float q_scale) {
  constexpr int ROW_CHUNKS = HEAD_DIM_QK / 8;  // 16-byte chunks of a row
  constexpr int PER_THREAD = N * ROW_CHUNKS / NUM_THREADS;
  constexpr int BATCH = PER_THREAD > 9 ? PER_THREAD / 2 : PER_THREAD;
  static_assert(N * ROW_CHUNKS % NUM_THREADS == 0 && PER_THREAD % BATCH == 0, "whole batches");
  const int rows_total = s.q_len * NUM_HEADS;
  const u16* q = static_cast<const u16*>(p.q) +
                 (static_cast<long long>(s.qo_start) * NUM_HEADS + row_start) * HEAD_DIM_QK;
  // fp8 KV multiplies in f16: the bf16 Q tile is scaled by 2^e into [2^13, 2^14)
  // (exact for everything above amax * 2^-27) in a second pass; a8's fp8
  // values fit f16 as they are.
  constexpr bool RESCALE = FP8 && Q_MODE == Q_MODE_BF16;
  float amax = 0.0f;
#pragma unroll 1
  for (int b = 0; b < PER_THREAD; b += BATCH) {
    uint4 v[BATCH];
#pragma unroll
    for (int i = 0; i < BATCH; ++i) {
      const int idx = threadIdx.x + (b + i) * NUM_THREADS;
      const int n = idx / ROW_CHUNKS, c = idx % ROW_CHUNKS;
      v[i] = row_start + n < rows_total ? *reinterpret_cast<const uint4*>(q + n * HEAD_DIM_QK + c * 8)
                                        : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int i = 0; i < BATCH; ++i) {
      const int idx = threadIdx.x + (b + i) * NUM_THREADS;
      const int n = idx / ROW_CHUNKS, c = idx % ROW_CHUNKS;
      const u32 w[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float lo = Bf16ToFloat(w[j] & 0xffffu), hi = Bf16ToFloat(w[j] >> 16);
        u32 out = w[j];
        if (RESCALE) {
          amax = fmaxf(amax, fmaxf(fabsf(lo), fabsf(hi)));
        } else if (Q_MODE == Q_MODE_FP8) {
          QuantiseQPair<Q_MODE>(lo, hi, q_scale);
          out = FP8 ? PackF16x2(lo, hi) : PackBf16x2(lo, hi);
        }
        *reinterpret_cast<u32*>(sm.q + MlaWgmmaQOffset(KV_FORMAT, N, n, c * 8 + 2 * j)) = out;
      }
    }
  }
  if (!RESCALE) return 1.0f;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  if (lane == 0) sm.red[warp] = amax;
  __syncthreads();
  amax = fmaxf(fmaxf(sm.red[0], sm.red[1]), fmaxf(sm.red[2], sm.red[3]));
  int e = 0;
  if (amax > 0.0f) {
    const int amax_exp = static_cast<int>((__float_as_uint(amax) >> 23) & 0xffu) - 127;
    e = min(max(13 - amax_exp, -126), 126);
  }
  const float up = __uint_as_float(static_cast<u32>(e + 127) << 23);
  // Each thread rewrites the words it stored.
#pragma unroll 4
  for (int k = 0; k < PER_THREAD * 4; ++k) {
    const int idx = threadIdx.x + (k / 4) * NUM_THREADS;
    const int n = idx / ROW_CHUNKS, c = idx % ROW_CHUNKS;
    u32* word = reinterpret_cast<u32*>(sm.q + MlaWgmmaQOffset(KV_FORMAT, N, n, c * 8 + 2 * (k % 4)));
    const u32 w = *word;
    *word = PackF16x2(Bf16ToFloat(w & 0xffffu) * up, Bf16ToFloat(w >> 16) * up);
  }
  __syncthreads();  // red is reused by the tile loop
  return __uint_as_float(static_cast<u32>(127 - e) << 23);
}

// Starts copying KV positions [j0, j0 + TILE) below kv_hi into stage `buf`;
// positions past kv_hi are zero-filled, so masked tokens never inject NaN.
// Eight lanes per token, each copying every 8th 16-byte chunk; a thread's
// tokens are 16 apart, so its swizzle key (token & 7) is the same for all.
template <bool FULL>  // FULL: every position of the tile is below kv_hi
MLA_INLINE void CopyKvTile(const MlaDecodeParams& p, const MlaSeqInfo& s, int j0, int kv_hi,
                           int buf, const Smem& sm) {
  constexpr int TOKEN_BYTES = KvTokenBytes<KV_FORMAT>::value;
  constexpr int CHUNKS = TOKEN_BYTES / 16;
  constexpr int LANES = 8;
  constexpr int TOKENS_PER_PASS = NUM_THREADS / LANES;
  constexpr int PER_TOKEN = (CHUNKS + LANES - 1) / LANES;
  const u8* kv = static_cast<const u8*>(p.kv);
  const int tok0 = threadIdx.x / LANES, first = threadIdx.x % LANES;
  // MlaWgmmaChunkSlot: chunk first + 8i -> (first ^ key) + 8i (the key only
  // touches the low 3 bits), for the swizzled chunks.
  const int swizzled = (first ^ SwzKey(tok0)) * 16;
  u8* dst0 = sm.raw + (buf * TILE + tok0) * RAW_STRIDE;
#pragma unroll
  for (int pass = 0; pass < TILE / TOKENS_PER_PASS; ++pass) {
    const int tok = tok0 + pass * TOKENS_PER_PASS;
    const int j = j0 + tok;
    const bool valid = FULL || j < kv_hi;
    const u8* src = kv + KvSlot<PAGE_SIZE>(p, s, valid ? j : j0) * TOKEN_BYTES + first * 16;
    u8* dst = dst0 + pass * TOKENS_PER_PASS * RAW_STRIDE;
#pragma unroll
    for (int i = 0; i < PER_TOKEN; ++i) {
      const int c = first + i * LANES;
      if (CHUNKS % LANES == 0 || c < CHUNKS) {
        const int at = c < SWZ_CHUNKS ? swizzled + i * LANES * 16 : c * 16;
        CpAsync16(dst + at, src + i * LANES * 16, valid);
      }
    }
  }
}
MLA_INLINE void IssueKvTile(const MlaDecodeParams& p, const MlaSeqInfo& s, int j0, int kv_hi,
                            int buf, const Smem& sm) {
  if (j0 + TILE <= kv_hi) {
    CopyKvTile<true>(p, s, j0, kv_hi, buf, sm);
  } else {
    CopyKvTile<false>(p, s, j0, kv_hi, buf, sm);
  }
}

// ---- A fragments from the raw tile ----------------------------------------

// K rows of this thread (tokens r and r + 8 of its warp's 16, which share a
// swizzle key): the raw 16 bytes of k-block kb (chunk 4 kb + quad) of both,
// loaded one k-block ahead of their conversion.
struct KRaw {
  uint4 x, y;
};
struct KAddr {
  const u8* row;  // token r of the warp in stage 0
  int even, odd;  // swizzled byte offset of chunk quad (+4) within an 8-chunk group
  int last;       // fp8: the unswizzled last k-block
};
MLA_INLINE KAddr MakeKAddr(const u8* raw, int warp, int r, int quad) {
  const int t = warp * 16 + r;  // MlaWgmmaKToken
  const MlaWgmmaKOffsets o = MlaWgmmaKOffsetsOf(KV_FORMAT, t, quad);
  return {raw + t * RAW_STRIDE, o.even, o.odd, o.last};
}
MLA_INLINE KRaw LoadK(const KAddr& k, int tile_off, int kb) {
  const int off = MlaWgmmaKChunkOffset(KV_FORMAT, k.even, k.odd, k.last, kb);
  const u8* p = k.row + tile_off + off;
  return {*reinterpret_cast<const uint4*>(p), *reinterpret_cast<const uint4*>(p + 8 * RAW_STRIDE)};
}
// k-block -> STEPS_PER_LOAD k-steps of A fragments.
MLA_INLINE void KFragments(const KRaw& raw, u32 (&a)[STEPS_PER_LOAD][4]) {
  const u32 xs[4] = {raw.x.x, raw.x.y, raw.x.z, raw.x.w};
  const u32 ys[4] = {raw.y.x, raw.y.y, raw.y.z, raw.y.w};
#pragma unroll
  for (int i = 0; i < STEPS_PER_LOAD; ++i) {
    if (FP8) {
      Fp8x4ToF16x4(xs[i], a[i][0], a[i][2]);
      Fp8x4ToF16x4(ys[i], a[i][1], a[i][3]);
    } else {
      a[i][0] = xs[2 * i];
      a[i][2] = xs[2 * i + 1];
      a[i][1] = ys[2 * i];
      a[i][3] = ys[2 * i + 1];
    }
  }
}

// V^T of k-step `step`: tokens 16 * step + {2q, 2q+1, 2q+8, 2q+9}, this
// thread's 16 output dims of each: 16 bytes per token for fp8 (chunk
// 8 warp + r), 32 for bf16 (chunks 16 warp + 2r + {0, 1}), swizzled by the
// token's key, which depends only on 2q + (token & 1). Loaded one k-step ahead.
struct VRaw {
  uint4 t[4][ESIZE];
};
struct VAddr {
  const u8* quad_row;     // token 2q of stage 0; LoadV adds the rest of MlaWgmmaVToken
  int off[2][ESIZE];      // [token & 1][chunk]: byte offset within the token
};
MLA_INLINE VAddr MakeVAddr(const u8* raw, int warp, int r, int quad) {
  VAddr v;
  v.quad_row = raw + 2 * quad * RAW_STRIDE;
#pragma unroll
  for (int odd = 0; odd < 2; ++odd) {
#pragma unroll
    for (int h = 0; h < ESIZE; ++h) v.off[odd][h] = MlaWgmmaVChunkOffset(KV_FORMAT, warp, r, quad, odd, h);
  }
  return v;
}
MLA_INLINE VRaw LoadV(const VAddr& va, int tile_off, int step) {
  VRaw v;
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    const u8* row = va.quad_row + tile_off + (16 * step + (t % 2) + 8 * (t / 2)) * RAW_STRIDE;
#pragma unroll
    for (int h = 0; h < ESIZE; ++h) v.t[t][h] = *reinterpret_cast<const uint4*>(row + va.off[t % 2][h]);
  }
  return v;
}
// V^T fragments for all 8 M blocks of one k-step.
MLA_INLINE void VFragments(const VRaw& v, u32 (&a)[8][4]) {
  u32 w[4][4 * ESIZE];
#pragma unroll
  for (int t = 0; t < 4; ++t) {
#pragma unroll
    for (int h = 0; h < ESIZE; ++h) {
      w[t][4 * h + 0] = v.t[t][h].x;
      w[t][4 * h + 1] = v.t[t][h].y;
      w[t][4 * h + 2] = v.t[t][h].z;
      w[t][4 * h + 3] = v.t[t][h].w;
    }
  }
#pragma unroll
  for (int b = 0; b < 8; ++b) {
    if (FP8) {
      // Bytes 2b, 2b+1 (dims of rows r and r+8) of the k and k+1 tokens,
      // interleaved so that one conversion yields each register.
      const u32 sel = b % 2 == 0 ? 0x5140u : 0x7362u;
      Fp8x4ToF16x4(Prmt(w[0][b / 2], w[1][b / 2], sel), a[b][0], a[b][1]);
      Fp8x4ToF16x4(Prmt(w[2][b / 2], w[3][b / 2], sel), a[b][2], a[b][3]);
    } else {
      a[b][0] = Prmt(w[0][b], w[1][b], 0x5410u);
      a[b][1] = Prmt(w[0][b], w[1][b], 0x7632u);
      a[b][2] = Prmt(w[2][b], w[3][b], 0x5410u);
      a[b][3] = Prmt(w[2][b], w[3][b], 0x7632u);
    }
  }
}

}  // namespace mla_wgmma

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_LOADS_CUH_
