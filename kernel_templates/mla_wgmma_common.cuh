// Shared pieces of the sm_90a warpgroup-MMA decode path (mla_decode_wgmma.cuh):
// its constants and shared-memory carve-up, and the wgmma primitives (matrix
// descriptors, fences, the MMA itself) as inline PTX.
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_COMMON_CUH_
#define MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_COMMON_CUH_

#include "mla_common.cuh"
#include "mla_decode_mma.cuh"  // cp.async, f16 packing and fp8 conversion helpers
#include "mla_wgmma_layout.h"

namespace mla_wgmma {

using mla_mma::CpAsync16;
using mla_mma::CpAsyncCommit;
using mla_mma::CpAsyncWait;
using mla_mma::Fp8x4ToF16x4;
using mla_mma::SmemAddr;

constexpr int NUM_THREADS = 128;  // a warpgroup that runs the products
// bf16 tiles of 32 rows on 8 warps: two such warpgroups, rows 16 g .. 16 g + 15
// of the tile for warpgroup g (MlaWgmmaRowGroups), each with its own Q^T, P^T
// and row statistics, sharing the KV stages and the CTA's barriers, so that
// each KV tile is copied into shared memory once for 32 rows and two chains
// of products and softmax run on the SM.
constexpr int ROW_GROUPS = MlaWgmmaRowGroups(KV_FORMAT, BLOCK_M, NUM_WARPS);
constexpr int N = BLOCK_M / ROW_GROUPS;  // query rows per warpgroup: the wgmma N
constexpr int TILE = 64;          // KV tokens per tile: the wgmma M
constexpr bool FP8 = KV_FORMAT == KV_FORMAT_FP8;
// MXFP4 (mla_wgmma_mxfp4.cuh): one or two more warpgroups copy tiles as
// stored into their own stages (the mma.sync path's staging, MX_STAGE_BYTES
// each) and convert each once into one of two e4m3 tiles in fp8's stage
// layout, scaled by a power of two per tile (Smem::mx_shift); the first
// warpgroup runs both products on those as for fp8 KV.
constexpr bool MX = KV_FORMAT == KV_FORMAT_MXFP4;
// The products read e4m3 tiles: fp8 as stored, MXFP4 converted.
constexpr bool E4M3_TILES = FP8 || MX;
constexpr int ESIZE = E4M3_TILES ? 1 : 2;  // bytes per KV element (as the products read it)
constexpr int K_STEPS = HEAD_DIM_QK / 16;  // 36
// MXFP4: an e4m3 tile, or an item's staged output rows (MlaWgmmaMxTileBytes).
constexpr int STAGE_BYTES = MX ? MlaWgmmaMxTileBytes(BLOCK_M) : MlaWgmmaStageBytes(KV_FORMAT);
constexpr int STAGES = NUM_STAGES;
constexpr int KV_TILES = MX ? 2 : STAGES;                            // tiles in the staging layout
constexpr int MX_STAGE_BYTES = TILE * MlaRawTokenStride(KV_FORMAT);  // 0 unless MXFP4
// MXFP4: converting warpgroups (one per e4m3 tile with 12 warps, else one
// for both), each with its own share of the raw stages.
constexpr int MX_CONVERTERS = MX ? (NUM_WARPS == 12 ? 2 : 1) : 0;
// (1 off the MXFP4 path, where no converter runs: a divisor in code it never executes)
constexpr int MX_STAGES_EACH = MX ? STAGES / MX_CONVERTERS : 1;
constexpr int MX_SHARE_BLOCKS = HEAD_DIM_QK / 32 / 2;  // scale blocks per converting thread
constexpr int ROWS_PER_THREAD = N / 4;                 // accumulator columns a thread holds
constexpr int CORE_BYTES = 128;                        // one 8 x 16-byte core matrix
constexpr int STEP_BYTES = N * 32;  // one k16 step of P^T (the Q area holds K_STEPS of them)
// fp8 KV: S = K Q^T is an e4m3 wgmma on the tile as stored, both operands in
// shared memory (mla_wgmma_layout.h), with Q as e4m3 codes: a8's own codes,
// or bf16 Q as two terms hi + lo / 16 (Q_SPLIT, StoreQ), side by side as 2N
// columns of the one product. The two terms hold every bf16 value of the
// tile exactly from 2^-13 of its largest magnitude up (tests/unit/q_split_test.cc).
constexpr bool Q_SPLIT = E4M3_TILES && Q_MODE == Q_MODE_BF16;
constexpr int NS = Q_SPLIT ? 2 * N : N;     // fp8: the wgmma N of S
constexpr int K8_STEPS = HEAD_DIM_QK / 32;  // fp8: k32 steps of S
constexpr int Q8_STEP_BYTES = NS * 32;      // fp8: one k32 step of Q^T
constexpr float Q_LO_WEIGHT = 1.0f / 16.0f;
// bf16 tiles: independent accumulator sets of S (registers allowing).
constexpr int S_SETS = N == 16 ? 4 : 2;
// Tiles copied whole by tensor maps where the host encoded them
// (MlaKvTensorMapsEligible; mla_wgmma_tma.cuh): fp8 and bf16.
constexpr bool KV_TMA = MlaKvTensorMapsEligible(KV_FORMAT, BLOCK_M, BLOCK_N, NUM_WARPS, PAGE_SIZE);
// Floats per row of the epilogue's staged output (in the KV stages): 512 and
// 4 more, so that the rows' 16-byte writes spread over the banks (with
// MlaWgmmaStagedChunk, mla_wgmma_layout.h).
constexpr int EPILOGUE_STRIDE = kMlaWgmmaEpilogueStride;
static_assert(EPILOGUE_STRIDE == HEAD_DIM_V + 4, "a row of 512 values and 4 more");

// The kernel runs this path only for shapes MlaWgmmaEligible accepts (one
// warpgroup, 64-token tiles, 16 or 32 rows); the file is
// compiled for every sm_90a shape, so nothing here may assert more.
constexpr bool ELIGIBLE = MlaWgmmaEligible(KV_FORMAT, BLOCK_M, BLOCK_N, NUM_WARPS);
static_assert(!ELIGIBLE || BLOCK_M * EPILOGUE_STRIDE * 4 <= (MX ? 1 : KV_TILES) * STAGE_BYTES,
              "the staged output fits the KV stages (MXFP4: one tile)");
static_assert(!ELIGIBLE || !MX || (MX_STAGES_EACH >= 1 && STAGES % MX_CONVERTERS == 0),
              "each converting warpgroup has the same number of raw stages");

struct Smem {
  // q, p and red are per row group (GroupSmem): ROW_GROUPS of each in a row.
  u8* q;       // Q^T: bf16 MlaWgmmaQ16Offset, e4m3 codes MlaWgmmaQ8Offset
  u8* raw;     // [KV_TILES][STAGE_BYTES] KV tiles (as stored, swizzled; MXFP4: converted)
  u8* mx;      // MXFP4: [STAGES][MX_STAGE_BYTES] tiles as stored
  u8* p;       // [TILE/16][N/8][2][8][8] f16/bf16: P^T in core matrices
  float* red;  // [4][N] per-warp row maxima / sums
  float* qs;   // a8: [N] each query row's scale (QScaleFromAmax), by StoreQ
  u64* full;   // MXFP4: [2] e4m3 tile b converted (or, for an epilogue, free);
               // fp8: [STAGES] stage b's tensor-map copies landed
  u64* empty;  // MXFP4: [2] e4m3 tile b read
  int* mx_shift;  // MXFP4: [2] tile b's values are its codes times 2^mx_shift[b]
  u32* mx_max;    // MXFP4: [converter][warp] largest scale code of the tile in hand
};

constexpr int Q_GROUP_BYTES = K_STEPS * STEP_BYTES;      // a row group's Q^T
constexpr int P_GROUP_BYTES = (TILE / 16) * STEP_BYTES;  // a row group's P^T
static_assert(Q_GROUP_BYTES % 1024 == 0, "each group's Q^T 1024-byte aligned for its swizzle");

MLA_INLINE Smem CarveSmem(u8* base) {
  static_assert(NS * 32 * K8_STEPS <= K_STEPS * STEP_BYTES, "fp8 Q^T fits the Q area");
  static_assert(STAGE_BYTES % 1024 == 0, "bf16 Q^T's 128-byte swizzle needs it 1024-byte aligned");
  Smem m;
  m.raw = base;  // the swizzled stages first, at multiples of 1024 bytes
  m.q = m.raw + KV_TILES * STAGE_BYTES;
  m.mx = m.q + ROW_GROUPS * Q_GROUP_BYTES;
  m.p = m.mx + (MX ? STAGES * MX_STAGE_BYTES : 0);
  m.red = reinterpret_cast<float*>(m.p + ROW_GROUPS * P_GROUP_BYTES);
  m.qs = m.red + ROW_GROUPS * 4 * N;
  m.full = reinterpret_cast<u64*>(m.qs + ROW_GROUPS * N);
  m.empty = m.full + 2;
  m.mx_shift = reinterpret_cast<int*>(m.empty + 2);
  m.mx_max = reinterpret_cast<u32*>(m.mx_shift + 2);
  return m;
}

// The thread's row group and its index in the group's warpgroup (the
// thread index itself with one group, as every product thread is then in
// the first warpgroup), and the group's view of shared memory.
MLA_INLINE int RowGroup() { return ROW_GROUPS == 1 ? 0 : threadIdx.x / NUM_THREADS; }
MLA_INLINE unsigned GroupTid() { return ROW_GROUPS == 1 ? threadIdx.x : threadIdx.x % NUM_THREADS; }
MLA_INLINE Smem GroupSmem(Smem m, int group) {
  m.q += group * Q_GROUP_BYTES;
  m.p += group * P_GROUP_BYTES;
  m.red += group * 4 * N;
  m.qs += group * N;
  return m;
}

// ---- barriers ---------------------------------------------------------------

// The product warpgroup's barrier: the whole CTA, except for MXFP4, where
// the converting warpgroups run apart (named barrier 1 over 128 threads).
MLA_INLINE void SyncMma() {
  if (MX) {
    asm volatile("bar.sync 1, 128;\n" ::: "memory");
  } else {
    __syncthreads();
  }
}
// The same, returning whether x was true in any of its threads.
MLA_INLINE bool SyncMmaOr(bool x) {
  if (!MX) return __syncthreads_or(x);
  u32 any;
  asm volatile(
      "{\n.reg .pred p, q;\nsetp.ne.u32 p, %1, 0;\nbar.red.or.pred q, 1, 128, p;\n"
      "selp.u32 %0, 1, 0, q;\n}\n"
      : "=r"(any)
      : "r"(static_cast<u32>(x))
      : "memory");
  return any != 0;
}
// Three warpgroups (MXFP4 with two converting warpgroups) start with 168
// registers per thread (65536 / 384, rounded down to a multiple of 8), and the
// CTA owns no more than it got at launch: the converting warpgroups give 40
// back so that the product warpgroup can take 72 (240 + 2 x 128 <= 3 x 168).
// setmaxnreg.inc waits until the registers are free: asking for more would
// hang the CTA.
constexpr int MX_PRODUCT_REGISTERS = 208;
constexpr int MX_CONVERTER_REGISTERS = 144;
static_assert(MX_PRODUCT_REGISTERS + 2 * MX_CONVERTER_REGISTERS <= 3 * 168,
              "the warpgroups' registers fit what the CTA holds at launch");
template <int kRegisters, bool kIncrease>
MLA_INLINE void SetMaxRegisters() {
  if (kIncrease) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
  } else {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
  }
}
MLA_INLINE void MbarInit(u64* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(SmemAddr(bar)), "r"(count)
               : "memory");
}
// Arrives on `bar` (release: this thread's shared-memory accesses before it
// are ordered before the phase completes).
MLA_INLINE void MbarArrive(u64* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(SmemAddr(bar)) : "memory");
}
// Arrives `count` times on `bar` in one operation.
MLA_INLINE void MbarArriveCount(u64* bar, int count) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;\n" ::"r"(SmemAddr(bar)), "r"(count)
               : "memory");
}
// One arrival on `bar` for the whole warp, after every lane's shared-memory
// accesses before it (__syncwarp orders them before lane 0's release): one
// atomic on the barrier's word instead of 32 (no faster measured, RESULTS.md
// v35, but no slower and less work).
MLA_INLINE void MbarArriveWarp(u64* bar) {
  __syncwarp();
  if ((threadIdx.x & 31) == 0) MbarArrive(bar);
}
// Makes `bar`'s current phase also wait for every cp.async this thread issued
// before to land (one more pending arrival now, made when they land), so that
// the phase can count one arrival per warp (MbarArriveWarp after this). The
// copies' writes are then visible to threads that wait on the phase; wgmma
// reads need a proxy fence after that wait.
MLA_INLINE void CpAsyncTrackOnBarrier(u64* bar) {
  asm volatile("cp.async.mbarrier.arrive.shared::cta.b64 [%0];\n" ::"r"(SmemAddr(bar))
               : "memory");
}
// Waits until the phase of `bar` with this parity has completed (acquire).
MLA_INLINE void MbarWait(u64* bar, u32 parity) {
  asm volatile(
      "{\n.reg .pred done;\nMLA_MBAR_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra MLA_MBAR_WAIT;\n}\n" ::"r"(SmemAddr(bar)),
      "r"(parity)
      : "memory");
}
// MXFP4: e4m3 tile use number g (counted over a CTA's work items, one per
// tile and one per epilogue) is tile g % 2, in round g / 2.
MLA_INLINE int MxBuffer(int g) { return g & 1; }
MLA_INLINE u32 MxParity(int g) { return static_cast<u32>(g >> 1) & 1u; }

// The KV range of a work item of `rows` query rows (this path's N, or the
// 64-row path's 64): positions [kv_lo, kv_hi), in num_tiles tiles of 64.
struct ItemRange {
  int kv_lo, kv_hi, num_tiles;
};
MLA_INLINE ItemRange RangeOf(const MlaWorkItem& item, const MlaSeqInfo& s, int rows = N) {
  const int rows_total = s.q_len * NUM_HEADS;
  const int last_row = min(item.row_start + rows, rows_total) - 1;
  ItemRange r;
  r.kv_hi = min(item.kv_end, VisibleKv<NUM_HEADS, CAUSAL>(s, last_row));
  r.kv_lo = item.kv_start;
  r.num_tiles = r.kv_hi > r.kv_lo ? (r.kv_hi - r.kv_lo + TILE - 1) / TILE : 0;
  return r;
}

// ---- warpgroup MMA primitives -------------------------------------------

// Shared-memory matrix descriptor, no swizzle, as two 32-bit words: `lbo`
// bytes between core matrices along K, `sbo` bytes between core matrices
// along N. Shared addresses stay below 2^18, so advancing the start address
// is an add to the low word (Desc::At) with no carry into the offset fields.
// The start address field is 14 bits of (address >> 4): a shared::cta
// address carries the CTA's rank in its cluster from bit 24 up (SASS builds
// it from SR_CgaCtaId), so it is masked to its 18-bit offset first; unmasked,
// the rank of a CTA launched in a cluster spilled into the leading byte offset.
struct Desc {
  u32 lo, hi;
  MLA_INLINE Desc(const void* p, u32 lbo, u32 sbo)
      : lo(((SmemAddr(p) & 0x3ffffu) >> 4) | ((lbo >> 4) << 16)), hi(sbo >> 4) {}
  MLA_INLINE Desc At(int byte_offset) const {
    Desc d = *this;
    d.lo += static_cast<u32>(byte_offset) >> 4;
    return d;
  }
};
// B operand base in the no-swizzle core-matrix layout of Smem::p (k-step s
// is .At(s * STEP_BYTES)) and of e4m3 Q^T (.At(s * Q8_STEP_BYTES)).
MLA_INLINE Desc StepDesc(const u8* base) { return Desc(base, CORE_BYTES, 2 * CORE_BYTES); }
// An operand in a swizzled layout: descriptor layout type 1 (128-byte
// swizzle) or 2 (64-byte swizzle). For a K-major operand `sbo` is the bytes
// between 8-row groups and `lbo` is unused (16): a k-step stays inside one
// swizzle row.
MLA_INLINE Desc SwizzledDesc(const void* base, u32 lbo, u32 sbo, u32 layout_type) {
  Desc d(base, lbo, sbo);
  d.hi |= layout_type << 30;
  return d;
}

MLA_INLINE void Fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
MLA_INLINE void Commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int G>
MLA_INLINE void Wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(G) : "memory");
}
// Generic-proxy shared stores (Q^T, P^T) become visible to wgmma's reads.
MLA_INLINE void FenceProxyAsync() {
  if (MLA_ABLATE_PROXY_FENCES) return;
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// d (+)= A . B for one m64 x N x k16 step; A from registers, B by descriptor;
// accumulate == 0 overwrites d. TYPE: the operand type, f16 or bf16.
#define MLA_WGMMA_M64N16K16(TYPE)                                                              \
  asm volatile(                                                                                \
      "{\n.reg .pred p;\n.reg .b64 desc;\nsetp.ne.b32 p, %14, 0;\nmov.b64 desc, {%12, %13};\n" \
      "wgmma.mma_async.sync.aligned.m64n16k16.f32." TYPE "." TYPE                              \
      " "                                                                                      \
      "{%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, desc, p, 1, 1, 0;\n}\n"                     \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),    \
        "+f"(d[7])                                                                             \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b.lo), "r"(b.hi), "r"(accumulate))
#define MLA_WGMMA_M64N32K16(TYPE)                                                               \
  asm volatile(                                                                                 \
      "{\n.reg .pred p;\n.reg .b64 desc;\nsetp.ne.b32 p, %22, 0;\nmov.b64 desc, {%20, %21};\n"  \
      "wgmma.mma_async.sync.aligned.m64n32k16.f32." TYPE "." TYPE                               \
      " "                                                                                       \
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19}, desc, p, "   \
      "1, 1, 0;\n}\n"                                                                           \
      : "+f"(x[0]), "+f"(x[1]), "+f"(x[2]), "+f"(x[3]), "+f"(x[4]), "+f"(x[5]), "+f"(x[6]),     \
        "+f"(x[7]), "+f"(x[8]), "+f"(x[9]), "+f"(x[10]), "+f"(x[11]), "+f"(x[12]), "+f"(x[13]), \
        "+f"(x[14]), "+f"(x[15])                                                                \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b.lo), "r"(b.hi), "r"(accumulate))
MLA_INLINE void Mma(float (&d)[N / 2], const u32 (&a)[4], Desc b, int accumulate) {
  if (N == 16) {
    if (E4M3_TILES) {
      MLA_WGMMA_M64N16K16("f16");
    } else {
      MLA_WGMMA_M64N16K16("bf16");
    }
  } else {
    float* x = d;  // N == 32: 16 accumulators
    if (E4M3_TILES) {
      MLA_WGMMA_M64N32K16("f16");
    } else {
      MLA_WGMMA_M64N32K16("bf16");
    }
  }
}
#undef MLA_WGMMA_M64N16K16
#undef MLA_WGMMA_M64N32K16

// Ties accumulator registers to the preceding wgmma.wait_group, so that no
// read of them is scheduled before the wait.
template <int K>
MLA_INLINE void PinAccumulators(float (&d)[K]) {
#pragma unroll
  for (int i = 0; i < K; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// 2^x as one MUFU.EX2. exp2f spends four more instructions per call on
// subnormal results; here they flush to zero, which no softmax weight notices
// (a row's largest weight is 1). exp2(-inf) = 0.
MLA_INLINE float Exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

MLA_INLINE u32 PackOperand(float lo, float hi) {
  return E4M3_TILES ? PackF16x2(lo, hi) : PackBf16x2(lo, hi);
}

// Running maximum of |x| over the eight bf16 values of `v`, kept as a bf16x2
// pair (max.bf16x2 drops NaN like fmaxf).
MLA_INLINE void AbsMaxBf16x8(u32& m2, const uint4& v) {
  const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    asm("{\n.reg .b32 a;\nabs.bf16x2 a, %1;\nmax.bf16x2 %0, %0, a;\n}\n" : "+r"(m2) : "r"(w[j]));
  }
}

// Q is scaled by up = 2^e so that its largest magnitude lands in
// [2^top, 2^(top + 1)); `back` = 2^-e undoes it in the scores. fp8 KV with
// f16 products (the 64-row path): top 13, exact for everything above
// amax * 2^-27. Q as e4m3 terms (this path): top 7, inside e4m3's 448, which
// the low term's scaling needs (|lo| <= |x|).
constexpr int F16_Q_TOP = 13;
constexpr int E4M3_Q_TOP = 7;
MLA_INLINE void PowerOfTwoRangeScale(float amax, int top, float& up, float& back) {
  int e = 0;
  if (amax > 0.0f) {
    const int amax_exp = static_cast<int>((__float_as_uint(amax) >> 23) & 0xffu) - 127;
    e = min(max(top - amax_exp, -126), 126);
  }
  up = __uint_as_float(static_cast<u32>(e + 127) << 23);
  back = __uint_as_float(static_cast<u32>(127 - e) << 23);
}
// Two floats -> their e4m3 codes (nearest even, saturated to +-448, NaN kept),
// `lo` in the low byte.
MLA_INLINE u32 E4m3x2(float lo, float hi) {
  u16 codes;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(codes) : "f"(hi), "f"(lo));
  return codes;
}
// bf16 Q (already scaled) as two e4m3 terms x = hi + lo / 16: hi is x rounded
// to e4m3, lo the rounded remainder times 16. Returns hi's and lo's codes of
// (x0, x1) in the low and high 16 bits.
MLA_INLINE u32 SplitE4m3x2(float x0, float x1) {
  const u32 hi = E4m3x2(x0, x1);
  float h0, h1;
  asm("{\n.reg .b32 h2;\n.reg .f16 l, h;\n.reg .b16 c;\ncvt.u16.u32 c, %2;\n"
      "cvt.rn.f16x2.e4m3x2 h2, c;\nmov.b32 {l, h}, h2;\n"
      "cvt.f32.f16 %0, l;\ncvt.f32.f16 %1, h;\n}\n"
      : "=f"(h0), "=f"(h1)
      : "r"(hi));
  const u32 lo = E4m3x2((x0 - h0) * 16.0f, (x1 - h1) * 16.0f);
  return hi | (lo << 16);
}

// A CTA's work items in order: process(item, seq, next, next_seq) runs one
// and resolves the sequence record of `next` (the following item, or the same
// one at the end) into next_seq (LoadSeq: the item's copy; paged layouts read
// its first page id), so that the next item does not start with a dependent
// global round trip.
template <typename Process>
MLA_INLINE void ForEachWorkItem(const MlaDecodeParams& p, Process&& process) {
  const int begin = p.work_indptr[blockIdx.x], end = p.work_indptr[blockIdx.x + 1];
  if (begin >= end) return;
  MlaWorkItem item = p.work[begin];
  MlaSeqInfo seq = LoadSeq(p, item);
  for (int w = begin; w < end; ++w) {
    const MlaWorkItem next = w + 1 < end ? p.work[w + 1] : item;
    MlaSeqInfo next_seq;
    process(item, seq, next, next_seq);
    item = next;
    seq = next_seq;
  }
}

// P^T entries of this thread: k-step `warp`, k = r (low half) and r + 8 (high
// half), column n of n8 block j.
MLA_INLINE void WriteP(const Smem& sm, int warp, int j, int n, int r, u32 packed) {
  u8* pc = sm.p + warp * STEP_BYTES + (j * 2) * CORE_BYTES + n * 16 + r * 2;
  *reinterpret_cast<u16*>(pc) = static_cast<u16>(packed & 0xffffu);
  *reinterpret_cast<u16*>(pc + CORE_BYTES) = static_cast<u16>(packed >> 16);
}

}  // namespace mla_wgmma

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_COMMON_CUH_
