// Loads of the sm_90a warpgroup-MMA decode path (mla_decode_wgmma.cuh): Q
// into the layout S's descriptor reads (e4m3 tiles: e4m3 codes; bf16 tiles:
// bf16 in the 128-byte swizzle), KV tiles into the swizzled stages, and the
// V^T A fragments from there into registers.
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_LOADS_CUH_
#define MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_LOADS_CUH_

#include "mla_mxfp4_lut.h"  // MlaPrmt
#include "mla_wgmma_common.cuh"
#include "mla_wgmma_tma.cuh"

namespace mla_wgmma {

// ---- layout: mla_wgmma_layout.h ---------------------------------------------
// Plain row-major staging left the V loads 4-way bank conflicted (measured:
// 16 wavefronts per 128-bit load, ideal 4); the swizzled stages fixed it.
constexpr int V_PITCH = kMlaWgmmaVTokenPitch;

// ---- loads ----------------------------------------------------------------

// Q rows [row_start, row_start + N) -> Smem::q in two steps: LoadQRows into
// registers (needs nothing but the item, so it can go out before the item
// waits for shared memory and issues its first tiles), then StoreQ: for e4m3
// tiles as e4m3 codes (MlaWgmmaQ8Offset; bf16 Q as two terms scaled by a power
// of two), else as bf16 in the 128-byte swizzle (MlaWgmmaQ16Offset).
// Thread (n0 = tid / 8, c8 = tid % 8) takes rows n0 + 16 h and, of each, the
// 16-byte chunks c8 + 8 i: eight neighbouring threads read 128 contiguous
// bytes, every load of the thread is in flight at once, and a store lands at
// a per-thread base plus a compile-time constant (both offsets split that
// way; the CPU layout test checks it). The first version computed the full
// offset per 4-byte word and rescaled in a second pass over shared memory:
// ncu counted ~5,000 instructions per warp for it, more than two KV tiles.
constexpr int Q_ROW_SETS = N / 16;             // rows per thread
constexpr int Q_CHUNKS = HEAD_DIM_QK / 8 / 8;  // 16-byte chunks per thread and row: 9
struct QRows {
  uint4 v[Q_ROW_SETS][Q_CHUNKS];
};
MLA_INLINE QRows LoadQRows(const MlaDecodeParams& p, const MlaSeqInfo& s, int row_start) {
  static_assert(NUM_THREADS == 128 && N % 16 == 0, "8 threads per row, 16 rows per pass");
  const unsigned tid = GroupTid();
  const int n0 = tid >> 3, c8 = tid & 7;
  const int rows_total = s.q_len * NUM_HEADS;
  const u16* q = static_cast<const u16*>(p.q) +
                 (static_cast<long long>(s.qo_start) * NUM_HEADS + row_start) * HEAD_DIM_QK +
                 c8 * 8;
  QRows rows;
#pragma unroll
  for (int h = 0; h < Q_ROW_SETS; ++h) {
    const int n = n0 + 16 * h;
    const bool valid = row_start + n < rows_total;
#pragma unroll
    for (int i = 0; i < Q_CHUNKS; ++i) {
      rows.v[h][i] = valid ? *reinterpret_cast<const uint4*>(q + n * HEAD_DIM_QK + i * 64)
                           : make_uint4(0, 0, 0, 0);
    }
  }
  return rows;
}

// a8: the scale of row n0 + 16 h (QScaleFromAmax) from its 8 threads' chunks
// (neighbouring lanes), written to Smem::qs for the scores; returns its
// inverse (QInverseScale), which the codes take.
MLA_INLINE float StoreQRowScale(const uint4 (&chunks)[Q_CHUNKS], const Smem& sm, int row, int c8) {
  u32 m2 = 0;  // bf16x2 running max of |q|
#pragma unroll
  for (int i = 0; i < Q_CHUNKS; ++i) AbsMaxBf16x8(m2, chunks[i]);
  float amax = fmaxf(Bf16ToFloat(m2 & 0xffffu), Bf16ToFloat(m2 >> 16));
#pragma unroll
  for (int o = 4; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float q_scale = QScaleFromAmax(amax);
  if (c8 == 0) sm.qs[row] = q_scale;
  return QInverseScale(q_scale);
}

// Returns the factor that undoes Q's scaling in the scores. Block-wide.
// a8: each row's codes are divided by its own scale (StoreQRowScale), which
// the scores take from Smem::qs instead.
MLA_INLINE float StoreQ(const QRows& rows, const Smem& sm) {
  constexpr int ROW_SETS = Q_ROW_SETS, CHUNKS = Q_CHUNKS;
  const unsigned tid = GroupTid();
  const int n0 = tid >> 3, c8 = tid & 7;
  const auto& v = rows.v;
  // e4m3 tiles: bf16 Q becomes two e4m3 terms scaled into e4m3 range
  // (PowerOfTwoRangeScale, SplitE4m3x2), a8 its codes.
  float up = 1.0f, back = 1.0f;
  if (Q_SPLIT) {
    u32 m2 = 0;  // bf16x2 running max of |q|
#pragma unroll
    for (int h = 0; h < ROW_SETS; ++h) {
#pragma unroll
      for (int i = 0; i < CHUNKS; ++i) AbsMaxBf16x8(m2, v[h][i]);
    }
    float amax = fmaxf(Bf16ToFloat(m2 & 0xffffu), Bf16ToFloat(m2 >> 16));
    const int warp = tid >> 5, lane = tid & 31;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    if (lane == 0) sm.red[warp] = amax;
    SyncMma();  // red is next written after the tile loop's first barrier
    amax = fmaxf(fmaxf(sm.red[0], sm.red[1]), fmaxf(sm.red[2], sm.red[3]));
    PowerOfTwoRangeScale(amax, E4M3_Q_TOP, up, back);
  }
  if (E4M3_TILES) {
    // Row n's codes of dims 8 c8 + 64 i .. + 7 are 8 contiguous bytes; the
    // low terms are rows N .. 2N - 1 of the product.
#pragma unroll
    for (int h = 0; h < ROW_SETS; ++h) {
      const float inv_scale =
          Q_MODE == Q_MODE_FP8 ? StoreQRowScale(v[h], sm, n0 + 16 * h, c8) : 1.0f;
      u8* base = sm.q + MlaWgmmaQ8Offset(NS, n0 + 16 * h, 8 * c8);
#pragma unroll
      for (int i = 0; i < CHUNKS; ++i) {
        const u32 w[4] = {v[h][i].x, v[h][i].y, v[h][i].z, v[h][i].w};
        u32 hi[2] = {0u, 0u}, lo[2] = {0u, 0u};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float x0 = Bf16ToFloat(w[j] & 0xffffu), x1 = Bf16ToFloat(w[j] >> 16);
          const u32 both = Q_SPLIT ? SplitE4m3x2(x0 * up, x1 * up)
                                   : E4m3x2(x0 * inv_scale, x1 * inv_scale);  // as QuantiseQPair
          hi[j / 2] |= (both & 0xffffu) << (16 * (j % 2));
          lo[j / 2] |= (both >> 16) << (16 * (j % 2));
        }
        u8* at = base + MlaWgmmaQ8Offset(NS, 0, 64 * i);
        *reinterpret_cast<uint2*>(at) = make_uint2(hi[0], hi[1]);
        if (Q_SPLIT) {
          *reinterpret_cast<uint2*>(at + MlaWgmmaQ8Offset(NS, N, 0)) = make_uint2(lo[0], lo[1]);
        }
      }
    }
  } else {
    // Row n's dims 8 c8 + 64 i .. + 7 are one 16-byte chunk of the swizzle;
    // the 8 threads of a row store to 8 positions.
#pragma unroll
    for (int h = 0; h < ROW_SETS; ++h) {
      const float inv_scale =
          Q_MODE == Q_MODE_FP8 ? StoreQRowScale(v[h], sm, n0 + 16 * h, c8) : 1.0f;
      u8* base = sm.q + MlaWgmmaQ16Offset(N, n0 + 16 * h, 8 * c8);
#pragma unroll
      for (int i = 0; i < CHUNKS; ++i) {
        u32 w[4] = {v[h][i].x, v[h][i].y, v[h][i].z, v[h][i].w};
        if (Q_MODE == Q_MODE_FP8) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            float lo = Bf16ToFloat(w[j] & 0xffffu), hi = Bf16ToFloat(w[j] >> 16);
            QuantiseQPair<Q_MODE>(lo, hi, inv_scale);
            w[j] = PackBf16x2(lo, hi);
          }
        }
        *reinterpret_cast<uint4*>(base + MlaWgmmaQ16Offset(N, 0, 64 * i)) =
            make_uint4(w[0], w[1], w[2], w[3]);
      }
    }
  }
  return back;
}

// cp.async of 16 bytes with the L2 prefetch hint of 128 bytes: the line that
// a token's eight lanes read together. On (128,1,8192,16) fp8 it measured
// 1.8 % faster (150.8 against 153.5 us), bf16 unchanged; a 256-byte hint
// measured 7 % slower (tools/bench/RESULTS.md v21).
MLA_INLINE void CpAsync16Line(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(SmemAddr(dst)),
               "l"(src), "r"(valid ? 16 : 0));
}

// Starts copying KV positions [j0, j0 + TILE) below kv_hi into stage `buf`;
// positions past kv_hi are zero-filled, so masked tokens never inject NaN.
// Eight lanes per token, each copying every 8th 16-byte chunk; a thread's
// tokens are 16 apart, so its swizzle keys are the same for all
// (MlaWgmmaFp8CopyOffset, MlaWgmmaBlockCopyOffset).
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
  u8* stage = sm.raw + buf * STAGE_BYTES;
#pragma unroll
  for (int pass = 0; pass < TILE / TOKENS_PER_PASS; ++pass) {
    const int tok = tok0 + pass * TOKENS_PER_PASS;
    const int j = j0 + tok;
    const bool valid = FULL || j < kv_hi;
    const u8* src = kv + KvSlot<PAGE_SIZE>(p, s, valid ? j : j0) * TOKEN_BYTES + first * 16;
#pragma unroll
    for (int i = 0; i < PER_TOKEN; ++i) {
      const int c = first + i * LANES;
      if (CHUNKS % LANES == 0 || c < CHUNKS) {
        const int at = FP8 ? MlaWgmmaFp8CopyOffset(tok0, first, pass, i)
                           : MlaWgmmaBlockCopyOffset(tok0, first, pass, i);
        CpAsync16Line(stage + at, src + i * LANES * 16, valid);
      }
    }
  }
}
// Starts copying tile j0 into stage `buf`; returns whether it went by tensor
// copies (then stage `buf`'s barrier completes when it lands, else this
// thread's next cp.async commit group holds its share: the first row group's
// threads copy the whole tile, so the barrier after their wait publishes it).
MLA_INLINE bool IssueKvTile(const MlaDecodeParams& p, const MlaSeqInfo& s, int j0, int kv_hi,
                            int buf, const Smem& sm) {
  int slot = 0;
  if (TmaTile(p, s, j0, kv_hi, slot)) {
    if (threadIdx.x == 0) CopyKvTileTma(p, slot, sm.raw + buf * STAGE_BYTES, &sm.full[buf]);
    return true;
  }
  if (RowGroup() != 0) return false;  // the first warpgroup copies for both
  if (j0 + TILE <= kv_hi) {
    CopyKvTile<true>(p, s, j0, kv_hi, buf, sm);
  } else {
    CopyKvTile<false>(p, s, j0, kv_hi, buf, sm);
  }
  return false;
}

// ---- A fragments from the raw tile ----------------------------------------

// V^T of k-step `step`: tokens 16 * step + {2q, 2q+1, 2q+8, 2q+9}, this
// thread's 16 output dims of each: 16 bytes per token for fp8 (chunk
// 8 warp + r), 32 for bf16 (chunks 16 warp + r and 16 warp + r + 8), at the
// position the token's key gives, which depends only on 2q + (token & 1)
// (MlaWgmmaVChunkOffset). Loaded one k-step ahead.
struct VRaw {
  uint4 t[4][ESIZE];
};
struct VAddr {
  const u8* quad_row;  // token 2q of stage 0; LoadV adds the rest of MlaWgmmaVToken
  int off[2][ESIZE];   // [token & 1][chunk]: byte offset within the token
};
MLA_INLINE VAddr MakeVAddr(const u8* raw, int warp, int r, int quad) {
  VAddr v;
  v.quad_row = raw + 2 * quad * V_PITCH;
#pragma unroll
  for (int odd = 0; odd < 2; ++odd) {
#pragma unroll
    for (int h = 0; h < ESIZE; ++h)
      v.off[odd][h] = MlaWgmmaVChunkOffset(KV_FORMAT, warp, r, quad, odd, h);
  }
  return v;
}
MLA_INLINE VRaw LoadV(const VAddr& va, int tile_off, int step) {
  VRaw v;
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    const u8* row = va.quad_row + tile_off + (16 * step + (t % 2) + 8 * (t / 2)) * V_PITCH;
#pragma unroll
    for (int h = 0; h < ESIZE; ++h)
      v.t[t][h] = *reinterpret_cast<const uint4*>(row + va.off[t % 2][h]);
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
    if (E4M3_TILES) {
      // Bytes 2b, 2b+1 (dims of rows r and r+8) of the k and k+1 tokens,
      // interleaved so that one conversion yields each register.
      const u32 sel = b % 2 == 0 ? 0x5140u : 0x7362u;
      Fp8x4ToF16x4(MlaPrmt(w[0][b / 2], w[1][b / 2], sel), a[b][0], a[b][1]);
      Fp8x4ToF16x4(MlaPrmt(w[2][b / 2], w[3][b / 2], sel), a[b][2], a[b][3]);
    } else {
      a[b][0] = MlaPrmt(w[0][b], w[1][b], 0x5410u);
      a[b][1] = MlaPrmt(w[0][b], w[1][b], 0x7632u);
      a[b][2] = MlaPrmt(w[2][b], w[3][b], 0x5410u);
      a[b][3] = MlaPrmt(w[2][b], w[3][b], 0x7632u);
    }
  }
}

}  // namespace mla_wgmma

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_LOADS_CUH_
