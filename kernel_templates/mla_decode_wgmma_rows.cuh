// Hopper (sm_90a) MLA decode for tiles of 64 query rows: warpgroup MMA with
// the rows as M and both operands in shared memory, for fp8 and bf16 KV.
//
// Sequences with 64 or more query rows (16 heads x 4 tokens, 32 x 2, 128 heads)
// fill wgmma's M = 64 without padding, so the products run the natural way:
//   S [64 rows x 64 tokens] = Q [64 x 576] . K^T [576 x 64]
//   O [64 rows x 512 dims] += P [64 x 64]  . V   [64 x 512]
// The swap-AB path (mla_decode_wgmma.cuh) turns KV bytes into A fragments in
// registers, per warpgroup and per product, for 16 or 32 rows: 128 rows there
// convert each fp8 byte eight times. Here a KV tile becomes a 16-bit operand in
// shared memory once per 64 rows (fp8 codes converted once, bf16 copied as it
// is) and all four products read it from there.
//
// A CTA is two warpgroups (256 threads), one CTA per SM (MlaWgmmaRowsSmemBytes):
//   every thread: copies its share of tile t + 1 (cp.async) and converts the
//                 same share of tile t (fp8), so no barrier sits between the
//                 copy landing and the conversion
//   warpgroup 0:  S = Q K^T (36 k-steps of m64n64k16), the online softmax, and
//                 P and the rows' rescale factors into shared memory
//   both:         O[:, 256 wg .. 256 wg + 255] = alpha O + P V (m64n256k16)
//
// Operand layouts. Q and P (A operands, K-major, no swizzle): a 64 x D matrix
// of 16-bit values is D / 8 column chunks of 64 x 16 bytes, entry (x, d) at
//   (d / 8) * 1024 + x * 16 + (d % 8) * 2;
// eight consecutive x of a chunk form one core matrix (128 contiguous bytes):
// leading byte offset 1024 (the next chunk, along K), stride 128.
// The KV tile (B operand of both products) uses the 128-byte swizzle: nine
// blocks of 64 dims, 8 KB each; in a block, token t's 64 dims are the 128-byte
// row t, their 16-byte chunk c at position c ^ (t % 8):
//   (d / 64) * 8192 + t * 128 + (((d % 64) / 8) ^ (t % 8)) * 16 + (d % 8) * 2.
// A token's 128 bytes of a block are contiguous in global memory and land in
// eight different bank groups, so eight lanes copy them in one request and one
// wavefront. For S it is the K-major operand (stride 1024 between eight-token
// groups; k-steps advance 32 bytes inside a block). For P V the same bytes
// are the MN-major operand through the transpose bit: leading offset 8192 (the
// next 64 dims, along N), stride 1024 (the next eight tokens, along K). A
// probe on the H200 checked both readings.
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_DECODE_WGMMA_ROWS_CUH_
#define MLAJIT_KERNEL_TEMPLATES_MLA_DECODE_WGMMA_ROWS_CUH_

#include "mla_wgmma_common.cuh"
#include "mla_wgmma_ss.cuh"

namespace mla_wgmma_rows {

using mla_wgmma::Commit;
using mla_wgmma::Desc;
using mla_wgmma::Exp2;
using mla_wgmma::Fence;
using mla_wgmma::FenceProxyAsync;
using mla_wgmma::PinAccumulators;
using mla_wgmma::Wait;
using mla_wgmma_ss::SsM64N256K16;
using mla_wgmma_ss::SsM64N64K16;

constexpr bool ELIGIBLE = MlaWgmmaRowsEligible(KV_FORMAT, BLOCK_M, BLOCK_N, NUM_WARPS);
constexpr int NUM_THREADS = 256;
constexpr int ROWS = 64;  // query rows per tile: the wgmma M
constexpr int TILE = 64;  // KV tokens per tile
constexpr int STAGES = NUM_STAGES;
constexpr bool FP8 = KV_FORMAT == KV_FORMAT_FP8;
constexpr bool BF16_OPS = !FP8;       // operand type: bf16 for bf16 KV, else f16
constexpr int CHUNK_BYTES = 64 * 16;  // one column chunk of 64 entries
constexpr int OPERAND_BYTES = HEAD_DIM_QK / 8 * CHUNK_BYTES;  // 64 x 576 16-bit: 73728
constexpr int BLOCK_BYTES = TILE * 128;  // one 64-dim block of the swizzled KV tile
// fp8 tiles as stored, token-major with 16 bytes of padding per token: eight
// tokens' chunk c then start in eight different bank groups.
constexpr int RAW_STRIDE = HEAD_DIM_QK + 16;  // 592
constexpr int RAW_BYTES = TILE * RAW_STRIDE;  // 37888
constexpr int K_STEPS = HEAD_DIM_QK / 16;     // 36
constexpr int STEP_BYTES = 2 * CHUNK_BYTES;   // one k16 step of a K-major operand
constexpr int TOKEN_CHUNKS = KvTokenBytes<KV_FORMAT>::value / 16;  // 36 fp8, 72 bf16

struct Smem {
  u8* q;         // Q operand
  u8* kv;        // the KV operand (swizzled): fp8 one converted tile; bf16 STAGES
  u8* raw;       // fp8: STAGES tiles as stored (token-major, padded)
  u8* p;         // P operand (64 x 64)
  float* alpha;  // [64] rescale of the rows' running O for the current tile
  float* red;    // [64] row sums at the end; [8] per-warp amax of Q
};

MLA_INLINE Smem CarveSmem(u8* base) {
  Smem m;
  m.q = base;
  m.kv = m.q + OPERAND_BYTES;
  m.raw = m.kv + (FP8 ? OPERAND_BYTES : STAGES * OPERAND_BYTES);
  m.p = m.raw + (FP8 ? STAGES * RAW_BYTES : 0);
  m.alpha = reinterpret_cast<float*>(m.p + TILE * ROWS * 2);
  m.red = m.alpha + ROWS;
  return m;
}

MLA_INLINE u32 PackOperand(float lo, float hi) {
  return FP8 ? mla_wgmma::PackF16x2(lo, hi) : PackBf16x2(lo, hi);
}

// A chunked tile (Q, P) as a K-major operand; k-step k is .At(k * STEP_BYTES).
MLA_INLINE Desc KMajor(const u8* base) { return Desc(base, CHUNK_BYTES, 128); }
// The swizzled KV tile (descriptor layout type 1: 128-byte swizzle).
MLA_INLINE Desc Swizzled128(const u8* base, u32 lbo, u32 sbo) {
  Desc d(base, lbo, sbo);
  d.hi |= 1u << 30;
  return d;
}
// K for S: k-step k is .At(KStepOffset(k)).
MLA_INLINE Desc KOperand(const u8* kv) { return Swizzled128(kv, 16, 1024); }
MLA_INLINE int KStepOffset(int k) { return (k / 4) * BLOCK_BYTES + (k % 4) * 32; }
// V for P V, dims [256 wg, 256 wg + 256): k-step k (16 tokens) is .At(k * 2048).
MLA_INLINE Desc VOperand(const u8* kv, int wg) {
  return Swizzled128(kv + wg * 4 * BLOCK_BYTES, BLOCK_BYTES, 1024);
}

// ---- loads --------------------------------------------------------------

// Copies of a tile, per 8-lane quarter of a warp (the unit in which 16-byte
// accesses coalesce and in which shared memory serves them), one token's 128
// contiguous bytes: one 4-sector request and one wavefront.
//   fp8:  chunks l + 8 i of a token into the token-major stage.
//   bf16: block b of a token straight into the swizzled operand tile.
// Starts copying KV positions [j0, j0 + TILE) into stage `buf`; positions at
// or past kv_hi are zero-filled (never read from memory, never NaN).
MLA_INLINE void IssueTile(const MlaDecodeParams& p, const MlaSeqInfo& s, int j0, int kv_hi, int buf,
                          const Smem& sm) {
  constexpr int TOKEN_BYTES = KvTokenBytes<KV_FORMAT>::value;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int c0 = lane & 7;
  const u8* kv = static_cast<const u8*>(p.kv);
  // 32 tokens per pass of the CTA: token pass * 32 + 4 warp + lane / 8.
#pragma unroll
  for (int pass = 0; pass < TILE / 32; ++pass) {
    const int tok = pass * 32 + warp * 4 + (lane >> 3);
    const int j = j0 + tok;
    const bool valid = j < kv_hi;
    const u8* src = kv + KvSlot<PAGE_SIZE>(p, s, valid ? j : j0) * TOKEN_BYTES + c0 * 16;
    if (FP8) {
      u8* dst = sm.raw + buf * RAW_BYTES + tok * RAW_STRIDE + c0 * 16;
#pragma unroll
      for (int i = 0; i < (TOKEN_CHUNKS + 7) / 8; ++i) {
        if (c0 + 8 * i < TOKEN_CHUNKS) mla_wgmma::CpAsync16(dst + i * 128, src + i * 128, valid);
      }
    } else {
      u8* dst = sm.kv + buf * OPERAND_BYTES + tok * 128 + ((c0 ^ (tok & 7)) << 4);
#pragma unroll
      for (int b = 0; b < HEAD_DIM_QK / 64; ++b) {
        mla_wgmma::CpAsync16(dst + b * BLOCK_BYTES, src + b * 128, valid);
      }
    }
  }
}

// fp8: stage `buf` -> the f16 operand tile. Thread (token tid % 64, 16-byte
// chunks c0 + 4 i, c0 = tid / 64): eight lanes read chunk c of eight
// consecutive tokens (eight bank groups, thanks to the padding) and write its
// 16 dims, chunks 2 c0 and 2 c0 + 1 of block i, at swizzled positions that
// differ between the eight tokens.
MLA_INLINE void ConvertTile(int buf, const Smem& sm) {
  const int tok = threadIdx.x & 63, c0 = threadIdx.x >> 6;
  const u8* src = sm.raw + buf * RAW_BYTES + tok * RAW_STRIDE + c0 * 16;
  u8* dst_lo = sm.kv + tok * 128 + (((2 * c0) ^ (tok & 7)) << 4);
  u8* dst_hi = sm.kv + tok * 128 + (((2 * c0 + 1) ^ (tok & 7)) << 4);
#pragma unroll
  for (int i = 0; i < TOKEN_CHUNKS / 4; ++i) {
    const uint4 v = *reinterpret_cast<const uint4*>(src + i * 64);
    uint4 lo, hi;
    mla_wgmma::Fp8x4ToF16x4(v.x, lo.x, lo.y);
    mla_wgmma::Fp8x4ToF16x4(v.y, lo.z, lo.w);
    mla_wgmma::Fp8x4ToF16x4(v.z, hi.x, hi.y);
    mla_wgmma::Fp8x4ToF16x4(v.w, hi.z, hi.w);
    *reinterpret_cast<uint4*>(dst_lo + i * BLOCK_BYTES) = lo;
    *reinterpret_cast<uint4*>(dst_hi + i * BLOCK_BYTES) = hi;
  }
}

// Q rows [row_start, row_start + 64) -> the Q operand, as f16 scaled by a
// power of two (fp8 KV, like the swap-AB path's LoadQ) or as bf16; a8 rounds
// to the fp8 grid first. Returns the factor that undoes the scaling in the
// scores. Thread (row tid / 4, chunks tid % 4 + 4 i): all 18 loads in flight.
MLA_INLINE float LoadQ(const MlaDecodeParams& p, const MlaSeqInfo& s, int row_start, const Smem& sm,
                       float q_scale) {
  constexpr int PASSES = HEAD_DIM_QK / 8 / 4;  // 18
  const int row = threadIdx.x >> 2, sub = threadIdx.x & 3;
  const bool valid = row_start + row < s.q_len * NUM_HEADS;
  const u16* q = static_cast<const u16*>(p.q) +
                 (static_cast<long long>(s.qo_start) * NUM_HEADS + row_start + row) * HEAD_DIM_QK +
                 sub * 8;
  uint4 v[PASSES];
#pragma unroll
  for (int i = 0; i < PASSES; ++i) {
    v[i] = valid ? *reinterpret_cast<const uint4*>(q + i * 32) : make_uint4(0, 0, 0, 0);
  }
  constexpr bool RESCALE = FP8 && Q_MODE == Q_MODE_BF16;
  float up = 1.0f, back = 1.0f;
  if (RESCALE) {
    u32 m2 = 0;  // bf16x2 running max of |q|
#pragma unroll
    for (int i = 0; i < PASSES; ++i) {
      const u32 w[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        asm("{\n.reg .b32 a;\nabs.bf16x2 a, %1;\nmax.bf16x2 %0, %0, a;\n}\n"
            : "+r"(m2)
            : "r"(w[j]));
      }
    }
    float amax = fmaxf(Bf16ToFloat(m2 & 0xffffu), Bf16ToFloat(m2 >> 16));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    if ((threadIdx.x & 31) == 0) sm.red[threadIdx.x >> 5] = amax;
    __syncthreads();  // red is next written in the epilogue, after more barriers
    amax = sm.red[0];
#pragma unroll
    for (int w = 1; w < NUM_THREADS / 32; ++w) amax = fmaxf(amax, sm.red[w]);
    int e = 0;
    if (amax > 0.0f) {
      const int amax_exp = static_cast<int>((__float_as_uint(amax) >> 23) & 0xffu) - 127;
      e = min(max(13 - amax_exp, -126), 126);  // amax * 2^e in [2^13, 2^14)
    }
    up = __uint_as_float(static_cast<u32>(e + 127) << 23);
    back = __uint_as_float(static_cast<u32>(127 - e) << 23);
  }
  u8* dst = sm.q + (sub * 64 + row) * 16;
#pragma unroll
  for (int i = 0; i < PASSES; ++i) {
    u32 w[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float lo = Bf16ToFloat(w[j] & 0xffffu), hi = Bf16ToFloat(w[j] >> 16);
      if (RESCALE) {
        w[j] = mla_wgmma::PackF16x2(lo * up, hi * up);
      } else if (Q_MODE == Q_MODE_FP8) {
        QuantiseQPair<Q_MODE>(lo, hi, q_scale);
        w[j] = PackOperand(lo, hi);
      }
    }
    *reinterpret_cast<uint4*>(dst + i * 4 * CHUNK_BYTES) = make_uint4(w[0], w[1], w[2], w[3]);
  }
  return back;
}

// ---- one work item --------------------------------------------------------

// Accumulator layout of m64nN (both S and O): thread (warp w of its
// warpgroup, lane = 4 r + quad) holds rows 16 w + r (h = 0) and 16 w + r + 8
// (h = 1), columns 8 j + 2 quad + e, in register 4 j + 2 h + e.
MLA_INLINE void ProcessItem(const MlaDecodeParams& p, const MlaWorkItem& item, const MlaSeqInfo& s,
                            const Smem& sm, float q_scale, const MlaWorkItem& next,
                            MlaSeqInfo& next_seq) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int wg = warp >> 2, r = lane >> 2, quad = lane & 3;
  const int row0 = 16 * (warp & 3) + r;  // this thread's rows: row0, row0 + 8
  const int rows_total = s.q_len * NUM_HEADS;
  const int last_row = min(item.row_start + ROWS, rows_total) - 1;
  const int kv_hi = min(item.kv_end, VisibleKv<NUM_HEADS, CAUSAL>(s, last_row));
  const int kv_lo = item.kv_start;
  const int num_tiles = kv_hi > kv_lo ? (kv_hi - kv_lo + TILE - 1) / TILE : 0;

  int lim[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    lim[h] = min(kv_hi, VisibleKv<NUM_HEADS, CAUSAL>(s, item.row_start + row0 + 8 * h));
  }
  float score_scale = p.sm_scale * LOG2E;
  if (FP8) score_scale *= p.kv_scale;
  if (Q_MODE == Q_MODE_FP8) score_scale *= q_scale;

  float m[2] = {NegInf(), NegInf()}, l[2] = {0.0f, 0.0f};
  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.0f;

  __syncthreads();  // the previous item is done with shared memory
  if (num_tiles > 0) {
#pragma unroll
    for (int st = 0; st < STAGES - 1; ++st) {
      if (st < num_tiles) IssueTile(p, s, kv_lo + st * TILE, kv_hi, st, sm);
      mla_wgmma::CpAsyncCommit();
    }
    score_scale *= LoadQ(p, s, item.row_start, sm, q_scale);
  }
  next_seq = LoadSeq(p, next.seq);
  const Desc q_desc = KMajor(sm.q), p_desc = KMajor(sm.p);

  for (int t = 0; t < num_tiles; ++t) {
    const int buf = t % STAGES;
    mla_wgmma::CpAsyncWait<STAGES - 2>();
    FenceProxyAsync();  // Q, bf16 operand tiles (cp.async) -> wgmma reads
    __syncthreads();    // (1) tile t landed; everyone is done with tile t - 1
    if (t + STAGES - 1 < num_tiles) {
      IssueTile(p, s, kv_lo + (t + STAGES - 1) * TILE, kv_hi, (t + STAGES - 1) % STAGES, sm);
    }
    mla_wgmma::CpAsyncCommit();
    if (FP8) {
      ConvertTile(buf, sm);
      FenceProxyAsync();
      __syncthreads();  // the operand tile is complete
    }
    const u8* kv = FP8 ? sm.kv : sm.kv + buf * OPERAND_BYTES;
    const Desc k_desc = KOperand(kv), v_desc = VOperand(kv, wg);

    if (wg == 0) {
      // ---- S = Q K^T ----
      float sc[32];
      Fence();
#pragma unroll
      for (int k = 0; k < K_STEPS; ++k) {
        SsM64N64K16<BF16_OPS>(sc, q_desc.At(k * STEP_BYTES), k_desc.At(KStepOffset(k)), k > 0);
      }
      Commit();
      Wait<0>();
      PinAccumulators(sc);

      // ---- online softmax per row; P and the rescale factors to smem ----
      // Scores stay unscaled until exp2(s * scale - m), one FFMA each; the
      // mask is applied only on tiles that reach past a row's limit.
      const int j0 = kv_lo + t * TILE + 2 * quad;
      if (kv_lo + (t + 1) * TILE > min(lim[0], lim[1])) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
          for (int i = 0; i < 16; ++i) {
            float& v = sc[4 * (i / 2) + 2 * h + (i % 2)];
            v = j0 + 8 * (i / 2) + (i % 2) < lim[h] ? v : NegInf();
          }
        }
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = NegInf();
#pragma unroll
        for (int j = 0; j < 8; ++j) mx = fmaxf(mx, fmaxf(sc[4 * j + 2 * h], sc[4 * j + 2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float mn = fmaxf(m[h], mx * score_scale);
        const float base = mn == NegInf() ? 0.0f : mn;  // nothing visible yet: avoid inf - inf
        const float alpha = Exp2(m[h] - base);
        m[h] = mn;
        float sum = 0.0f;
        u8* prow = sm.p + (row0 + 8 * h) * 16 + quad * 4;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const float p0 = Exp2(fmaf(sc[4 * j + 2 * h], score_scale, -base));
          const float p1 = Exp2(fmaf(sc[4 * j + 2 * h + 1], score_scale, -base));
          sum += p0 + p1;
          *reinterpret_cast<u32*>(prow + j * CHUNK_BYTES) = PackOperand(p0, p1);
        }
        l[h] = l[h] * alpha + sum;  // this thread's part; the quad is summed at the end
        if (quad == 0) sm.alpha[row0 + 8 * h] = alpha;
      }
      FenceProxyAsync();  // P -> wgmma reads
    }
    __syncthreads();  // (2) P and alpha are written

    // ---- O = alpha O + P V, this warpgroup's 256 dims ----
    const float a0 = sm.alpha[row0], a1 = sm.alpha[row0 + 8];
    if (__any_sync(0xffffffffu, a0 != 1.0f || a1 != 1.0f)) {  // a row's maximum moved
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        o[4 * j] *= a0;
        o[4 * j + 1] *= a0;
        o[4 * j + 2] *= a1;
        o[4 * j + 3] *= a1;
      }
    }
    Fence();
#pragma unroll
    for (int k = 0; k < TILE / 16; ++k) {
      SsM64N256K16<BF16_OPS>(o, p_desc.At(k * STEP_BYTES), v_desc.At(k * 2048), 1);
    }
    Commit();
    Wait<0>();
    PinAccumulators(o);
  }

  // ---- epilogue: row sums, normalise, write ----
  if (wg == 0) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
      if (quad == 0) sm.red[row0 + 8 * h] = l[h];
    }
  }
  __syncthreads();
  const float v_scale = FP8 ? p.kv_scale : 1.0f;
  const int col0 = wg * 256 + 2 * quad;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int n = row0 + 8 * h;
    const float sum = sm.red[n];
    const float inv = sum > 0.0f ? v_scale / sum : 0.0f;
    const int row = item.row_start + n;
    if (item.partial < 0) {
      if (row >= rows_total) continue;
      const long long base = static_cast<long long>(s.qo_start) * NUM_HEADS + row;
      u16* out = static_cast<u16*>(p.out) + base * HEAD_DIM_V + col0;
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        *reinterpret_cast<u32*>(out + 8 * j) =
            PackBf16x2(o[4 * j + 2 * h] * inv, o[4 * j + 2 * h + 1] * inv);
      }
      if (WRITE_LSE && wg == 0 && quad == 0) {
        p.lse[base] = sum > 0.0f ? (m[h] + log2f(sum)) * LN2 : NegInf();
      }
    } else {
      float* po =
          p.partial_o + (static_cast<long long>(item.partial) * ROWS + n) * HEAD_DIM_V + col0;
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        *reinterpret_cast<float2*>(po + 8 * j) =
            make_float2(o[4 * j + 2 * h] * inv, o[4 * j + 2 * h + 1] * inv);
      }
      if (wg == 0 && quad == 0) {
        p.partial_lse[item.partial * ROWS + n] = sum > 0.0f ? (m[h] + log2f(sum)) * LN2 : NegInf();
      }
    }
  }
}

MLA_INLINE void DecodeCta(const MlaDecodeParams& p) {
  // The swizzle pattern repeats every 1024 bytes of address: the operand tiles
  // (at multiples of 73728 from the base) need a 1024-byte aligned base.
  extern __shared__ __align__(1024) u8 mla_smem[];
  const Smem sm = CarveSmem(mla_smem);
  const float q_scale = Q_MODE == Q_MODE_FP8 ? QScaleFromAmax(*p.q_amax) : 1.0f;
  const int begin = p.work_indptr[blockIdx.x], end = p.work_indptr[blockIdx.x + 1];
  if (begin >= end) return;
  MlaWorkItem item = p.work[begin];
  MlaSeqInfo seq = LoadSeq(p, item.seq);
  for (int w = begin; w < end; ++w) {
    const MlaWorkItem next = w + 1 < end ? p.work[w + 1] : item;
    MlaSeqInfo next_seq;
    ProcessItem(p, item, seq, sm, q_scale, next, next_seq);
    item = next;
    seq = next_seq;
  }
}

}  // namespace mla_wgmma_rows

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_DECODE_WGMMA_ROWS_CUH_
