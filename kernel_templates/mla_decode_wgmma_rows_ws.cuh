// Hopper (sm_90a) MLA decode for tiles of 64 query rows with fp8 KV, warp
// specialised: one warpgroup scores, two accumulate, and the three overlap.
//
// The two-warpgroup 64-row path (mla_decode_wgmma_rows.cuh) runs a tile's
// steps one after the other: S, the softmax, then P V, each waiting for the
// last, with the KV tile converted to f16 in shared memory beside S. Timed
// without each step on (128,4,8192,16) (tools/bench/RESULTS.md v22), S, the
// softmax, the conversion and P V each sat on the critical path. Here:
//   warpgroup 0 (the scorer): S [64 rows x 64 tokens] = Q K^T as e4m3 wgmma
//     on the tile as stored (bf16 Q as two e4m3 terms hi + lo / 16, as the
//     swap-AB path splits it; a8 its codes), then the online softmax, P and
//     the rows' rescale factors into one of two P buffers. S of tile t + 1
//     is issued as soon as P of tile t is out, ahead of P V of tile t, so
//     that the softmax of tile t + 1 runs while the accumulators multiply.
//   warpgroups 1 and 2 (the accumulators): O^T [256 dims x 64 rows] +=
//     V^T P^T for their half of the 512 output dims, with V^T as the A
//     operand from registers: each thread reads its 8 dims of 4 tokens per
//     k-step from the tile as stored and converts them to f16 on the way
//     (mla_wgmma_layout.h, MlaRowsWsVOffset), so nothing converted is ever
//     written to shared memory. They also copy the tiles into a ring of
//     STAGES stages (tensor copies, mla_wgmma_tma.cuh, or cp.async for
//     part tiles): tile t + STAGES after P V of tile t. (Two
//     stages measured about 15 % slower than three; asking L2 for tiles
//     further ahead as well, slower too: RESULTS.md v22.)
// mbarriers hand tiles and P over, one arrival per warp: kfull[stage] (a tile
// landed: thread 0 makes every arrival beside its tensor copies, which count
// their bytes, or each warp arrives and its cp.async copies are tracked until
// they land, so the scorer's next S waits for the data only, not for the
// accumulators' progress; the scorer fences a cp.async tile for its wgmma
// reads), pfull[b] (P of a tile written), pempty[b] (P V of a tile done).
// A CTA counts its tiles over its work items (g), which names stages, P
// buffers and phases.
//
// Shared memory (MlaWgmmaRowsWsSmemBytes): the stages (36 KB each, the fp8
// layout of the swap-AB path, first: both swizzles need 1024-byte alignment),
// Q as two e4m3 A operands (the 64-row path's Q8 layout), two P buffers, the
// rescale factors, row sums and the mbarriers.
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_DECODE_WGMMA_ROWS_WS_CUH_
#define MLAJIT_KERNEL_TEMPLATES_MLA_DECODE_WGMMA_ROWS_WS_CUH_

#include "mla_wgmma_common.cuh"
#include "mla_wgmma_rows_common.cuh"
#include "mla_wgmma_rows_layout.h"
#include "mla_wgmma_ss.cuh"
#include "mla_wgmma_tma.cuh"
#include "mla_timeline.cuh"

namespace mla_wgmma_rows_ws {

using mla_wgmma::Commit;
using mla_wgmma::CopyKvTileTma;
using mla_wgmma::Desc;
using mla_wgmma::Fence;
using mla_wgmma::FenceProxyAsync;
using mla_wgmma::Fp8x4ToF16x4;
using mla_wgmma::MaskScores;
using mla_wgmma::MbarArrive;
using mla_wgmma::MbarInit;
using mla_wgmma::MbarWait;
using mla_wgmma::PinAccumulators;
using mla_wgmma::SetMaxRegisters;
using mla_wgmma::SoftmaxRowsToP;
using mla_wgmma::TmaTile;
using mla_wgmma::Wait;
using mla_wgmma_ss::RsM64N64K16;
using mla_wgmma_ss::SsE4m3;

constexpr bool ELIGIBLE = MlaWgmmaRowsWsEligible(KV_FORMAT, BLOCK_M, BLOCK_N, NUM_WARPS);
constexpr int WG_THREADS = 128;
constexpr int ACC_THREADS = 2 * WG_THREADS;  // the accumulating warpgroups
constexpr int ACC_WARPS = ACC_THREADS / 32;
constexpr int ROWS = 64;                     // query rows per tile: M of S, N of P V
constexpr int TILE = 64;                     // KV tokens per tile
constexpr int STAGES = NUM_STAGES;
constexpr int STAGE_BYTES = MlaWgmmaStageBytes(KV_FORMAT_FP8);  // 36864
constexpr bool Q_SPLIT = Q_MODE == Q_MODE_BF16;
// Whether the scorer publishes per-warp "a maximum moved" flags, so that the
// accumulators read the rescale factors only when one did. Only with Q in
// one term, where the accumulators' issue sets the tile: with Q in two the
// scorer's softmax is the critical chain and the vote on it cost 1-5 %
// (RESULTS.md v37).
constexpr bool MOVED_FLAGS = !Q_SPLIT;
constexpr int CHUNK_BYTES = 64 * 16;                      // 64 rows x 16 bytes
constexpr int Q8_BYTES = HEAD_DIM_QK / 16 * CHUNK_BYTES;  // 64 x 576 codes
constexpr int P_BYTES = TILE / 8 * CHUNK_BYTES;           // 64 x 64 f16
constexpr int STEP_BYTES = 2 * CHUNK_BYTES;               // a k32 step of Q codes, a k16 step of P
constexpr int K8_STEPS = HEAD_DIM_QK / 32;                // 18
constexpr float Q_LO_WEIGHT = 1.0f / 16.0f;
constexpr int TOKEN_CHUNKS = HEAD_DIM_QK / 16;  // 36 chunks of 16 codes
// Registers: 65536 / 384 = 168 per thread at launch; the scorer gives some
// back so that each accumulator can hold its 128 accumulators, two k-steps'
// A fragments (two groups of MMAs in flight) and the next k-step's codes. At
// 136 / 184 ptxas serialized every wgmma of the kernel for want of registers
// (info C7512, which tests/unit/jit_compile_test.cc looks for).
constexpr int SCORER_REGISTERS = 120;
constexpr int ACC_REGISTERS = 192;
static_assert(SCORER_REGISTERS + 2 * ACC_REGISTERS <= 3 * 168,
              "the warpgroups' registers fit what the CTA holds at launch");
static_assert(!ELIGIBLE || (STAGES >= 2 && STAGES * STAGE_BYTES + 2 * Q8_BYTES + 2 * P_BYTES +
                                                   3 * ROWS * 4 + 2 * 4 * 4 + (STAGES + 4) * 8 <=
                                               MlaWgmmaRowsWsSmemBytes(STAGES)),
              "the carve-up fits what the host allocates");

struct Smem {
  u8* kv;        // STAGES tiles as stored (MlaWgmmaFp8Offset)
  u8* q;         // Q codes (MlaRowsQ8Offset); bf16 Q: the low term Q8_BYTES on
  float* qs;     // a8: [64] each query row's scale (QScaleFromAmax), where bf16
                 // Q keeps its low term
  u8* p;         // 2 x P (64 rows x 64 tokens f16, MlaRowsChunkedOffset)
  float* alpha;  // 2 x [64] rescale factors of the rows for a tile
  float* red;    // [64] row sums at the end of an item; first [8] amax of Q, [8] its scale
  u32* moved;    // 2 x [4] per scorer warp: a row's maximum moved on the tile (alpha != 1)
  u64* kfull;    // [STAGES]
  u64* pfull;    // [2]
  u64* pempty;   // [2]
};

MLA_INLINE Smem CarveSmem(u8* base) {
  Smem m;
  m.kv = base;
  m.q = m.kv + STAGES * STAGE_BYTES;
  m.qs = reinterpret_cast<float*>(m.q + Q8_BYTES);
  m.p = m.q + 2 * Q8_BYTES;
  m.alpha = reinterpret_cast<float*>(m.p + 2 * P_BYTES);
  m.red = m.alpha + 2 * ROWS;
  m.moved = reinterpret_cast<u32*>(m.red + ROWS);
  m.kfull = reinterpret_cast<u64*>(m.moved + 2 * 4);
  m.pfull = m.kfull + STAGES;
  m.pempty = m.pfull + 2;
  return m;
}

// The accumulating warpgroups' own barrier (named barrier 1, 256 threads).
MLA_INLINE void SyncAccumulators() { asm volatile("bar.sync 1, 256;\n" ::: "memory"); }

// Stage, P buffer and phase parities of the CTA's tile number g.
MLA_INLINE int StageOf(int g) { return g % STAGES; }
MLA_INLINE u32 StageParity(int g) { return static_cast<u32>(g / STAGES) & 1u; }
MLA_INLINE u32 PParity(int g) { return static_cast<u32>(g >> 1) & 1u; }

// A chunked operand (Q, P): K-major, core matrices 1024 bytes apart along K.
MLA_INLINE Desc KMajor(const u8* base) { return Desc(base, CHUNK_BYTES, 128); }

// ---- the accumulating warpgroups' loads ----------------------------------------

// Starts copying KV positions [j0, j0 + TILE) below kv_hi into `stage`
// (positions past kv_hi are zero-filled; their scores are masked). Thread c
// (0..255) copies tokens c / 8 + 32 pass, chunks c % 8 + 8 i: eight lanes copy
// 128 contiguous bytes of a token into 8 different bank groups.
MLA_INLINE void CopyTile(const MlaDecodeParams& p, const MlaSeqInfo& s, int j0, int kv_hi,
                         u8* stage, int c) {
  const u8* kv = static_cast<const u8*>(p.kv);
  const int first = c & 7;
  // Both tokens' slots (flat) or page ids (paged) before any copy: with P V
  // in flight, ptxas otherwise waits for each page-table lookup in turn, and
  // page ids take half the registers of slots, which spilled (RESULTS.md v23).
  long long slot[TILE / 32];
  int page[TILE / 32];
#pragma unroll
  for (int pass = 0; pass < TILE / 32; ++pass) {
    const int j = j0 + (c >> 3) + 32 * pass, at = j < kv_hi ? j : j0;
    if (PAGE_SIZE == 0) {
      slot[pass] = KvSlot<PAGE_SIZE>(p, s, at);
    } else {
      page[pass] = KvPage<PAGE_SIZE>(p, s, at);
    }
  }
#pragma unroll
  for (int pass = 0; pass < TILE / 32; ++pass) {
    const int tok = (c >> 3) + 32 * pass, j = j0 + tok;
    const bool valid = j < kv_hi;
    const long long at =
        PAGE_SIZE == 0 ? slot[pass] : KvSlotOnPage<PAGE_SIZE>(s, page[pass], valid ? j : j0);
    const u8* src = kv + at * 576 + first * 16;
#pragma unroll
    for (int i = 0; i < (TOKEN_CHUNKS + 7) / 8; ++i) {
      if (first + 8 * i < TOKEN_CHUNKS) {
        mla_wgmma::CpAsync16Line(stage + MlaWgmmaFp8Offset(tok, first + 8 * i), src + i * 128,
                                 valid);
      }
    }
  }
}

// Tile j0 into `stage`, completing `bar`'s phase of ACC_WARPS arrivals: by
// tensor copies where TmaTile allows (thread 0 issues them, arms `bar` for
// their bytes and makes every arrival), else by CopyTile's cp.async (each
// thread's copies tracked on `bar`, one arrival per warp).
MLA_INLINE void IssueTile(const MlaDecodeParams& p, const MlaSeqInfo& s, int j0, int kv_hi,
                          u8* stage, u64* bar, int c) {
  int slot = 0;
  if (TmaTile(p, s, j0, kv_hi, slot)) {
    if (c == 0) {
      CopyKvTileTma(p, slot, stage, bar);  // one arrival
      mla_wgmma::MbarArriveCount(bar, ACC_WARPS - 1);
    }
    return;
  }
  CopyTile(p, s, j0, kv_hi, stage, c);
  mla_wgmma::CpAsyncTrackOnBarrier(bar);
  mla_wgmma::MbarArriveWarp(bar);
}

// Q rows [row_start, row_start + 64) -> the Q operand(s), by the accumulating
// warpgroups (c = 0..255: row c / 4, its 16-byte chunks c % 4 + 4 i). bf16 Q
// is scaled by a power of two and split into two e4m3 terms (as the swap-AB
// path does: exact from 2^-13 of its largest magnitude up), a8 becomes its
// codes, each row divided by its own scale (into Smem::qs). Returns the
// factor that undoes the power-of-two scaling in the scores.
MLA_INLINE float LoadQ(const MlaDecodeParams& p, const MlaSeqInfo& s, int row_start, const Smem& sm,
                       int c) {
  constexpr int PASSES = mla_wgmma::ROWS_Q_PASSES;
  const int row = c >> 2, sub = c & 3;
  uint4 v[PASSES];
  mla_wgmma::LoadQRowChunks(p, s, row_start, row, sub, v);
  float inv_scale = 1.0f;  // a8: QInverseScale of the row's scale
  if (!Q_SPLIT) {
    const float q_scale = mla_wgmma::QuadQRowScale(v);
    if (sub == 0) sm.qs[row] = q_scale;
    inv_scale = QInverseScale(q_scale);
  }
  float up = 1.0f, back = 1.0f;
  if (Q_SPLIT) {
    float amax = mla_wgmma::WarpQAbsMax(v);
    if ((c & 31) == 0) sm.red[c >> 5] = amax;
    SyncAccumulators();  // red is next written after the item's tiles
#pragma unroll
    for (int w = 0; w < ACC_THREADS / 32; ++w) amax = fmaxf(amax, sm.red[w]);
    mla_wgmma::PowerOfTwoRangeScale(amax, mla_wgmma::E4M3_Q_TOP, up, back);
  }
  u8* dst = sm.q + MlaRowsQ8Offset(row, sub, 0);
#pragma unroll
  for (int i = 0; i < PASSES; ++i) {
    const u32 w[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
    u32 hi[4], lo[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float x0 = Bf16ToFloat(w[j] & 0xffffu), x1 = Bf16ToFloat(w[j] >> 16);
      const u32 both = Q_SPLIT ? mla_wgmma::SplitE4m3x2(x0 * up, x1 * up)
                               : mla_wgmma::E4m3x2(x0 * inv_scale, x1 * inv_scale);
      hi[j] = both & 0xffffu;
      lo[j] = both >> 16;
    }
    u8* at = dst + MlaRowsQ8Offset(0, 0, i);
    *reinterpret_cast<uint2*>(at) = make_uint2(hi[0] | (hi[1] << 16), hi[2] | (hi[3] << 16));
    if (Q_SPLIT) {
      *reinterpret_cast<uint2*>(at + Q8_BYTES) =
          make_uint2(lo[0] | (lo[1] << 16), lo[2] | (lo[3] << 16));
    }
  }
  return back;
}

// V^T codes of one k-step: tokens 16 step + 2 quad + {0, 1, 8, 9}, this
// thread's 8 dims of each.
struct VCodes {
  uint2 t[4];
};
MLA_INLINE VCodes LoadVCodes(const u8* stage, const int (&off)[2], int step) {
  VCodes v;
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    v.t[t] = *reinterpret_cast<const uint2*>(stage + off[t % 2] + (16 * step + 8 * (t / 2)) * 128);
  }
  return v;
}
// -> the f16 A fragments of M blocks 0..3: block b takes dims 2b, 2b + 1
// (rows r and r + 8) of the four tokens, byte pairs interleaved so that one
// conversion yields each register.
MLA_INLINE void VFragments(const VCodes& v, u32 (&a)[4][4]) {
#pragma unroll
  for (int b = 0; b < 4; ++b) {
    const u32 sel = b % 2 == 0 ? 0x5140u : 0x7362u;
    const u32 w0 = b < 2 ? v.t[0].x : v.t[0].y, w1 = b < 2 ? v.t[1].x : v.t[1].y;
    const u32 w2 = b < 2 ? v.t[2].x : v.t[2].y, w3 = b < 2 ? v.t[3].x : v.t[3].y;
    Fp8x4ToF16x4(MlaPrmt(w0, w1, sel), a[b][0], a[b][1]);
    Fp8x4ToF16x4(MlaPrmt(w2, w3, sel), a[b][2], a[b][3]);
  }
}

// Timeline stamps (mla_timeline.cuh; nothing unless MLA_TIMELINE is set):
// the scorer's by thread 0 (role 0), the accumulators' by the first lane of
// each of their warps (roles 1..8; role 1 is thread 128).
MLA_INLINE void ScorerStamp(int g, int event) { mla_timeline::Stamp(0, 0, g, event); }
MLA_INLINE void AccumulatorStamp(int g, int event) {
  const int warp = (threadIdx.x - WG_THREADS) >> 5;
  mla_timeline::Stamp(1 + warp, WG_THREADS + 32 * warp, g, event);
}

// ---- the scorer ------------------------------------------------------------------

// Waits until tile g (the item's tile t) has landed in its stage. cp.async
// writes are generic proxy writes, which the fence orders before this
// warpgroup's wgmma reads; tensor copies need no fence (mla_wgmma_tma.cuh).
MLA_INLINE const u8* WaitForTile(const MlaDecodeParams& p, const MlaSeqInfo& s, const Smem& sm,
                                 const mla_wgmma::ItemRange& range, int g, int t) {
  MbarWait(&sm.kfull[StageOf(g)], StageParity(g));
  if (mla_wgmma::MayBeCpAsyncTile(p, s, range.kv_lo + t * TILE, range.kv_hi)) FenceProxyAsync();
  return sm.kv + StageOf(g) * STAGE_BYTES;
}

// Issues S of the tile in `stage` into (hi, lo): 18 k32 steps, 16 in the
// 128-byte-swizzled blocks and two in the rope block (MlaWgmmaFp8KStepOffset).
MLA_INLINE void IssueS(const Smem& sm, const u8* stage, float (&hi)[32], float (&lo)[32]) {
  const Desc q_hi = KMajor(sm.q), q_lo = KMajor(sm.q + Q8_BYTES);
  const Desc k128 = mla_wgmma::SwizzledDesc(stage, 16, 1024, 1);
  const Desc k64 = mla_wgmma::SwizzledDesc(stage + kMlaWgmmaFp8RopeBlock, 16, 512, 2);
  Fence();
#pragma unroll
  for (int k = 0; k < K8_STEPS; ++k) {
    const Desc b = k < 16 ? k128.At(MlaWgmmaFp8KStepOffset(k))
                          : k64.At(MlaWgmmaFp8KStepOffset(k) - kMlaWgmmaFp8RopeBlock);
    SsE4m3<64>(hi, q_hi.At(k * STEP_BYTES), b, k > 0);
    if (Q_SPLIT) SsE4m3<64>(lo, q_lo.At(k * STEP_BYTES), b, k > 0);
  }
  Commit();
}

// Accumulator layout of m64nN (S here, O^T in the accumulators): thread (warp
// w of its warpgroup, lane = 4 r + quad) holds rows 16 w + r (h = 0) and
// 16 w + r + 8 (h = 1), columns 8 j + 2 quad + e, in register 4 j + 2 h + e.
struct ScoreState {
  float m[2], l[2];
};

MLA_INLINE void ScoreItem(const MlaDecodeParams& p, const MlaWorkItem& item, const MlaSeqInfo& s,
                          const Smem& sm, const float (&score_scale)[2],
                          const mla_wgmma::ItemRange& range, int g0, ScoreState& st) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int r = lane >> 2, quad = lane & 3;
  const int row0 = 16 * warp + r;  // this thread's rows: row0, row0 + 8
  int lim[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    lim[h] = min(range.kv_hi, VisibleKv<NUM_HEADS, CAUSAL>(s, item.row_start + row0 + 8 * h));
  }
  st.m[0] = st.m[1] = NegInf();
  st.l[0] = st.l[1] = 0.0f;
  const int n = range.num_tiles;
  if (n == 0) return;
  float hi[32], lo[32];
  const u8* first = WaitForTile(p, s, sm, range, g0, 0);
  ScorerStamp(g0, mla_timeline::kTileLanded);
  IssueS(sm, first, hi, lo);
  ScorerStamp(g0, mla_timeline::kSIssued);
  for (int t = 0; t < n; ++t) {
    const int g = g0 + t;
    Wait<0>();
    ScorerStamp(g, mla_timeline::kSDone);
    PinAccumulators(hi);
    if (Q_SPLIT) PinAccumulators(lo);
    float sc[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) sc[i] = Q_SPLIT ? hi[i] + lo[i] * Q_LO_WEIGHT : hi[i];

    // ---- online softmax per row; P and the rescale factors to smem ----
    const int j0 = range.kv_lo + t * TILE + 2 * quad;
    MaskScores(sc, lim, j0, range.kv_lo + (t + 1) * TILE > min(lim[0], lim[1]));
    const int b = g & 1;
    MbarWait(&sm.pempty[b], PParity(g) ^ 1u);  // P V of tile g - 2 is done with buffer b
    ScorerStamp(g, mla_timeline::kPBufferFree);
    const float m_before[2] = {st.m[0], st.m[1]};
    SoftmaxRowsToP(sc, score_scale, st.m, st.l, sm.p + b * P_BYTES, sm.alpha + b * ROWS, row0,
                   quad);
    if (MOVED_FLAGS) {
      // One word per warp tells the accumulators whether any rescale factor
      // of the tile differs from 1 (a moved maximum), so that they read the
      // factors only then (published by the pfull arrival below).
      const bool moved =
          __any_sync(0xffffffffu, st.m[0] != m_before[0] || st.m[1] != m_before[1]);
      if (lane == 0) sm.moved[4 * b + warp] = moved ? 1u : 0u;
    }
    FenceProxyAsync();  // P -> the accumulators' wgmma reads
    mla_wgmma::MbarArriveWarp(&sm.pfull[b]);
    ScorerStamp(g, mla_timeline::kPWritten);
    // S of the next tile goes to the tensor cores ahead of P V of this one
    // (the accumulators see P a little later), so that this warpgroup's next
    // softmax runs while they multiply.
    if (t + 1 < n) {
      const u8* next = WaitForTile(p, s, sm, range, g + 1, t + 1);
      ScorerStamp(g + 1, mla_timeline::kTileLanded);
      IssueS(sm, next, hi, lo);
      ScorerStamp(g + 1, mla_timeline::kSIssued);
    }
  }
}

// ---- the accumulators --------------------------------------------------------------

// Warpgroup a (0, 1) of the accumulators: O^T for dims 256 a .. 256 a + 255
// over the item's tiles, and the tiles' copies.
MLA_INLINE void AccumulateItem(const MlaDecodeParams& p, const MlaSeqInfo& s, const Smem& sm,
                               const mla_wgmma::ItemRange& range, int g0, float (&o)[4][32]) {
  const int c = threadIdx.x - WG_THREADS;  // 0..255
  const int a = c >> 7, warp = (c >> 5) & 3, lane = c & 31;
  const int r = lane >> 2, quad = lane & 3;
  const int n = range.num_tiles;
  int off[2];
#pragma unroll
  for (int odd = 0; odd < 2; ++odd) off[odd] = MlaRowsWsVOffset(a, warp, r, 2 * quad + odd);
#pragma unroll
  for (int b = 0; b < 4; ++b) {
#pragma unroll
    for (int i = 0; i < 32; ++i) o[b][i] = 0.0f;
  }
  VCodes v_next;
  if (n > 0) {
    MbarWait(&sm.kfull[StageOf(g0)], StageParity(g0));
    v_next = LoadVCodes(sm.kv + StageOf(g0) * STAGE_BYTES, off, 0);
  }
  for (int t = 0; t < n; ++t) {
    const int g = g0 + t, b = g & 1;
    const u8* stage = sm.kv + StageOf(g) * STAGE_BYTES;
    AccumulatorStamp(g, mla_timeline::kTileStart);
    MbarWait(&sm.pfull[b], PParity(g));
    AccumulatorStamp(g, mla_timeline::kPSeen);
    // Rescale the rows (columns 8 j + 2 quad + e) when a maximum moved: the
    // scorer's flags say so for the whole tile (uniform over the CTA), or,
    // without them, the factors themselves.
    const float* alpha = sm.alpha + b * ROWS + 2 * quad;
    float2 al[8];
    bool moved = false;
    if (MOVED_FLAGS) {
      const uint4 f = *reinterpret_cast<const uint4*>(sm.moved + 4 * b);
      moved = (f.x | f.y | f.z | f.w) != 0u;
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        al[j] = *reinterpret_cast<const float2*>(alpha + 8 * j);
        moved |= al[j].x != 1.0f || al[j].y != 1.0f;
      }
      moved = __any_sync(0xffffffffu, moved);
    }
    if (moved) {
      if (MOVED_FLAGS) {
#pragma unroll
        for (int j = 0; j < 8; ++j) al[j] = *reinterpret_cast<const float2*>(alpha + 8 * j);
      }
#pragma unroll
      for (int blk = 0; blk < 4; ++blk) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          o[blk][4 * j] *= al[j].x;
          o[blk][4 * j + 1] *= al[j].y;
          o[blk][4 * j + 2] *= al[j].x;
          o[blk][4 * j + 3] *= al[j].y;
        }
      }
    }
    const Desc p_desc = KMajor(sm.p + b * P_BYTES);
#pragma unroll
    for (int step = 0; step < TILE / 16; ++step) {
      u32 frag[4][4];
      VFragments(v_next, frag);
      if (step + 1 < TILE / 16) {
        v_next = LoadVCodes(stage, off, step + 1);
      } else if (t + 1 < n) {  // the next tile's first codes, ahead of this tile's tail
        MbarWait(&sm.kfull[StageOf(g + 1)], StageParity(g + 1));
        v_next = LoadVCodes(sm.kv + StageOf(g + 1) * STAGE_BYTES, off, 0);
      }
      Fence();
#pragma unroll
      for (int blk = 0; blk < 4; ++blk)
        RsM64N64K16(o[blk], frag[blk], p_desc.At(step * STEP_BYTES), 1);
      Commit();
      if (step + 1 < TILE / 16) Wait<1>();  // the last group is waited for below
      if (step == 0) AccumulatorStamp(g, mla_timeline::kFirstGroupDone);
    }
    AccumulatorStamp(g, mla_timeline::kLastGroupIssued);
    // Every thread of both warpgroups has read its codes of tile g, and S of
    // it is done (P was written after it): the stage takes tile g + STAGES.
    // (The fence: this thread's cp.async writes of tile g, which it waited
    // for, come before tensor copies into the stage; a tile that came by
    // tensor copies has no generic writes to order.)
    if (mla_wgmma::KV_TMA &&
        mla_wgmma::MayBeCpAsyncTile(p, s, range.kv_lo + t * TILE, range.kv_hi)) {
      FenceProxyAsync();
    }
    SyncAccumulators();
    if (t + STAGES < n) {
      IssueTile(p, s, range.kv_lo + (t + STAGES) * TILE, range.kv_hi,
                sm.kv + StageOf(g) * STAGE_BYTES, &sm.kfull[StageOf(g)], c);
    }
    AccumulatorStamp(g, mla_timeline::kStageHandedOver);
    Wait<0>();
    AccumulatorStamp(g, mla_timeline::kDrained);
#pragma unroll
    for (int blk = 0; blk < 4; ++blk) PinAccumulators(o[blk]);
    mla_wgmma::MbarArriveWarp(&sm.pempty[b]);
  }
}

// ---- one work item, per role ------------------------------------------------------
// Both roles pass the same three CTA barriers per item: (1) the previous item
// is done with Q, P, the rescale factors and the sums; (2) Q is written;
// (3) the row sums are written. Each role runs its own loop from the start
// (DecodeCta), so that ptxas gives each the registers its setmaxnreg sets.

MLA_INLINE void ScorerItem(const MlaDecodeParams& p, const MlaWorkItem& item, const MlaSeqInfo& s,
                           const Smem& sm, int g) {
  const mla_wgmma::ItemRange range = mla_wgmma::RangeOf(item, s, ROWS);
  const int rows_total = s.q_len * NUM_HEADS;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int r = lane >> 2, quad = lane & 3;
  float score_scale[2];  // of this thread's rows 16 warp + r + 8 h
  score_scale[0] = score_scale[1] = p.sm_scale * LOG2E * p.kv_scale;
  __syncthreads();  // (1)
  __syncthreads();  // (2)
  if (range.num_tiles > 0) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // Q's range scale (bf16 Q) or the row's own scale (a8).
      score_scale[h] *= Q_SPLIT ? sm.red[ACC_THREADS / 32] : sm.qs[16 * warp + r + 8 * h];
    }
  }
  ScoreState st;
  ScoreItem(p, item, s, sm, score_scale, range, g, st);
  // Row sums for the accumulators; the LSE.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = st.l[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int row = 16 * warp + r + 8 * h;
    if (quad == 0) {
      sm.red[row] = sum;
      const float lse = sum > 0.0f ? (st.m[h] + log2f(sum)) * LN2 : NegInf();
      if (item.partial >= 0) {
        p.partial_lse[item.partial * ROWS + row] = lse;
      } else if (WRITE_LSE && item.row_start + row < rows_total) {
        p.lse[static_cast<long long>(s.qo_start) * NUM_HEADS + item.row_start + row] = lse;
      }
    }
  }
  __syncthreads();  // (3)
}

MLA_INLINE void AccumulatorItem(const MlaDecodeParams& p, const MlaWorkItem& item,
                                const MlaSeqInfo& s, const Smem& sm, int g) {
  const mla_wgmma::ItemRange range = mla_wgmma::RangeOf(item, s, ROWS);
  const int n = range.num_tiles;
  const int rows_total = s.q_len * NUM_HEADS;
  const int c = threadIdx.x - WG_THREADS;  // 0..255
  __syncthreads();                         // (1)
  // The first STAGES tiles, then Q.
#pragma unroll
  for (int t = 0; t < STAGES; ++t) {
    if (t < n) {
      IssueTile(p, s, range.kv_lo + t * TILE, range.kv_hi, sm.kv + StageOf(g + t) * STAGE_BYTES,
                &sm.kfull[StageOf(g + t)], c);
    }
  }
  if (n > 0) {
    const float back = LoadQ(p, s, item.row_start, sm, c);
    if (c == 0) sm.red[ACC_THREADS / 32] = back;
    FenceProxyAsync();  // Q -> the scorer's wgmma reads
  }
  __syncthreads();  // (2)
  float o[4][32];
  AccumulateItem(p, s, sm, range, g, o);
  __syncthreads();  // (3)

  // ---- normalise and write this warpgroup's 256 dims of the 64 rows ----
  // Partials are kept before kv_scale (mla_common.cuh).
  const int a = c >> 7, warp = (c >> 5) & 3, lane = c & 31;
  const int r = lane >> 2, quad = lane & 3;
  const float v_scale = item.partial < 0 ? p.kv_scale : 1.0f;
  const int dim0 = MlaRowsWsDimBase(a, warp, r);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int row = 8 * j + 2 * quad + e;
      const float sum = sm.red[row];
      const float inv = sum > 0.0f ? v_scale / sum : 0.0f;
      // Dims dim0 + 2 blk + h are o[blk][4 j + 2 h + e].
      float x[8];
#pragma unroll
      for (int blk = 0; blk < 4; ++blk) {
        x[2 * blk] = o[blk][4 * j + e] * inv;
        x[2 * blk + 1] = o[blk][4 * j + 2 + e] * inv;
      }
      if (item.partial >= 0) {
        if (MLA_ABLATE_ROWS_PARTIALS) continue;
        u16* to = reinterpret_cast<u16*>(p.partial_o) +
                  (static_cast<long long>(item.partial) * ROWS + row) * HEAD_DIM_V + dim0;
        *reinterpret_cast<uint4*>(to) =
            make_uint4(PackPartial2(x[0], x[1]), PackPartial2(x[2], x[3]),
                       PackPartial2(x[4], x[5]), PackPartial2(x[6], x[7]));
      } else if (item.row_start + row < rows_total) {
        u16* to =
            static_cast<u16*>(p.out) +
            (static_cast<long long>(s.qo_start) * NUM_HEADS + item.row_start + row) * HEAD_DIM_V +
            dim0;
        *reinterpret_cast<uint4*>(to) = make_uint4(PackBf16x2(x[0], x[1]), PackBf16x2(x[2], x[3]),
                                                   PackBf16x2(x[4], x[5]), PackBf16x2(x[6], x[7]));
      }
    }
  }
}

MLA_INLINE void DecodeCta(const MlaDecodeParams& p) {
  extern __shared__ __align__(1024) u8 mla_smem[];
  const Smem sm = CarveSmem(mla_smem);
  if (threadIdx.x == 0) {
    // One arrival per warp (MbarArriveWarp).
    for (int s = 0; s < STAGES; ++s) MbarInit(&sm.kfull[s], ACC_WARPS);
    for (int b = 0; b < 2; ++b) {
      MbarInit(&sm.pfull[b], WG_THREADS / 32);
      MbarInit(&sm.pempty[b], ACC_WARPS);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    mla_timeline::BeginLaunch();
    if (mla_wgmma::KV_TMA && p.kv_map_rows > 0) {
      mla_wgmma::PrefetchTensorMap(&p.kv_maps[0]);
      mla_wgmma::PrefetchTensorMap(&p.kv_maps[1]);
    }
  }
  __syncthreads();
  int g = 0;      // the CTA's tiles so far
  int items = 0;  // and work items (the timeline's count)
  if (threadIdx.x < WG_THREADS) {
    SetMaxRegisters<SCORER_REGISTERS, false>();
    mla_wgmma::ForEachWorkItem(p, [&](const MlaWorkItem& item, const MlaSeqInfo& seq,
                                      const MlaWorkItem& next, MlaSeqInfo& next_seq) {
      mla_timeline::GridItemStart(items, mla_wgmma::RangeOf(item, seq, ROWS).num_tiles);
      ScorerItem(p, item, seq, sm, g);
      mla_timeline::GridItemEnd(items++);  // (the scorer's end of it)
      next_seq = LoadSeq(p, next);
      g += mla_wgmma::RangeOf(item, seq, ROWS).num_tiles;
    });
  } else {
    SetMaxRegisters<ACC_REGISTERS, true>();
    mla_wgmma::ForEachWorkItem(p, [&](const MlaWorkItem& item, const MlaSeqInfo& seq,
                                      const MlaWorkItem& next, MlaSeqInfo& next_seq) {
      AccumulatorItem(p, item, seq, sm, g);
      next_seq = LoadSeq(p, next);
      g += mla_wgmma::RangeOf(item, seq, ROWS).num_tiles;
    });
    mla_timeline::EndLaunch(WG_THREADS);  // after the item's last barrier: the scorer is done too
    mla_timeline::GridExit(WG_THREADS);
  }
}

}  // namespace mla_wgmma_rows_ws

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_DECODE_WGMMA_ROWS_WS_CUH_
