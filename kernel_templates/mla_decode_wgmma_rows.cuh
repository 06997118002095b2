// Hopper (sm_90a) MLA decode for tiles of 64 query rows: warpgroup MMA with
// the rows as M and both operands in shared memory, for fp8 and bf16 KV.
//
// Sequences with more than 32 query rows (16 heads x 4 tokens, 32 x 2, 128
// heads; 33..63 rows leave part of the tile empty) fill wgmma's M = 64, so the
// products run the natural way:
//   S [64 rows x 64 tokens] = Q [64 x 576] . K^T [576 x 64]
//   O [64 rows x 512 dims] += P [64 x 64]  . V   [64 x 512]
// The swap-AB path (mla_decode_wgmma.cuh) turns KV bytes into A fragments in
// registers, per warpgroup and per product, for 16 or 32 rows: 128 rows there
// convert each fp8 byte eight times. Here a KV tile becomes a 16-bit operand in
// shared memory once per 64 rows (fp8 codes converted once, bf16 copied as it
// is) and all four products read it from there.
//
// A CTA is two warpgroups (256 threads), one CTA per SM (MlaWgmmaRowsSmemBytes),
// with two operand tiles: tile t is read while tile t + 1 is being written.
// bf16 work items of 8 tiles or more (SEESAW_MIN_TILES) instead take the
// seesaw schedule of mla_decode_wgmma_rows_seesaw.cuh (the warpgroups score
// alternate tiles); what follows is the two-stage schedule, which every other
// item runs.
//   warpgroup 0: S = Q K^T (36 k-steps of m64n64k16), the online softmax, and
//                P and the rows' rescale factors into shared memory
//   warpgroup 1, meanwhile: fp8 converts tile t + 1, already in registers,
//                into the other operand tile; bf16 tiles arrive by cp.async,
//                which every thread issues one tile ahead
//   both:        O[:, 256 wg .. 256 wg + 255] = alpha O + P V (m64n256k16);
//                fp8: warpgroup 1 issues the loads of tile t + 2 between
//                issuing P V and waiting for it (and asks L2 for tile t + 3)
// a8 (fp8 KV, Q quantised to fp8) instead runs S as an fp8 wgmma on the tile
// as stored: warpgroup 1 copies raw tiles by cp.async (tile t + 1 under P V
// of tile t) and converts only V into an f16 tile while warpgroup 0 runs S
// and the softmax (FP8_S below).
// fp8 conversion (cvt to f16x2, which measures as 16 per clock per SM) would
// otherwise cost about as much as S itself; here it runs beside S and the
// softmax. (An earlier version staged fp8 tiles in shared memory and converted
// them with all 256 threads between the copy and S: 406 us on
// (128,4,8192,16).) Loads issued earlier, during S, measured slower, most
// likely as their data returns through the L1/shared-memory path that S
// reads its operands from.
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
#include "mla_wgmma_rows_common.cuh"
#include "mla_wgmma_rows_layout.h"
#include "mla_wgmma_ss.cuh"
#include "mla_wgmma_tma.cuh"

namespace mla_wgmma_rows {

using mla_wgmma::Commit;
using mla_wgmma::Desc;
using mla_wgmma::Fence;
using mla_wgmma::FenceProxyAsync;
using mla_wgmma::FP8;
using mla_wgmma::MaskScores;
using mla_wgmma::PackOperand;  // f16 for fp8 KV, bf16 for bf16 KV
using mla_wgmma::PinAccumulators;
using mla_wgmma::SoftmaxRowsToP;
using mla_wgmma::STAGES;
using mla_wgmma::Wait;
using mla_wgmma_ss::SsE4m3;
using mla_wgmma_ss::SsM64N256K16;
using mla_wgmma_ss::SsM64N64K16;

constexpr bool ELIGIBLE = MlaWgmmaRowsEligible(KV_FORMAT, BLOCK_M, BLOCK_N, NUM_WARPS);
constexpr int NUM_THREADS = 256;
constexpr int ROWS = 64;              // query rows per tile: the wgmma M
constexpr int TILE = 64;              // KV tokens per tile
constexpr bool BF16_OPS = !FP8;       // operand type: bf16 for bf16 KV, else f16
constexpr int CHUNK_BYTES = 64 * 16;  // one column chunk of 64 entries
constexpr int OPERAND_BYTES = HEAD_DIM_QK / 8 * CHUNK_BYTES;  // 64 x 576 16-bit: 73728
constexpr int BLOCK_BYTES = TILE * 128;      // one 64-dim block of the swizzled KV tile
constexpr int K_STEPS = HEAD_DIM_QK / 16;    // 36
constexpr int STEP_BYTES = 2 * CHUNK_BYTES;  // one k16 step of a K-major operand
constexpr int TOKEN_CHUNKS = KvTokenBytes<KV_FORMAT>::value / 16;  // 36 fp8, 72 bf16

// a8 (fp8 KV, Q quantised to fp8): S is an fp8 wgmma straight from the tile as
// stored. Q is 64 x 576 codes in column chunks of 16 codes; the raw tile is
// the KV tile's bytes in the 128-byte swizzle (blocks of 128 codes, 8 KB
// apart; the fifth block half used); only V (dims 0..511) is converted, into
// one f16 V tile. Shared memory: 2 raw tiles, the V tile, Q, P, 512 bytes.
constexpr bool FP8_S = FP8 && Q_MODE == Q_MODE_FP8;
static_assert(!ELIGIBLE || !FP8_S || STAGES == 2, "a8 alternates two raw tiles");
constexpr int RAW_BYTES = (HEAD_DIM_QK + 127) / 128 * BLOCK_BYTES;  // 40960
constexpr int V_BYTES = HEAD_DIM_V / 64 * BLOCK_BYTES;              // 65536
constexpr int Q8_BYTES = HEAD_DIM_QK / 16 * CHUNK_BYTES;            // 36864
constexpr int K8_STEPS = HEAD_DIM_QK / 32;                          // 18
static_assert(!FP8_S || 2 * RAW_BYTES + V_BYTES + Q8_BYTES + TILE * ROWS * 2 + 3 * ROWS * 4 <=
                            (1 + STAGES) * OPERAND_BYTES + TILE * ROWS * 2 + 3 * ROWS * 4,
              "the a8 layout fits the 64-row path's shared memory");

struct Smem {
  u8* q;         // Q operand
  u8* kv;        // STAGES KV operand tiles (swizzled); a8: 2 raw fp8 tiles
  u8* v;         // a8: the f16 V operand tile
  u8* p;         // P operand (64 x 64)
  float* alpha;  // [64] rescale of the rows' running O for the current tile
  float* red;    // [64] row sums at the end; [8] per-warp amax of Q
  float* qs;     // a8: [64] each query row's scale (QScaleFromAmax), by LoadQ
};

MLA_INLINE Smem CarveSmem(u8* base) {
  Smem m;
  if (FP8_S) {  // the swizzled tiles first, at multiples of 1024 bytes
    m.kv = base;
    m.v = m.kv + 2 * RAW_BYTES;
    m.q = m.v + V_BYTES;
    m.p = m.q + Q8_BYTES;
  } else {
    m.q = base;
    m.kv = m.q + OPERAND_BYTES;
    m.v = nullptr;
    m.p = m.kv + STAGES * OPERAND_BYTES;
  }
  m.alpha = reinterpret_cast<float*>(m.p + TILE * ROWS * 2);
  m.red = m.alpha + ROWS;
  m.qs = m.red + ROWS;
  return m;
}

// A chunked tile (Q, P) as a K-major operand; k-step k is .At(k * STEP_BYTES).
MLA_INLINE Desc KMajor(const u8* base) { return Desc(base, CHUNK_BYTES, 128); }
// The swizzled KV tile (descriptor layout type 1: 128-byte swizzle).
MLA_INLINE Desc Swizzled128(const u8* base, u32 lbo, u32 sbo) {
  return mla_wgmma::SwizzledDesc(base, lbo, sbo, 1);
}
// K for S: k-step k is .At(MlaRowsKStepOffset(k)).
MLA_INLINE Desc KOperand(const u8* kv) { return Swizzled128(kv, 16, 1024); }
// V for P V, dims [256 wg, 256 wg + 256): k-step k (16 tokens) is
// .At(MlaRowsVStepOffset(k)).
MLA_INLINE Desc VOperand(const u8* kv, int wg) {
  return Swizzled128(kv + MlaRowsVBase(wg), BLOCK_BYTES, 1024);
}

// ---- loads --------------------------------------------------------------

// bf16: starts copying KV positions [j0, j0 + TILE) into operand tile `buf`
// (cp.async; positions at or past kv_hi are zero-filled, never read). Each
// 8-lane quarter of a warp copies block b of one token: 128 contiguous bytes,
// one 4-sector request, one shared-memory wavefront thanks to the swizzle.
MLA_INLINE void IssueTile(const MlaDecodeParams& p, const MlaSeqInfo& s, int j0, int kv_hi, int buf,
                          const Smem& sm) {
  constexpr int TOKEN_BYTES = KvTokenBytes<KV_FORMAT>::value;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int c0 = lane & 7;
  const u8* kv = static_cast<const u8*>(p.kv);
#pragma unroll
  for (int pass = 0; pass < TILE / 32; ++pass) {
    const int tok = MlaRowsCopyToken(warp, lane, pass);
    const int j = j0 + tok;
    const bool valid = j < kv_hi;
    const u8* src = kv + KvSlot<PAGE_SIZE>(p, s, valid ? j : j0) * TOKEN_BYTES + c0 * 16;
    u8* dst = sm.kv + buf * OPERAND_BYTES + MlaRowsKvRowOffset(tok, c0);
#pragma unroll
    for (int b = 0; b < HEAD_DIM_QK / 64; ++b) {
      mla_wgmma::CpAsync16(dst + b * BLOCK_BYTES, src + b * 128, valid);
    }
  }
}

MLA_INLINE uint4 LoadGlobal16(const u8* src) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(src));
  return v;
}

// fp8, warpgroup 1: each quarter warp takes four tokens as two pairs, and
// each lane nine 16-byte chunks of a pair (MlaRowsFp8Token, mla_wgmma_rows_layout.h):
// 72 registers hold a whole tile, so that loads for the next tile can be in
// flight while the warpgroup waits for P V with its 128 accumulators.
constexpr int FP8_PAIRS = TILE / 32;                  // token pairs per quarter warp
constexpr int FP8_PAIR_LOADS = 2 * TOKEN_CHUNKS / 8;  // 16-byte chunks per lane and pair: 9
static_assert(!FP8 || 2 * TOKEN_CHUNKS % 8 == 0, "a pair's chunks spread evenly over 8 lanes");

// Asks L2 for tile [j0, j0 + TILE) (each token's 576 bytes span at most five
// 128-byte lines), so that LoadRawTile finds it there a tile later.
MLA_INLINE void PrefetchTile(const MlaDecodeParams& p, const MlaSeqInfo& s, int j0, int kv_hi) {
  const int lane = threadIdx.x & 31, c0 = lane & 7;
  const int t0 = MlaRowsFp8Token((threadIdx.x >> 5) & 3, lane, 0, 0);
  if (c0 >= 5) return;
#pragma unroll
  for (int k = 0; k < TILE / 16; ++k) {
    const int j = j0 + t0 + 16 * k;
    if (j < kv_hi) {
      const u8* src = static_cast<const u8*>(p.kv) + KvSlot<PAGE_SIZE>(p, s, j) * 576 + c0 * 128;
      asm volatile("prefetch.global.L2 [%0];\n" ::"l"(src));
    }
  }
}

// fp8, warpgroup 1: a tile as stored, in registers.
struct RawTile {
  uint4 v[FP8_PAIRS][FP8_PAIR_LOADS];
};

// Starts loading KV positions [j0, j0 + TILE) into `r` (positions at or past
// kv_hi, and threads with `load` false, get zeros). Every thread assigns all
// of `r`, so that the value is dead wherever it is not used and warpgroup 0
// does not carry it through S and the softmax.
MLA_INLINE void LoadRawTile(const MlaDecodeParams& p, const MlaSeqInfo& s, int j0, int kv_hi,
                            bool load, RawTile& r) {
  const int lane = threadIdx.x & 31, c0 = lane & 7;
  const int t0 = MlaRowsFp8Token((threadIdx.x >> 5) & 3, lane, 0, 0);
  const u8* kv = static_cast<const u8*>(p.kv);
#pragma unroll
  for (int pair = 0; pair < FP8_PAIRS; ++pair) {
    // Chunk i of this lane is at 16 (c0 + 8 i - 36 half) in token `half`.
    const int ja = j0 + t0 + 32 * pair, jb = ja + 16;
    const bool valid_a = load && ja < kv_hi, valid_b = load && jb < kv_hi;
    // No page id is read for a position that is not loaded: j0 itself may lie
    // past the sequence (a tile beyond the last, or warpgroup 0's call).
    const long long slot_a = valid_a ? KvSlot<PAGE_SIZE>(p, s, ja) : 0;
    const long long slot_b = valid_b ? KvSlot<PAGE_SIZE>(p, s, jb) : 1;
    const u8* src_a = kv + slot_a * 576 + c0 * 16;
    const u8* src_b = kv + (slot_b - 1) * 576 + c0 * 16;
#pragma unroll
    for (int i = 0; i < FP8_PAIR_LOADS; ++i) {
      const bool b = MlaRowsFp8Half(c0, i) == 1;
      r.v[pair][i] = (b ? valid_b : valid_a) ? LoadGlobal16((b ? src_b : src_a) + i * 128)
                                             : make_uint4(0, 0, 0, 0);
    }
  }
}

// 16 fp8 codes -> two chunks of 8 f16: `a` the one a lane stores first. With
// `swap` (lanes c0 >= 4 of a quarter warp) that is the second half of the
// codes, so that each store of a quarter reaches 8 bank groups.
MLA_INLINE void ConvertChunk(const uint4& w, bool swap, uint4& a, uint4& b) {
  const u32 x0 = swap ? w.z : w.x, x1 = swap ? w.w : w.y;
  const u32 y0 = swap ? w.x : w.z, y1 = swap ? w.y : w.w;
  mla_wgmma::Fp8x4ToF16x4(x0, a.x, a.y);
  mla_wgmma::Fp8x4ToF16x4(x1, a.z, a.w);
  mla_wgmma::Fp8x4ToF16x4(y0, b.x, b.y);
  mla_wgmma::Fp8x4ToF16x4(y1, b.z, b.w);
}

// Converts `r` into the f16 operand tile at `dst` (mla_wgmma_rows_layout.h).
MLA_INLINE void StoreConverted(const RawTile& r, u8* dst) {
  const int lane = threadIdx.x & 31, c0 = lane & 7;
  const int t0 = MlaRowsFp8Token((threadIdx.x >> 5) & 3, lane, 0, 0);
  const bool swap = c0 >= 4;
#pragma unroll
  for (int pair = 0; pair < FP8_PAIRS; ++pair) {
#pragma unroll
    for (int i = 0; i < FP8_PAIR_LOADS; ++i) {
      const uint4 w = r.v[pair][i];
      uint4 a, b;
      ConvertChunk(w, swap, a, b);
      *reinterpret_cast<uint4*>(dst + MlaRowsFp8StoreOffset(c0, t0, pair, i, 0)) = a;
      *reinterpret_cast<uint4*>(dst + MlaRowsFp8StoreOffset(c0, t0, pair, i, 1)) = b;
    }
  }
}

// a8: starts copying KV positions [j0, j0 + TILE) as stored into raw tile
// `raw` (cp.async, warpgroup 1; positions at or past kv_hi are zero-filled).
// A quarter warp copies one token's 128-byte runs; chunk c of token t lands at
// MlaRowsKvOffset(t, c), the 128-byte swizzle with 16-code chunks.
MLA_INLINE void CopyRawTile(const MlaDecodeParams& p, const MlaSeqInfo& s, int j0, int kv_hi,
                            u8* raw) {
  const int lane = threadIdx.x & 31, c0 = lane & 7;
  const int t0 = MlaRowsFp8Token((threadIdx.x >> 5) & 3, lane, 0, 0);
  const u8* kv = static_cast<const u8*>(p.kv);
#pragma unroll
  for (int k = 0; k < TILE / 16; ++k) {
    const int t = t0 + 16 * k, j = j0 + t;
    const bool valid = j < kv_hi;
    const u8* src = kv + (valid ? KvSlot<PAGE_SIZE>(p, s, j) : 0) * 576 + c0 * 16;
#pragma unroll
    for (int i = 0; i < (TOKEN_CHUNKS + 7) / 8; ++i) {
      if (c0 + 8 * i < TOKEN_CHUNKS) {
        mla_wgmma::CpAsync16(raw + MlaRowsKvOffset(t, c0 + 8 * i), src + i * 128, valid);
      }
    }
  }
}

// a8, warpgroup 1: V (codes of dims 0..511) of raw tile `raw` -> the f16 V
// operand `v` (the 64-row KV operand's first 8 blocks). Lane c0 of a quarter
// reads chunk c0 + 8 i of its token (8 lanes, 8 bank groups) and writes f16
// chunks 2c and 2c + 1, lanes c0 >= 4 the second first, so that each store of
// a quarter also reaches 8 bank groups.
MLA_INLINE void ConvertV(const u8* raw, u8* v) {
  const int lane = threadIdx.x & 31, c0 = lane & 7;
  const int t0 = MlaRowsFp8Token((threadIdx.x >> 5) & 3, lane, 0, 0);
  const bool swap = c0 >= 4;
#pragma unroll
  for (int k = 0; k < TILE / 16; ++k) {
    const int t = t0 + 16 * k;
#pragma unroll
    for (int i = 0; i < HEAD_DIM_V / 128; ++i) {
      const int c = c0 + 8 * i;
      const uint4 w = *reinterpret_cast<const uint4*>(raw + MlaRowsKvOffset(t, c));
      uint4 a, b;
      ConvertChunk(w, swap, a, b);
      const int first = 2 * c + (swap ? 1 : 0), second = 2 * c + (swap ? 0 : 1);
      *reinterpret_cast<uint4*>(v + MlaRowsKvOffset(t, first)) = a;
      *reinterpret_cast<uint4*>(v + MlaRowsKvOffset(t, second)) = b;
    }
  }
}

// a8: two Q values -> their e4m3 codes (divided by the row's scale, rounded
// to nearest even, saturated), low byte first: the same rounding as
// QuantiseQPair.
MLA_INLINE u32 QCodes(float lo, float hi, float inv_scale) {
  return mla_wgmma::E4m3x2(lo * inv_scale, hi * inv_scale);
}

// Q rows [row_start, row_start + 64) -> the Q operand, as f16 scaled by a
// power of two (fp8 KV, like the swap-AB path's LoadQ) or as bf16; a8 rounds
// to the fp8 grid first, each row by its own scale (into Smem::qs). Returns
// the factor that undoes the power-of-two scaling in the scores. Thread (row
// tid / 4, chunks tid % 4 + 4 i): all 18 loads in flight.
MLA_INLINE float LoadQ(const MlaDecodeParams& p, const MlaSeqInfo& s, int row_start,
                       const Smem& sm) {
  constexpr int PASSES = mla_wgmma::ROWS_Q_PASSES;
  const int row = threadIdx.x >> 2, sub = threadIdx.x & 3;
  uint4 v[PASSES];
  mla_wgmma::LoadQRowChunks(p, s, row_start, row, sub, v);
  float inv_scale = 1.0f;  // a8: QInverseScale of the row's scale
  if (Q_MODE == Q_MODE_FP8) {
    const float q_scale = mla_wgmma::QuadQRowScale(v);
    if (sub == 0) sm.qs[row] = q_scale;
    inv_scale = QInverseScale(q_scale);
  }
  constexpr bool RESCALE = FP8 && Q_MODE == Q_MODE_BF16;
  float up = 1.0f, back = 1.0f;
  if (RESCALE) {
    float amax = mla_wgmma::WarpQAbsMax(v);
    if ((threadIdx.x & 31) == 0) sm.red[threadIdx.x >> 5] = amax;
    __syncthreads();  // red is next written in the epilogue, after more barriers
    amax = sm.red[0];
#pragma unroll
    for (int w = 1; w < NUM_THREADS / 32; ++w) amax = fmaxf(amax, sm.red[w]);
    mla_wgmma::PowerOfTwoRangeScale(amax, mla_wgmma::F16_Q_TOP, up, back);
  }
  if (FP8_S) {
    // 8 codes per 16-byte load: half of the fp8 chunk (sub / 2) + 2 i.
    u8* dst8 = sm.q + MlaRowsQ8Offset(row, sub, 0);
#pragma unroll
    for (int i = 0; i < PASSES; ++i) {
      const u32 w[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
      u32 c[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        c[j] = QCodes(Bf16ToFloat(w[j] & 0xffffu), Bf16ToFloat(w[j] >> 16), inv_scale);
      }
      *reinterpret_cast<uint2*>(dst8 + MlaRowsQ8Offset(0, 0, i)) =
          make_uint2(c[0] | (c[1] << 16), c[2] | (c[3] << 16));
    }
    return back;
  }
  u8* dst = sm.q + MlaRowsChunkedOffset(row, sub);
#pragma unroll
  for (int i = 0; i < PASSES; ++i) {
    u32 w[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float lo = Bf16ToFloat(w[j] & 0xffffu), hi = Bf16ToFloat(w[j] >> 16);
      if (RESCALE) {
        w[j] = PackF16x2(lo * up, hi * up);
      } else if (Q_MODE == Q_MODE_FP8) {
        QuantiseQPair<Q_MODE>(lo, hi, inv_scale);
        w[j] = PackOperand(lo, hi);
      }
    }
    *reinterpret_cast<uint4*>(dst + i * 4 * CHUNK_BYTES) = make_uint4(w[0], w[1], w[2], w[3]);
  }
  return back;
}

// ---- one work item --------------------------------------------------------

MLA_INLINE void StoreRows(const MlaDecodeParams& p, const MlaWorkItem& item, const MlaSeqInfo& s,
                          const float (&o)[128], const float (&m)[2], const float (&sums)[2]);

// Timeline stamps (mla_timeline.cuh; nothing unless MLA_TIMELINE is set) of
// the CTA's two-stage tile `tile`, by the first thread of each warpgroup.
MLA_INLINE void TwoStageStamp(int wg, int tile, int event) {
  mla_timeline::Stamp(4 * wg, 128 * wg, tile, event);
}

// Accumulator layout of m64nN (both S and O): thread (warp w of its
// warpgroup, lane = 4 r + quad) holds rows 16 w + r (h = 0) and 16 w + r + 8
// (h = 1), columns 8 j + 2 quad + e, in register 4 j + 2 h + e.
// `stamp0`: the CTA's two-stage tiles before this item (the timeline's count).
MLA_INLINE void ProcessItem(const MlaDecodeParams& p, const MlaWorkItem& item, const MlaSeqInfo& s,
                            const Smem& sm, const MlaWorkItem& next, MlaSeqInfo& next_seq,
                            int stamp0) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int wg = warp >> 2, r = lane >> 2, quad = lane & 3;
  const int row0 = 16 * (warp & 3) + r;  // this thread's rows: row0, row0 + 8
  static_assert(TILE == mla_wgmma::TILE, "RangeOf counts tiles of 64 tokens");
  const mla_wgmma::ItemRange range = mla_wgmma::RangeOf(item, s, ROWS);
  const int kv_lo = range.kv_lo, kv_hi = range.kv_hi, num_tiles = range.num_tiles;

  int lim[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    lim[h] = min(kv_hi, VisibleKv<NUM_HEADS, CAUSAL>(s, item.row_start + row0 + 8 * h));
  }
  // Per row: a8 multiplies in each row's own scale once Q is stored.
  float score_scale[2];
  score_scale[0] = score_scale[1] = p.sm_scale * LOG2E * (FP8 ? p.kv_scale : 1.0f);

  float m[2] = {NegInf(), NegInf()}, l[2] = {0.0f, 0.0f};
  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.0f;

  RawTile raw;      // fp8: the next tile in flight (warpgroup 1)
  __syncthreads();  // the previous item is done with shared memory
  if (num_tiles > 0) {
    if (FP8_S) {
      if (wg == 1) {
        CopyRawTile(p, s, kv_lo, kv_hi, sm.kv);
        mla_wgmma::CpAsyncCommit();
        if (num_tiles > 1) PrefetchTile(p, s, kv_lo + TILE, kv_hi);
      }
    } else if (FP8) {
      if (wg == 1) {
        LoadRawTile(p, s, kv_lo, kv_hi, true, raw);
        if (num_tiles > 2) PrefetchTile(p, s, kv_lo + 2 * TILE, kv_hi);
        StoreConverted(raw, sm.kv);
      }
      LoadRawTile(p, s, kv_lo + TILE, kv_hi, wg == 1 && num_tiles > 1, raw);
    } else {
#pragma unroll
      for (int st = 0; st < STAGES - 1; ++st) {
        if (st < num_tiles) IssueTile(p, s, kv_lo + st * TILE, kv_hi, st, sm);
        mla_wgmma::CpAsyncCommit();
      }
    }
    const float back = LoadQ(p, s, item.row_start, sm);
    score_scale[0] *= back;
    score_scale[1] *= back;
  }
  next_seq = LoadSeq(p, next);
  const Desc q_desc = KMajor(sm.q), p_desc = KMajor(sm.p);

  for (int t = 0; t < num_tiles; ++t) {
    const int buf = t % STAGES;
    if (!FP8) mla_wgmma::CpAsyncWait<STAGES - 2>();
    if (FP8_S) mla_wgmma::CpAsyncWait<0>();  // warpgroup 1's copy of raw tile t
    TwoStageStamp(wg, stamp0 + t, mla_timeline::kTsLanded);
    FenceProxyAsync();  // Q, operand tile t (cp.async or converted) -> wgmma reads
    __syncthreads();    // (1) tile t is complete; everyone is done with tile t - 1
    TwoStageStamp(wg, stamp0 + t, mla_timeline::kTsSynced);
    if (Q_MODE == Q_MODE_FP8 && t == 0) {  // LoadQ's row scales: past the barrier
      score_scale[0] *= sm.qs[row0];
      score_scale[1] *= sm.qs[row0 + 8];
    }
    if (!FP8) {
      if (t + STAGES - 1 < num_tiles) {
        IssueTile(p, s, kv_lo + (t + STAGES - 1) * TILE, kv_hi, (t + STAGES - 1) % STAGES, sm);
      }
      mla_wgmma::CpAsyncCommit();
      if (MLA_ABLATE_MATH) continue;
    }
    const u8* kv = FP8_S ? sm.kv + buf * RAW_BYTES : sm.kv + buf * OPERAND_BYTES;
    const Desc k_desc = KOperand(kv), v_desc = VOperand(FP8_S ? sm.v : kv, wg);

    if (wg == 0) {
      // ---- S = Q K^T ----
      float sc[32];
      Fence();
      if (FP8_S) {
#pragma unroll
        for (int k = 0; k < K8_STEPS; ++k) {
          SsE4m3<64>(sc, q_desc.At(k * STEP_BYTES), k_desc.At(MlaRowsKStepOffset(k)), k > 0);
        }
      } else {
#pragma unroll
        for (int k = 0; k < K_STEPS; ++k) {
          SsM64N64K16<BF16_OPS>(sc, q_desc.At(k * STEP_BYTES), k_desc.At(MlaRowsKStepOffset(k)),
                                k > 0);
        }
      }
      Commit();
      Wait<0>();
      PinAccumulators(sc);
      TwoStageStamp(0, stamp0 + t, mla_timeline::kTsSDone);

      // ---- online softmax per row; P and the rescale factors to smem ----
      MaskScores(sc, lim, kv_lo + t * TILE + 2 * quad,
                 kv_lo + (t + 1) * TILE > min(lim[0], lim[1]));
      SoftmaxRowsToP(sc, score_scale, m, l, sm.p, sm.alpha, row0, quad);
      FenceProxyAsync();  // P -> wgmma reads
      TwoStageStamp(0, stamp0 + t, mla_timeline::kTsPOut);
    } else if (FP8_S) {
      // V of tile t into the V operand: free since barrier (1), as P V of
      // tile t - 1 was its last reader.
      ConvertV(kv, sm.v);
      FenceProxyAsync();  // V -> wgmma reads
    } else if (FP8 && t + 1 < num_tiles) {
      // Tile t + 1 (loaded under P V of tile t - 1) into the other operand
      // tile: free since barrier (1), as P V of tile t - 1 was its last reader.
      StoreConverted(raw, sm.kv + ((t + 1) % STAGES) * OPERAND_BYTES);
    }
    __syncthreads();  // (2) P and alpha are written
    TwoStageStamp(wg, stamp0 + t, mla_timeline::kTsPSynced);

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
      SsM64N256K16<BF16_OPS>(o, p_desc.At(k * STEP_BYTES), v_desc.At(MlaRowsVStepOffset(k)), 1);
    }
    Commit();
    if (FP8_S && wg == 1) {
      // Under P V: raw tile t + 1 into the other raw buffer (its readers, S
      // and the V conversion of tile t - 1, are done; an L2 hit since the
      // prefetch a tile earlier), and L2 asked for tile t + 2. Copied right
      // after barrier (1) instead, so that it lands during S: 313 against
      // 301 us on (128,4,8192,16).
      if (t + 1 < num_tiles) {
        CopyRawTile(p, s, kv_lo + (t + 1) * TILE, kv_hi, sm.kv + (1 - buf) * RAW_BYTES);
      }
      mla_wgmma::CpAsyncCommit();
      if (t + 2 < num_tiles) PrefetchTile(p, s, kv_lo + (t + 2) * TILE, kv_hi);
    }
    if (FP8 && !FP8_S) {
      // Under P V: warpgroup 1 starts loading tile t + 2 (converted in the
      // next iteration) and asks L2 for tile t + 3.
      LoadRawTile(p, s, kv_lo + (t + 2) * TILE, kv_hi, wg == 1 && t + 2 < num_tiles, raw);
      if (wg == 1 && t + 3 < num_tiles) PrefetchTile(p, s, kv_lo + (t + 3) * TILE, kv_hi);
    }
    TwoStageStamp(wg, stamp0 + t, mla_timeline::kTsPvIssued);
    Wait<0>();
    PinAccumulators(o);
    TwoStageStamp(wg, stamp0 + t, mla_timeline::kTsPvDone);
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
  const float sums[2] = {sm.red[row0], sm.red[row0 + 8]};
  StoreRows(p, item, s, o, m, sums);
}

// The epilogue of a work item: this thread's rows (row0, row0 + 8) of O,
// divided by their sums, as output rows or as a partial with its LSE; m is
// the rows' maximum (log2 units, to within RESCALE_SLACK).
MLA_INLINE void StoreRows(const MlaDecodeParams& p, const MlaWorkItem& item, const MlaSeqInfo& s,
                          const float (&o)[128], const float (&m)[2], const float (&sums)[2]) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int wg = warp >> 2, r = lane >> 2, quad = lane & 3;
  const int row0 = 16 * (warp & 3) + r;
  const int rows_total = s.q_len * NUM_HEADS;
  // Partials are kept before kv_scale (mla_common.cuh).
  const float v_scale = FP8 && item.partial < 0 ? p.kv_scale : 1.0f;
  const int col0 = wg * 256 + 2 * quad;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int n = row0 + 8 * h;
    const float sum = sums[h];
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
      if (MLA_ABLATE_ROWS_PARTIALS) continue;
      const long long e = (static_cast<long long>(item.partial) * ROWS + n) * HEAD_DIM_V;
      // 16-bit pairs: quads q and q ^ 1 swap one pair of each two 8-column
      // groups, so that each lane stores 4 consecutive columns and each row
      // of a warp's store is one whole 32-byte sector.
      const bool odd = quad & 1;
#pragma unroll
      for (int k = 0; k < 16; ++k) {
        const u32 w0 = PackPartial2(o[8 * k + 2 * h] * inv, o[8 * k + 2 * h + 1] * inv);
        const u32 w1 = PackPartial2(o[8 * k + 4 + 2 * h] * inv, o[8 * k + 5 + 2 * h] * inv);
        const u32 got = __shfl_xor_sync(0xffffffffu, odd ? w0 : w1, 1);
        // Even quads: group 2k, their columns, then the partner's; odd
        // quads: group 2k + 1, the partner's columns first.
        const int col = wg * 256 + 16 * k + (odd ? 8 + 2 * (quad - 1) : 2 * quad);
        *reinterpret_cast<uint2*>(reinterpret_cast<u16*>(p.partial_o) + e + col) =
            odd ? make_uint2(got, w1) : make_uint2(w0, got);
      }
      if (wg == 0 && quad == 0) {
        p.partial_lse[item.partial * ROWS + n] = sum > 0.0f ? (m[h] + log2f(sum)) * LN2 : NegInf();
      }
    }
  }
}

}  // namespace mla_wgmma_rows

#include "mla_decode_wgmma_rows_seesaw.cuh"

namespace mla_wgmma_rows {

MLA_INLINE void DecodeCta(const MlaDecodeParams& p) {
  // The swizzle pattern repeats every 1024 bytes of address: the operand tiles
  // (at multiples of 73728 from the base) need a 1024-byte aligned base.
  extern __shared__ __align__(1024) u8 mla_smem[];
  const Smem sm = CarveSmem(mla_smem);
  mla_timeline::BeginLaunch();  // (the first item starts with a barrier)
  int seesaw_pairs = 0;         // the timeline's count of the seesaw's pairs,
  int two_stage_tiles = 0;      // of the two-stage schedule's tiles
  int items = 0;                // and of the work items
  mla_wgmma::ForEachWorkItem(p, [&](const MlaWorkItem& item, const MlaSeqInfo& seq,
                                    const MlaWorkItem& next, MlaSeqInfo& next_seq) {
    // bf16 items of many tiles take the seesaw; short ones (split pieces)
    // the two-stage schedule, whose start is shorter (RESULTS.md v41).
    const int num_tiles = mla_wgmma::RangeOf(item, seq, ROWS).num_tiles;
    mla_timeline::GridItemStart(items, num_tiles);
    mla_timeline::Stamp(mla_timeline::ROWS_ITEM_ROLE, 0, items, mla_timeline::kRiStart);
    if (SEESAW && num_tiles >= SEESAW_MIN_TILES) {
      ProcessItemSeesaw(p, item, seq, sm, next, next_seq, seesaw_pairs);
      seesaw_pairs += (num_tiles + 1) / 2;
    } else {
      ProcessItem(p, item, seq, sm, next, next_seq, two_stage_tiles);
      two_stage_tiles += num_tiles;
    }
    mla_timeline::Stamp(mla_timeline::ROWS_ITEM_ROLE, 0, items, mla_timeline::kRiEnd);
    mla_timeline::GridItemEnd(items++);
  });
  mla_timeline::EndLaunch(0);  // after the last item's closing barrier
  mla_timeline::GridExit(0);
}

}  // namespace mla_wgmma_rows

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_DECODE_WGMMA_ROWS_CUH_
