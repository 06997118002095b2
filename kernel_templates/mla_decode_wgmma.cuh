// Hopper (sm_90a) MLA decode path: warpgroup MMA with the KV tile as the M
// operand ("swap AB"), for fp8 and bf16 KV and tiles of 16 or 32 query rows.
//
// Decode has few query rows per sequence (heads x q_len: 16..32 for most
// DeepSeek deployments) and many KV tokens. wgmma's M is at least 64, so
// instead of padding the rows to 64 the kernel computes the transposed
// products, with 64 KV tokens as M and the rows as N:
//   S^T [64 tokens x N rows]  = K  [64 x 576] . Q^T [576 x N]
//   O^T [512 dims  x N rows] += V^T[512 x 64] . P^T [64 x N]
// One CTA is one warpgroup (4 warps); two CTAs share an SM for fp8.
//
// A operands (K and V^T) come from registers: each thread reads the raw tile
// bytes it needs with 16-byte shared loads and converts them (fp8 -> f16) on
// the way, so every KV byte is read from shared memory once per product and
// never written back converted. Two permutations make those loads contiguous;
// both are fixed at compile time and undone where the data enters or leaves:
//   - QK^T sums over the 576 dims in any order: a thread's 16-byte load feeds
//     whole k-steps, and Q is stored in that order (MlaWgmmaQOffset).
//   - P V: a thread's M rows (output dims) are chosen so that its 16 output
//     dims are consecutive (MlaWgmmaOutDim); the epilogue writes them back in
//     place.
// The staging tile keeps tokens whole but swizzles their 16-byte chunks
// (MlaWgmmaChunkSlot), so that those loads are free of bank conflicts. The
// index maps live in mla_wgmma_layout.h, where the CPU tests check them.
// B operands (Q^T, P^T) live in shared memory in the no-swizzle core-matrix
// layout (8 rows x 16 bytes per core matrix) and are read through descriptors.
//
// Shared memory: MlaWgmmaSmemBytes() in mla_params.h (host and device agree).
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_DECODE_WGMMA_CUH_
#define MLAJIT_KERNEL_TEMPLATES_MLA_DECODE_WGMMA_CUH_

#include "mla_common.cuh"
#include "mla_decode_mma.cuh"  // cp.async, f16 packing and fp8 conversion helpers
#include "mla_wgmma_layout.h"

namespace mla_wgmma {

using mla_mma::CpAsync16;
using mla_mma::CpAsyncCommit;
using mla_mma::CpAsyncWait;
using mla_mma::Fp8x4ToF16x4;
using mla_mma::PackF16x2;
using mla_mma::SmemAddr;

constexpr int NUM_THREADS = 128;
constexpr int N = BLOCK_M;   // query rows per tile: the wgmma N
constexpr int TILE = 64;     // KV tokens per tile: the wgmma M
constexpr bool FP8 = KV_FORMAT == KV_FORMAT_FP8;
constexpr int ESIZE = FP8 ? 1 : 2;            // bytes per KV element
constexpr int ELEMS = 16 / ESIZE;             // KV elements per 16-byte load
constexpr int STEPS_PER_LOAD = ELEMS / 4;     // k16 steps one 16-byte load feeds
constexpr int K_STEPS = HEAD_DIM_QK / 16;     // 36
constexpr int K_BLOCKS = K_STEPS / STEPS_PER_LOAD;
constexpr int RAW_STRIDE = MlaWgmmaTokenStride(KV_FORMAT);
constexpr int STAGES = NUM_STAGES;
constexpr int ROWS_PER_THREAD = N / 4;        // accumulator columns a thread holds
constexpr int CORE_BYTES = 128;               // one 8 x 16-byte core matrix
constexpr int STEP_BYTES = N * 32;            // one k16 step of Q^T or P^T
// Independent accumulator sets of QK^T (registers allowing).
constexpr int S_SETS = N == 16 ? 4 : 2;

// The kernel runs this path only for shapes MlaWgmmaEligible accepts (one
// warpgroup, 64-token tiles, 16 or 32 rows, fp8 or bf16 KV); the file is
// compiled for every sm_90a shape, so nothing here may assert more.
constexpr bool ELIGIBLE = MlaWgmmaEligible(KV_FORMAT, BLOCK_M, BLOCK_N, NUM_WARPS);

struct Smem {
  u8* q;       // [K_STEPS][N/8][2][8][8] f16/bf16: Q^T in core matrices
  u8* raw;     // [STAGES][TILE][RAW_STRIDE] KV tiles as stored
  u8* p;       // [TILE/16][N/8][2][8][8] f16/bf16: P^T in core matrices
  float* red;  // [4][N] per-warp row maxima / sums
};

MLA_INLINE Smem CarveSmem(u8* base) {
  Smem m;
  m.q = base;
  m.raw = m.q + K_STEPS * STEP_BYTES;
  m.p = m.raw + STAGES * TILE * RAW_STRIDE;
  m.red = reinterpret_cast<float*>(m.p + (TILE / 16) * STEP_BYTES);
  return m;
}

// ---- warpgroup MMA primitives -------------------------------------------

// Shared-memory matrix descriptor, no swizzle, as two 32-bit words: `lbo`
// bytes between core matrices along K, `sbo` bytes between core matrices
// along N. Shared addresses stay below 2^18, so advancing the start address
// is an add to the low word (Desc::At) with no carry into the offset fields.
struct Desc {
  u32 lo, hi;
  MLA_INLINE Desc(const void* p, u32 lbo, u32 sbo)
      : lo((SmemAddr(p) >> 4) | ((lbo >> 4) << 16)), hi(sbo >> 4) {}
  MLA_INLINE Desc At(int byte_offset) const {
    Desc d = *this;
    d.lo += static_cast<u32>(byte_offset) >> 4;
    return d;
  }
};
// B operand base in the core-matrix layout of Smem::q / Smem::p; k-step s
// is .At(s * STEP_BYTES).
MLA_INLINE Desc StepDesc(const u8* base) { return Desc(base, CORE_BYTES, 2 * CORE_BYTES); }

MLA_INLINE void Fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
MLA_INLINE void Commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int G>
MLA_INLINE void Wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(G) : "memory");
}
// Generic-proxy shared stores (Q^T, P^T) become visible to wgmma's reads.
MLA_INLINE void FenceProxyAsync() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// d (+)= A . B for one m64 x N x k16 step; A from registers, B by descriptor;
// accumulate == 0 overwrites d. TYPE: the operand type, f16 or bf16.
#define MLA_WGMMA_M64N16K16(TYPE)                                                              \
  asm volatile(                                                                                \
      "{\n.reg .pred p;\n.reg .b64 desc;\nsetp.ne.b32 p, %14, 0;\nmov.b64 desc, {%12, %13};\n" \
      "wgmma.mma_async.sync.aligned.m64n16k16.f32." TYPE "." TYPE " "                          \
      "{%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, desc, p, 1, 1, 0;\n}\n"                     \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),   \
        "+f"(d[7])                                                                             \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b.lo), "r"(b.hi), "r"(accumulate))
#define MLA_WGMMA_M64N32K16(TYPE)                                                              \
  asm volatile(                                                                                \
      "{\n.reg .pred p;\n.reg .b64 desc;\nsetp.ne.b32 p, %22, 0;\nmov.b64 desc, {%20, %21};\n" \
      "wgmma.mma_async.sync.aligned.m64n32k16.f32." TYPE "." TYPE " "                          \
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19}, desc, p, "  \
      "1, 1, 0;\n}\n"                                                                          \
      : "+f"(x[0]), "+f"(x[1]), "+f"(x[2]), "+f"(x[3]), "+f"(x[4]), "+f"(x[5]), "+f"(x[6]),   \
        "+f"(x[7]), "+f"(x[8]), "+f"(x[9]), "+f"(x[10]), "+f"(x[11]), "+f"(x[12]),            \
        "+f"(x[13]), "+f"(x[14]), "+f"(x[15])                                                  \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b.lo), "r"(b.hi), "r"(accumulate))
MLA_INLINE void Mma(float (&d)[N / 2], const u32 (&a)[4], Desc b, int accumulate) {
  if (N == 16) {
    if (FP8) {
      MLA_WGMMA_M64N16K16("f16");
    } else {
      MLA_WGMMA_M64N16K16("bf16");
    }
  } else {
    float* x = d;  // N == 32: 16 accumulators
    if (FP8) {
      MLA_WGMMA_M64N32K16("f16");
    } else {
      MLA_WGMMA_M64N32K16("bf16");
    }
  }
}
#undef MLA_WGMMA_M64N16K16
#undef MLA_WGMMA_M64N32K16

MLA_INLINE u32 Prmt(u32 a, u32 b, u32 sel) {
  u32 r;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}

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
          lo = QuantiseQ<Q_MODE>(lo, q_scale);
          hi = QuantiseQ<Q_MODE>(hi, q_scale);
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

// Ties accumulator registers to the preceding wgmma.wait_group, so that no
// read of them is scheduled before the wait.
template <int K>
MLA_INLINE void PinAccumulators(float (&d)[K]) {
#pragma unroll
  for (int i = 0; i < K; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

MLA_INLINE u32 PackOperand(float lo, float hi) { return FP8 ? PackF16x2(lo, hi) : PackBf16x2(lo, hi); }

// P^T entries of this thread: k-step `warp`, k = r (low half) and r + 8 (high
// half), column n of n8 block j.
MLA_INLINE void WriteP(const Smem& sm, int warp, int j, int n, int r, u32 packed) {
  u8* pc = sm.p + warp * STEP_BYTES + (j * 2) * CORE_BYTES + n * 16 + r * 2;
  *reinterpret_cast<u16*>(pc) = static_cast<u16>(packed & 0xffffu);
  *reinterpret_cast<u16*>(pc + CORE_BYTES) = static_cast<u16>(packed >> 16);
}

// ---- one work item --------------------------------------------------------

// `next` is the CTA's following work item (or `item` again): its sequence
// record is fetched into `next_seq` once this item's Q is loaded, so that the
// next item does not start with a dependent global round trip.
MLA_INLINE void ProcessItem(const MlaDecodeParams& p, const MlaWorkItem& item, const MlaSeqInfo& s,
                            const Smem& sm, float q_scale, const MlaWorkItem& next,
                            MlaSeqInfo& next_seq) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int r = lane >> 2, quad = lane & 3;
  const int rows_total = s.q_len * NUM_HEADS;
  const int last_row = min(item.row_start + N, rows_total) - 1;
  const int kv_hi = min(item.kv_end, VisibleKv<NUM_HEADS, CAUSAL>(s, last_row));
  const int kv_lo = item.kv_start;
  const int num_tiles = kv_hi > kv_lo ? (kv_hi - kv_lo + TILE - 1) / TILE : 0;

  // This thread's accumulator columns (query rows): n = 8j + 2 quad + e.
  int lim[ROWS_PER_THREAD];
#pragma unroll
  for (int c = 0; c < ROWS_PER_THREAD; ++c) {
    const int n = 8 * (c / 2) + 2 * quad + (c % 2);
    lim[c] = min(kv_hi, VisibleKv<NUM_HEADS, CAUSAL>(s, item.row_start + n));
  }

  float score_scale = p.sm_scale * LOG2E;
  if (FP8) score_scale *= p.kv_scale;
  if (Q_MODE == Q_MODE_FP8) score_scale *= q_scale;

  float m[ROWS_PER_THREAD], l[ROWS_PER_THREAD];
  float o[8][N / 2];
#pragma unroll
  for (int c = 0; c < ROWS_PER_THREAD; ++c) {
    m[c] = NegInf();
    l[c] = 0.0f;
  }
#pragma unroll
  for (int b = 0; b < 8; ++b) {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) o[b][i] = 0.0f;
  }

  __syncthreads();  // the previous item is done with shared memory
  if (num_tiles > 0) {
#pragma unroll
    for (int st = 0; st < STAGES - 1; ++st) {
      if (st < num_tiles) IssueKvTile(p, s, kv_lo + st * TILE, kv_hi, st, sm);
      CpAsyncCommit();
    }
    score_scale *= LoadQ(p, s, item.row_start, sm, q_scale);
  }
  next_seq = LoadSeq(p, next.seq);
  const KAddr k_addr = MakeKAddr(sm.raw, warp, r, quad);
  const VAddr v_addr = MakeVAddr(sm.raw, warp, r, quad);
  const Desc q_desc = StepDesc(sm.q), p_desc = StepDesc(sm.p);

  for (int t = 0; t < num_tiles; ++t) {
    const int buf = t % STAGES;
    CpAsyncWait<STAGES - 2>();
    FenceProxyAsync();  // Q^T (first tile) / P^T stores -> wgmma reads
    __syncthreads();    // tile t landed everywhere; everyone is done with tile t-1
    if (t + STAGES - 1 < num_tiles) {
      IssueKvTile(p, s, kv_lo + (t + STAGES - 1) * TILE, kv_hi, (t + STAGES - 1) % STAGES, sm);
    }
    CpAsyncCommit();
    const int tile_off = buf * TILE * RAW_STRIDE;

    // ---- S^T = K Q^T: this warp's 16 tokens x N rows ----
    // k-step k accumulates into set k % S_SETS: S_SETS independent chains of
    // small MMAs instead of one chain of 36 (each waits for its predecessor).
    float sets[S_SETS][N / 2];
    KRaw k_next = LoadK(k_addr, tile_off, 0);
#pragma unroll
    for (int kb = 0; kb < K_BLOCKS; ++kb) {
      u32 a[STEPS_PER_LOAD][4];
      KFragments(k_next, a);
      if (kb + 1 < K_BLOCKS) k_next = LoadK(k_addr, tile_off, kb + 1);  // in flight during the MMAs
      Fence();
#pragma unroll
      for (int i = 0; i < STEPS_PER_LOAD; ++i) {
        const int k = kb * STEPS_PER_LOAD + i;
        Mma(sets[k % S_SETS], a[i], q_desc.At(k * STEP_BYTES), k >= S_SETS);
      }
      Commit();
      Wait<1>();
    }
    Wait<0>();
#pragma unroll
    for (int k = 0; k < S_SETS; ++k) PinAccumulators(sets[k]);
    float sacc[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      sacc[i] = sets[0][i];
#pragma unroll
      for (int k = 1; k < S_SETS; ++k) sacc[i] += sets[k][i];
    }

    // ---- online softmax over the tile's tokens, per query row ----
    // sacc[4j + 2h + e]: token 16 warp + r + 8h, row 8j + 2 quad + e.
    // Fast path: P relative to the running maxima m as they stand, with no
    // exchange between warps and no rescale of O, valid while no score
    // exceeds its row's m by more than HEADROOM (P <= 2^HEADROOM). The first
    // tile, or a score that jumps, sends the whole CTA through the exchange
    // (the decision is CTA-uniform: __syncthreads_or).
    // With 32 rows the branch costs registers (spills): always exchange.
    constexpr float HEADROOM = 8.0f;
    constexpr bool DEFERRED_MAX = N == 16;
    const int j0 = kv_lo + t * TILE + warp * 16 + r;
    bool over = false;
    float ls[ROWS_PER_THREAD];
#pragma unroll
    for (int c = 0; c < ROWS_PER_THREAD; ++c) {
      const int j = c / 2, e = c % 2;
      float& s0 = sacc[4 * j + e];
      float& s1 = sacc[4 * j + 2 + e];
      s0 = j0 < lim[c] ? s0 * score_scale : NegInf();
      s1 = j0 + 8 < lim[c] ? s1 * score_scale : NegInf();
      if (DEFERRED_MAX) {
        over |= fmaxf(s0, s1) > m[c] + HEADROOM;  // m = -inf: any visible score
        const float base = m[c] == NegInf() ? 0.0f : m[c];
        const float p0 = exp2f(s0 - base), p1 = exp2f(s1 - base);
        ls[c] = p0 + p1;
        WriteP(sm, warp, j, 2 * quad + e, r, PackOperand(p0, p1));
      }
    }
    if (DEFERRED_MAX) FenceProxyAsync();
    if (!DEFERRED_MAX || __syncthreads_or(over)) {
#pragma unroll
      for (int c = 0; c < ROWS_PER_THREAD; ++c) {
        const int j = c / 2, e = c % 2;
        float v = fmaxf(sacc[4 * j + e], sacc[4 * j + 2 + e]);
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 4));
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 8));
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 16));
        if (r == 0) sm.red[warp * N + 8 * j + 2 * quad + e] = v;
      }
      __syncthreads();
      float alpha[ROWS_PER_THREAD];
#pragma unroll
      for (int c = 0; c < ROWS_PER_THREAD; ++c) {
        const int j = c / 2, e = c % 2;
        const int n = 8 * j + 2 * quad + e;
        const float v = fmaxf(fmaxf(sm.red[n], sm.red[N + n]), fmaxf(sm.red[2 * N + n], sm.red[3 * N + n]));
        const float mn = fmaxf(m[c], v);
        const float base = mn == NegInf() ? 0.0f : mn;  // nothing visible yet: avoid inf - inf
        alpha[c] = exp2f(m[c] - base);
        m[c] = mn;
        const float p0 = exp2f(sacc[4 * j + e] - base), p1 = exp2f(sacc[4 * j + 2 + e] - base);
        ls[c] = p0 + p1;
        l[c] *= alpha[c];
        WriteP(sm, warp, j, 2 * quad + e, r, PackOperand(p0, p1));
      }
#pragma unroll
      for (int b = 0; b < 8; ++b) {
#pragma unroll
        for (int c = 0; c < ROWS_PER_THREAD; ++c) {
          const int j = c / 2, e = c % 2;
          o[b][4 * j + e] *= alpha[c];
          o[b][4 * j + 2 + e] *= alpha[c];
        }
      }
      FenceProxyAsync();
      __syncthreads();  // P^T rewritten; red read
    }
#pragma unroll
    for (int c = 0; c < ROWS_PER_THREAD; ++c) l[c] += ls[c];

    // ---- O^T += V^T P^T ----
    VRaw v_next = LoadV(v_addr, tile_off, 0);
#pragma unroll
    for (int step = 0; step < TILE / 16; ++step) {
      u32 a[8][4];
      VFragments(v_next, a);
      if (step + 1 < TILE / 16) v_next = LoadV(v_addr, tile_off, step + 1);
      Fence();
      const Desc desc = p_desc.At(step * STEP_BYTES);
#pragma unroll
      for (int b = 0; b < 8; ++b) Mma(o[b], a[b], desc, 1);
      Commit();
      Wait<1>();
    }
    Wait<0>();
#pragma unroll
    for (int b = 0; b < 8; ++b) PinAccumulators(o[b]);
  }

  // ---- epilogue: row sums across lanes and warps, normalise, write ----
#pragma unroll
  for (int c = 0; c < ROWS_PER_THREAD; ++c) {
    float v = l[c];
    v += __shfl_xor_sync(0xffffffffu, v, 4);
    v += __shfl_xor_sync(0xffffffffu, v, 8);
    v += __shfl_xor_sync(0xffffffffu, v, 16);
    if (r == 0) sm.red[warp * N + 8 * (c / 2) + 2 * quad + (c % 2)] = v;
  }
  __syncthreads();
  const float v_scale = FP8 ? p.kv_scale : 1.0f;
  const int dim0 = MlaWgmmaOutDimBase(warp, lane);
#pragma unroll
  for (int c = 0; c < ROWS_PER_THREAD; ++c) {
    const int j = c / 2, e = c % 2;
    const int n = 8 * j + 2 * quad + e;
    const float sum = sm.red[n] + sm.red[N + n] + sm.red[2 * N + n] + sm.red[3 * N + n];
    const float inv = sum > 0.0f ? v_scale / sum : 0.0f;
    const float lse = sum > 0.0f ? (m[c] + log2f(sum)) * LN2 : NegInf();
    const int row = item.row_start + n;
    if (item.partial < 0) {
      if (row >= rows_total) continue;
      const long long base = (static_cast<long long>(s.qo_start) * NUM_HEADS + row);
      u32 w[8];
#pragma unroll
      for (int b = 0; b < 8; ++b) w[b] = PackBf16x2(o[b][4 * j + e] * inv, o[b][4 * j + 2 + e] * inv);
      uint4* out = reinterpret_cast<uint4*>(static_cast<u16*>(p.out) + base * HEAD_DIM_V + dim0);
      out[0] = make_uint4(w[0], w[1], w[2], w[3]);
      out[1] = make_uint4(w[4], w[5], w[6], w[7]);
      if (WRITE_LSE && warp == 0 && r == 0) p.lse[base] = lse;
    } else {
      float4* po = reinterpret_cast<float4*>(
          p.partial_o + (static_cast<long long>(item.partial) * BLOCK_M + n) * HEAD_DIM_V + dim0);
#pragma unroll
      for (int b = 0; b < 8; b += 2) {
        po[b / 2] = make_float4(o[b][4 * j + e] * inv, o[b][4 * j + 2 + e] * inv,
                                o[b + 1][4 * j + e] * inv, o[b + 1][4 * j + 2 + e] * inv);
      }
      if (warp == 0 && r == 0) p.partial_lse[item.partial * BLOCK_M + n] = lse;
    }
  }
}

MLA_INLINE void DecodeCta(const MlaDecodeParams& p) {
  extern __shared__ __align__(128) u8 mla_smem[];
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

}  // namespace mla_wgmma

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_DECODE_WGMMA_CUH_
