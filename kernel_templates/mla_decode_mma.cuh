// Tensor-core MLA decode path for NVIDIA sm_80 and later (mma.sync m16n8k16
// bf16 with fp32 accumulation, ldmatrix, cp.async double buffering).
//
// CTA of NUM_WARPS warps; the BLOCK_M query rows of a tile form BLOCK_M/16 row
// groups, and the warps of a row group split the work two ways:
//   S = Q K^T   : each warp computes its row group against BLOCK_N / COL_SPLITS
//                 tokens of the KV tile and publishes the scores in shared memory;
//   O += P V    : each warp owns 512 / COL_SPLITS output columns of its rows.
// Every warp of a row group runs the same online softmax on the shared scores
// (identical arithmetic, so identical statistics), keeping the running max and
// sum in registers. fp8 and MXFP4 tiles land raw in shared memory and are
// converted once per tile, fp8 to f16 and MXFP4 to bf16 (exact: every e4m3
// value is an f16 value, every scaled e2m1 value a bf16 value), so both
// products read one 16-bit tile with ldmatrix.
//
// Shared memory: MlaMmaSmemBytes() in mla_params.h (host and device agree).
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_DECODE_MMA_CUH_
#define MLAJIT_KERNEL_TEMPLATES_MLA_DECODE_MMA_CUH_

#include "mla_common.cuh"
#include "mla_mxfp4_lut.h"

namespace mla_mma {

// Twelve warps serve only the sm_90a MXFP4 swap-AB path, which runs instead
// of this one (mla_decode.cu.in refuses them elsewhere); this file is still
// compiled beside it, and lays its warps out as for eight.
constexpr int MMA_WARPS = NUM_WARPS == 12 ? 8 : NUM_WARPS;
constexpr int NUM_THREADS = MMA_WARPS * 32;
constexpr int ROW_GROUPS = BLOCK_M / 16;
constexpr int COL_SPLITS = MMA_WARPS / ROW_GROUPS;
constexpr int S_TOKENS_PER_WARP = BLOCK_N / COL_SPLITS;
constexpr int S_NTILES = S_TOKENS_PER_WARP / 8;
constexpr int V_COLS_PER_WARP = HEAD_DIM_V / COL_SPLITS;
constexpr int V_NTILES = V_COLS_PER_WARP / 8;
constexpr int STRIDE = MLA_SMEM_ROW_ELEMS;  // padded bf16 row: conflict-free ldmatrix
constexpr int S_STRIDE = BLOCK_N + 4;
constexpr int TOKEN_BYTES = KvTokenBytes<KV_FORMAT>::value;
constexpr bool DIRECT_BF16 = KV_FORMAT == KV_FORMAT_BF16;
constexpr int RAW_STRIDE = MlaRawTokenStride(KV_FORMAT);
// fp8 KV runs both products in f16: every e4m3 value is an f16 value, the
// conversion is one instruction per pair, and Q is scaled per tile by a power of
// two into f16's range (exact). bf16 and MXFP4 KV run in bf16.
constexpr bool F16_MMA = KV_FORMAT == KV_FORMAT_FP8;
// With one 16-row group per tile every warp needs all of Q: keep its fragments
// in registers instead of re-reading them from shared memory for every KV tile.
constexpr bool Q_IN_REGS = BLOCK_M == 16;
constexpr int K_STEPS = HEAD_DIM_QK / 16;
constexpr int STAGES = NUM_STAGES;  // KV tiles in flight (raw, or bf16 for bf16 KV)
constexpr int KV_BUFFERS = DIRECT_BF16 ? STAGES : 1;
// MXFP4 tiles whose tokens are consecutive in memory (flat, or pages holding
// whole tiles) are fetched as one 16-byte-aligned byte range with cp.async;
// otherwise token by token.
constexpr bool MX_CONTIGUOUS =
    KV_FORMAT == KV_FORMAT_MXFP4 && (PAGE_SIZE == 0 || PAGE_SIZE % BLOCK_N == 0);

static_assert(BLOCK_M % 16 == 0 && MMA_WARPS % ROW_GROUPS == 0, "row groups must tile the warps");
static_assert(S_TOKENS_PER_WARP % 8 == 0 && S_TOKENS_PER_WARP > 0, "each warp scores n8 tiles");
static_assert(BLOCK_N % 16 == 0, "P V consumes k16 steps");
static_assert(V_COLS_PER_WARP % 16 == 0, "V is read as pairs of n8 tiles");
static_assert(STAGES >= 2, "the tile loop refills one buffer while others are read");

MLA_INLINE u32 SmemAddr(const void* p) { return static_cast<u32>(__cvta_generic_to_shared(p)); }

// The first `bytes` (0..16) of the aligned 16 at src; the rest of dst is
// zero-filled. Only 0 and 16 are used (CpAsync16): a size between, which PTX
// allows, still counts as a 16-byte read for compute-sanitizer, so MXFP4's
// partial chunks are copied exactly instead (CopyChunkEdge).
MLA_INLINE void CpAsyncFirstBytes(void* dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(SmemAddr(dst)), "l"(src),
               "r"(bytes));
}
// src-size 0 zero-fills the destination without reading the source.
MLA_INLINE void CpAsync16(void* dst, const void* src, bool valid) {
  CpAsyncFirstBytes(dst, src, valid ? 16 : 0);
}
MLA_INLINE void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
MLA_INLINE void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

MLA_INLINE void LdMatrixX4(u32 (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddr(p)));
}
MLA_INLINE void LdMatrixX4Trans(u32 (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddr(p)));
}

// d += a * b on the tensor cores, in the operand type of this kernel.
MLA_INLINE void Mma(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  if (F16_MMA) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Two floats as one operand register of this kernel's MMA type.
MLA_INLINE u32 PackOperand(float lo, float hi) {
  return F16_MMA ? PackF16x2(lo, hi) : PackBf16x2(lo, hi);
}

// Four e4m3 codes (lowest byte first) -> four f16 in two registers, exactly;
// NaN stays NaN. The 32-bit word is split into its 16-bit halves by register
// naming (mov.b32 {a, b}), not by shifts and truncations.
MLA_INLINE void Fp8x4ToF16x4(u32 four, u32& lo, u32& hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm("{ .reg .b16 a, b;\n mov.b32 {a, b}, %2;\n cvt.rn.f16x2.e4m3x2 %0, a;\n"
      " cvt.rn.f16x2.e4m3x2 %1, b;\n}\n"
      : "=r"(lo), "=r"(hi)
      : "r"(four));
#else
  lo = PackF16x2(Fp8E4m3ToFloat(four & 0xffu), Fp8E4m3ToFloat((four >> 8) & 0xffu));
  hi = PackF16x2(Fp8E4m3ToFloat((four >> 16) & 0xffu), Fp8E4m3ToFloat(four >> 24));
#endif
}

constexpr int P_STRIDE = BLOCK_N + 8;  // padded: conflict-free ldmatrix of P
// The score area of MlaMmaSmemBytes (BLOCK_M * S_STRIDE floats) holds P in the
// operand type plus two [BLOCK_M][COL_SPLITS] float arrays for the cross-warp
// row max and row sum, and a8's BLOCK_M row scales.
static_assert(BLOCK_M * P_STRIDE * 2 + (2 * COL_SPLITS + 1) * BLOCK_M * 4 <= BLOCK_M * S_STRIDE * 4,
              "P, the row reductions and the row scales fit the score area");

struct Smem {
  u16* q;       // [BLOCK_M][STRIDE]
  u16* kv;      // [KV_BUFFERS][BLOCK_N][STRIDE]
  u8* raw;      // [STAGES][BLOCK_N][RAW_STRIDE] (fp8 / MXFP4 only)
  u16* p;       // [BLOCK_M][P_STRIDE]  probabilities, operand type
  float* rmax;  // [BLOCK_M][COL_SPLITS] each warp's row max over its tokens
  float* rsum;  // [BLOCK_M][COL_SPLITS] each warp's row sum (end of item)
  float* qs;    // a8: [BLOCK_M] each query row's scale (QScaleFromAmax), by LoadQTile
};

MLA_INLINE Smem CarveSmem(u8* base) {
  Smem m;
  m.q = reinterpret_cast<u16*>(base);
  m.kv = m.q + BLOCK_M * STRIDE;
  m.raw = reinterpret_cast<u8*>(m.kv + KV_BUFFERS * BLOCK_N * STRIDE);
  m.p = reinterpret_cast<u16*>(m.raw + (DIRECT_BF16 ? 0 : STAGES * BLOCK_N * RAW_STRIDE));
  m.rmax = reinterpret_cast<float*>(m.p + BLOCK_M * P_STRIDE);
  m.rsum = m.rmax + BLOCK_M * COL_SPLITS;
  m.qs = m.rsum + BLOCK_M * COL_SPLITS;
  return m;
}

// Q rows of the tile -> shared bf16; rows past the sequence are zero. bf16 by
// cp.async. a8: each row's scale first (a warp per row: one warp reduction,
// into Smem::qs), then each value as its fp8 code's value times the row's
// scale, exact in bf16 as the scale is a power of two (QScaleFromAmax), so
// that the scores need no factor per row. (A factor per row in the scores
// spilled sm_89's 16-row kernels, which hold Q's fragments in registers.)
MLA_INLINE void LoadQTile(const MlaDecodeParams& p, const MlaSeqInfo& s, int row_start,
                          const Smem& sm) {
  const int rows_total = s.q_len * NUM_HEADS;
  const u16* q = static_cast<const u16*>(p.q);
  if (Q_MODE == Q_MODE_FP8) {
    // The rows' scales first (a warp per row), then their codes.
    constexpr int CHUNKS = HEAD_DIM_QK / 8;  // 16-byte chunks a row: 72
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int r = warp; r < BLOCK_M; r += MMA_WARPS) {
      const int row = row_start + r;
      float amax = 0.0f;  // (fmaxf drops NaN, as the other paths' max does)
      if (row < rows_total) {
        const u16* src = q + (static_cast<long long>(s.qo_start) * NUM_HEADS + row) * HEAD_DIM_QK;
        for (int c = lane; c < CHUNKS; c += 32) {
          const uint4 v = *reinterpret_cast<const uint4*>(src + c * 8);
          const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            amax = fmaxf(amax,
                         fmaxf(fabsf(Bf16ToFloat(w[i] & 0xffffu)), fabsf(Bf16ToFloat(w[i] >> 16))));
          }
        }
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
      if (lane == 0) sm.qs[r] = QScaleFromAmax(amax);
    }
    __syncthreads();
  }
  for (int idx = threadIdx.x; idx < BLOCK_M * (HEAD_DIM_QK / 8); idx += NUM_THREADS) {
    const int r = idx / (HEAD_DIM_QK / 8), chunk = idx % (HEAD_DIM_QK / 8);
    const int row = row_start + r;
    const bool valid = row < rows_total;
    const u16* src =
        q + (static_cast<long long>(s.qo_start) * NUM_HEADS + (valid ? row : 0)) * HEAD_DIM_QK +
        chunk * 8;
    u16* dst = sm.q + r * STRIDE + chunk * 8;
    if (Q_MODE == Q_MODE_BF16) {
      CpAsync16(dst, valid ? src : q, valid);
    } else {
      const float q_scale = sm.qs[r], inv_scale = QInverseScale(q_scale);
      uint4 v = valid ? *reinterpret_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
      u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float lo = QuantiseQ<Q_MODE>(Bf16ToFloat(w[i] & 0xffffu), inv_scale) * q_scale;
        const float hi = QuantiseQ<Q_MODE>(Bf16ToFloat(w[i] >> 16), inv_scale) * q_scale;
        w[i] = PackBf16x2(lo, hi);
      }
      *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
    }
  }
}

// cp.async of 4 or 8 bytes at their own alignment (through L1: .cg is 16 only).
template <int BYTES>
MLA_INLINE void CpAsyncSmall(void* dst, const void* src) {
  static_assert(BYTES == 4 || BYTES == 8, "cp.async.ca copies 4, 8 or 16 bytes");
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(SmemAddr(dst)), "l"(src),
               "n"(BYTES));
}

// MXFP4 records are 306 bytes at 2-byte alignment, so a run of them starts
// and ends inside 16-byte chunks. A whole-chunk copy of those edge chunks
// would read up to 14 bytes before or after the run: harmless on the
// hardware (a chunk never crosses a page), but outside the caller's buffer
// where the run is its first or last record, which compute-sanitizer reports
// (and where it stops the kernel). The edges are copied exactly instead: 8-
// and 4-byte cp.async at their alignment, and the one 2-byte piece a
// record's edges hold (306 is 2 mod 4: a record either starts or ends at 2
// mod 4) by a plain load whose shared-memory store waits (MxPieces) until the
// stage is about to be read, so that no thread stalls on it when issuing.
// A thread holds up to two pending pieces per stage (MxPieces): in the copy
// below, 128 threads meet a given chunk of a 20-chunk span at most twice per
// 64-token tile (a third stores one at once). A piece's value register is
// written by its load and read only by its store: any instruction reading it
// earlier (packing it with its offset, moving it, selecting it) waits for the
// load; packing it cost pages of 1 and 16 tokens 13-27 % (RESULTS.md v32).
// Even so, exact edges on every record made pages of 1 token 1.5-2x slower
// than whole chunks (v32): where the caller gives kv's size, IssueMxTile
// copies whole chunks inside it and exact edges only at the pool's ends.
struct MxPieces {
  static constexpr u32 kNone = 0xffffu;
  u32 ats;             // byte offsets in the stage: piece 0 low half, 1 high (kNone: empty)
  u32 value0, value1;  // the pieces' bytes
};
MLA_INLINE MxPieces NoMxPieces() { return {MxPieces::kNone * 0x10001u, 0, 0}; }
// Stores the pieces of `stage` (just before it is read) and forgets them.
MLA_INLINE void StoreMxPieces(MxPieces& pieces, u8* stage) {
  const u32 at0 = pieces.ats & 0xffffu, at1 = pieces.ats >> 16;
  if (at0 != MxPieces::kNone) *reinterpret_cast<u16*>(stage + at0) = static_cast<u16>(pieces.value0);
  if (at1 != MxPieces::kNone) *reinterpret_cast<u16*>(stage + at1) = static_cast<u16>(pieces.value1);
  pieces = NoMxPieces();
}
// `dst` = the two bytes at src (zero-extended) where `pred`; else unchanged.
// Predicated in PTX so that the compiler can neither load into a temporary
// and select (both places take the same load, which it would hoist) nor
// read `dst` before the load lands.
MLA_INLINE void LoadU16If(u32& dst, const void* src, bool pred) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n @p ld.global.u16 %0, [%1];\n}\n"
      : "+r"(dst)
      : "l"(src), "r"(static_cast<int>(pred)));
}
// Loads the two bytes at src into a free place of `pieces`, for stage + at.
MLA_INLINE void TakeMxPiece(MxPieces& pieces, u8* stage, int at, const u8* src) {
  static_assert(64 * MlaRawTokenStride(KV_FORMAT_MXFP4) < MxPieces::kNone, "offsets fit 16 bits");
  const bool first_free = (pieces.ats & 0xffffu) == MxPieces::kNone;
  if (!first_free && (pieces.ats >> 16) != MxPieces::kNone) {
    // A third piece (IssueMxTile never makes one): the second is stored now.
    *reinterpret_cast<u16*>(stage + (pieces.ats >> 16)) = static_cast<u16>(pieces.value1);
  }
  LoadU16If(pieces.value0, src, first_free);
  LoadU16If(pieces.value1, src, !first_free);
  pieces.ats = first_free ? (pieces.ats & 0xffff0000u) | static_cast<u32>(at)
                          : (pieces.ats & 0xffffu) | static_cast<u32>(at) << 16;
}

// Copies bytes [lo, hi) (even, within 16) of the 16-byte-aligned chunk at src
// to the same bytes of the chunk at stage + at: a leading edge (hi == 16) or
// a trailing one (lo == 0). Its 2-byte piece, if any, goes to `pieces`.
MLA_INLINE void CopyChunkEdge(u8* stage, int at, const u8* src, int lo, int hi,
                              MxPieces& pieces) {
  u8* dst = stage + at;
  auto take_piece = [&](int b) { TakeMxPiece(pieces, stage, at + b, src + b); };
  // Leading edge: up to 2, 4 and 8 bytes to the chunk's end; trailing: 8, 4, 2.
  if (lo & 2) {
    take_piece(lo);
    lo += 2;
  }
  if ((lo & 4) && lo + 4 <= hi) {
    CpAsyncSmall<4>(dst + lo, src + lo);
    lo += 4;
  }
  if (lo + 8 <= hi) {
    CpAsyncSmall<8>(dst + lo, src + lo);
    lo += 8;
  }
  if (lo + 4 <= hi) {
    CpAsyncSmall<4>(dst + lo, src + lo);
    lo += 4;
  }
  if (lo + 2 <= hi) take_piece(lo);
}

// Copies the bytes [first, end) (2-byte aligned) to stage + (address mod 16
// onwards): whole 16-byte chunks by cp.async, spread over the `threads`
// threads from `tid`; the edges by threads `head_tid` and `tail_tid`
// (CopyChunkEdge).
MLA_INLINE void CopyRecordRun(u8* stage, const u8* first, const u8* end, int tid, int threads,
                              int head_tid, int tail_tid, MxPieces& pieces) {
  const u8* base = first - (reinterpret_cast<unsigned long long>(first) & 15);
  const int head = static_cast<int>(first - base);                                   // 0..14
  const int tail = static_cast<int>(reinterpret_cast<unsigned long long>(end) & 15);  // 0..14
  const int whole_hi = static_cast<int>((end - base) / 16);  // chunks [head > 0, whole_hi) are whole
  for (int ch = (head > 0 ? 1 : 0) + tid; ch < whole_hi; ch += threads) {
    CpAsync16(stage + ch * 16, base + ch * 16, true);
  }
  // (A run is at least one 306-byte record: its edges are different chunks.)
  if (head > 0 && tid == head_tid) CopyChunkEdge(stage, 0, base, head, 16, pieces);
  if (tail > 0 && tid == tail_tid) {
    CopyChunkEdge(stage, whole_hi * 16, base + whole_hi * 16, 0, tail, pieces);
  }
}

// MXFP4: starts loading the `valid` tokens j0.. of a BLOCK_N-token tile into
// `stage` (BLOCK_N x RAW_STRIDE bytes), by `threads` threads, this one `tid`.
// No byte outside the tokens' records is read. 2-byte pieces are left in
// `pieces` (StoreMxPieces before the stage is read).
// Also used by the sm_90a swap-AB path's converting warpgroups (mla_wgmma_mxfp4.cuh).
MLA_INLINE void IssueMxTile(const MlaDecodeParams& p, const MlaSeqInfo& s, int j0, int valid,
                            u8* stage, int tid, int threads, MxPieces& pieces) {
  const u8* kv = static_cast<const u8*>(p.kv);
  if (MX_CONTIGUOUS) {
    // Tokens j0.. are consecutive 306-byte records: one run (the conversion
    // skips the leading offset), its edges by the last two threads.
    const u8* first = kv + KvSlot<PAGE_SIZE>(p, s, j0) * MXFP4_TOKEN_BYTES;
    CopyRecordRun(stage, first, first + valid * MXFP4_TOKEN_BYTES, tid, threads, threads - 1,
                  threads - 2, pieces);
    return;
  }
  // Token by token (pages shorter than a tile): each record is copied as the
  // 20-chunk span that holds it into its own RAW_STRIDE-byte slot, where it
  // starts at its address mod 16 (MxRecordOffset); the span's first and last
  // chunks only in part (CopyChunkEdge). 20 consecutive threads copy one
  // record, so that a warp's copies are whole cache lines and its page-table
  // loads hit 2 or 3 entries. (Plain 2-byte loads of whole records, one
  // page-table lookup each, made page sizes 1..32 about 4x slower than flat,
  // RESULTS.md v24.)
  constexpr int SLOT = MlaRawTokenStride(KV_FORMAT_MXFP4);  // RAW_STRIDE where this runs
  constexpr int SPAN_CHUNKS = SLOT / 16;
  static_assert(SPAN_CHUNKS * 16 >= 14 + MXFP4_TOKEN_BYTES, "a slot holds any record's span");
  // Pages of a multiple of 8 tokens in a 16-byte-aligned pool start and end
  // at multiples of 16 bytes: every chunk of a record's span then lies in its
  // page, which the pool holds whole, and is copied whole. Otherwise a span's
  // edge chunks hold bytes of the neighbouring records: copied whole where
  // the caller said the pool holds them (kv_bytes), so that only the pool's
  // first and last records take exact edges; with pages of 1 token, exact
  // edges on every record cost 1.5-2x (RESULTS.md v32).
  const bool spans_inside_pages =
      PAGE_SIZE % 8 == 0 && (reinterpret_cast<unsigned long long>(kv) & 15) == 0;
  const long long kv_bytes = static_cast<long long>(p.kv_bytes);
  for (int idx = tid; idx < valid * SPAN_CHUNKS; idx += threads) {
    const int tok = idx / SPAN_CHUNKS, ch = idx % SPAN_CHUNKS;
    const u8* record = kv + KvSlot<PAGE_SIZE>(p, s, j0 + tok) * MXFP4_TOKEN_BYTES;
    const int phase = static_cast<int>(reinterpret_cast<unsigned long long>(record) & 15);
    // The record's bytes in chunk ch of its span: [lo, hi).
    const int lo = ch == 0 ? phase : 0;
    const int hi = min(16, phase + MXFP4_TOKEN_BYTES - 16 * ch);
    const int at = tok * SLOT + 16 * ch;
    const u8* src = record - phase + 16 * ch;
    const long long in_pool = src - kv;  // the chunk's offset in the caller's buffer
    if (spans_inside_pages || (lo == 0 && hi == 16) ||
        (in_pool >= 0 && in_pool + 16 <= kv_bytes)) {
      CpAsync16(stage + at, src, true);
    } else {
      CopyChunkEdge(stage, at, src, lo, hi, pieces);
    }
  }
}

// Where IssueMxTile put a run of records (MX_CONTIGUOUS): token t of the tile
// starting at j0 at stage + offset + t * stride. No page id is read: pages
// hold multiples of 64 tokens here, so a page starts 16 * 306 * k bytes after
// the pool.
struct MxTileLayout {
  int offset, stride;
};
MLA_INLINE MxTileLayout MxLayoutOf(const MlaDecodeParams& p, const MlaSeqInfo& s, int j0) {
  if (!MX_CONTIGUOUS) return {0, RAW_STRIDE};
  static_assert(!MX_CONTIGUOUS || PAGE_SIZE % 8 == 0, "pages start 16-byte aligned");
  const long long slot =
      PAGE_SIZE == 0 ? KvSlot<PAGE_SIZE>(p, s, j0) : j0 % (PAGE_SIZE > 0 ? PAGE_SIZE : 1);
  const unsigned long long first = reinterpret_cast<unsigned long long>(p.kv) +
                                   static_cast<unsigned long long>(slot) * MXFP4_TOKEN_BYTES;
  return {static_cast<int>(first & 15), MXFP4_TOKEN_BYTES};
}

// Byte offset of token `tok`'s record in the stage IssueMxTile filled with the
// tile at j0 (`mx`: MxLayoutOf of that tile). Token by token, the record sits
// in slot `tok` at its address mod 16, which the page table gives again; `tok`
// must be below the tile's valid count, so no page past the sequence's is read.
MLA_INLINE int MxRecordOffset(const MlaDecodeParams& p, const MlaSeqInfo& s, int j0,
                              const MxTileLayout& mx, int tok) {
  if (MX_CONTIGUOUS) return mx.offset + tok * mx.stride;
  const unsigned long long record = reinterpret_cast<unsigned long long>(p.kv) +
      static_cast<unsigned long long>(KvSlot<PAGE_SIZE>(p, s, j0 + tok)) * MXFP4_TOKEN_BYTES;
  return tok * RAW_STRIDE + static_cast<int>(record & 15);
}

// Starts loading KV positions [j0, j0 + BLOCK_N) (those below kv_hi) into
// buffer `buf`; positions past kv_hi become zeros so that masked tokens never
// inject NaN through 0 * NaN. MXFP4 leaves 2-byte pieces in `pieces`
// (IssueMxTile), to be stored before the tile is read.
MLA_INLINE void IssueKvTile(const MlaDecodeParams& p, const MlaSeqInfo& s, int j0, int kv_hi,
                            int buf, const Smem& sm, MxPieces& pieces) {
  const u8* kv = static_cast<const u8*>(p.kv);
  if (KV_FORMAT == KV_FORMAT_MXFP4) {
    IssueMxTile(p, s, j0, min(BLOCK_N, kv_hi - j0), sm.raw + buf * BLOCK_N * RAW_STRIDE,
                threadIdx.x, NUM_THREADS, pieces);
    return;
  }
  // Eight consecutive lanes per token, each copying every 8th 16-byte chunk:
  // every copy instruction moves 128 contiguous bytes of each of 4 tokens (whole
  // cache lines), one slot lookup per token, constant strides, no division.
  constexpr int CHUNKS = TOKEN_BYTES / 16;
  constexpr int LANES = 8;
  constexpr int TOKENS_PER_PASS = NUM_THREADS / LANES;
  constexpr int PER_TOKEN = (CHUNKS + LANES - 1) / LANES;
  static_assert(BLOCK_N % TOKENS_PER_PASS == 0, "whole passes over the tile's tokens");
  const int first = threadIdx.x % LANES;
#pragma unroll
  for (int pass = 0; pass < BLOCK_N / TOKENS_PER_PASS; ++pass) {
    const int tok = threadIdx.x / LANES + pass * TOKENS_PER_PASS;
    const int j = j0 + tok;
    const bool valid = j < kv_hi;
    const u8* src = valid ? kv + KvSlot<PAGE_SIZE>(p, s, j) * TOKEN_BYTES + first * 16 : kv;
    u8* dst = DIRECT_BF16
                  ? reinterpret_cast<u8*>(sm.kv + (buf * BLOCK_N + tok) * STRIDE) + first * 16
                  : sm.raw + (buf * BLOCK_N + tok) * RAW_STRIDE + first * 16;
#pragma unroll
    for (int i = 0; i < PER_TOKEN; ++i) {
      if (CHUNKS % LANES == 0 || first + i * LANES < CHUNKS) {
        CpAsync16(dst + i * LANES * 16, valid ? src + i * LANES * 16 : kv, valid);
      }
    }
  }
}

// Raw fp8 / MXFP4 tile in `buf` -> the bf16 tile. Tokens at or past `valid`
// become zeros (their raw bytes are stale or absent), so that masked positions
// never inject NaN through 0 * NaN.
// Converts tokens [tok0, tok0 + S_TOKENS_PER_WARP) x 8-element groups
// [grp0, grp0 + GROUPS) with the 32 lanes of one warp.
// fp8 tile -> f16 tile for tokens [tok0, tok0 + S_TOKENS_PER_WARP) and 16-byte
// chunks [ch0, ch0 + CH) of each, by one warp: each lane owns one token and
// every LPT-th chunk of it, so addresses advance by constants (no per-chunk
// division) and both the 16-byte reads and the two 16-byte writes per chunk
// are bank-conflict-free.
template <int CH>
MLA_INLINE void ConvertFp8Tile(int valid, int buf, const Smem& sm, int tok0, int ch0, int lane) {
  constexpr int LPT = 32 / S_TOKENS_PER_WARP;  // lanes per token
  constexpr int PER_LANE = (CH + LPT - 1) / LPT;
  const int tok = tok0 + lane / LPT, first = ch0 + lane % LPT;
  const u8* src = sm.raw + (buf * BLOCK_N + tok) * RAW_STRIDE + first * 16;
  u16* dst = sm.kv + tok * STRIDE + first * 16;
  const bool ok = tok < valid;
#pragma unroll
  for (int i = 0; i < PER_LANE; ++i) {
    if (CH % LPT == 0 || first + i * LPT < ch0 + CH) {
      uint4 v = make_uint4(0, 0, 0, 0);
      if (ok) v = *reinterpret_cast<const uint4*>(src + i * LPT * 16);
      uint4 lo, hi;
      Fp8x4ToF16x4(v.x, lo.x, lo.y);
      Fp8x4ToF16x4(v.y, lo.z, lo.w);
      Fp8x4ToF16x4(v.z, hi.x, hi.y);
      Fp8x4ToF16x4(v.w, hi.z, hi.w);
      reinterpret_cast<uint4*>(dst + i * LPT * 16)[0] = lo;
      reinterpret_cast<uint4*>(dst + i * LPT * 16)[1] = hi;
    }
  }
}

// MXFP4 -> bf16 through byte-permute tables (mla_mxfp4_lut.h): the table of a
// 32-element block holds exactly the bf16 values E2m1ToFloat(code) * scale
// rounds to. 0 * scale too: a NaN scale makes every element NaN.
MLA_INLINE MlaMxTable MakeMxTable(u8 scale_code) {
  const float f = E8m0ToFloat(scale_code);
  return MlaMxTableFromPairs(PackBf16x2(0.0f * f, 0.5f * f), PackBf16x2(1.0f * f, 1.5f * f),
                             PackBf16x2(2.0f * f, 3.0f * f), PackBf16x2(4.0f * f, 6.0f * f));
}

// MXFP4 tile -> bf16 tile for tokens [tok0, tok0 + S_TOKENS_PER_WARP) and
// 8-element groups [grp0, grp0 + GROUPS) of each, by one warp. A lane takes
// UNIT groups of one token at a time (a whole 32-element scale block when the
// range allows, else half of one), so that one table serves them all.
template <int GROUPS>
MLA_INLINE void ConvertKvTile(const MlaDecodeParams& p, const MlaSeqInfo& s, int j0, int valid,
                              int buf, const Smem& sm, int tok0, int grp0, int lane) {
  constexpr int UNIT = GROUPS % 4 == 0 ? 4 : 2;  // grp0 is a multiple of GROUPS
  static_assert(GROUPS % UNIT == 0, "whole units per warp");
  constexpr int UNITS = GROUPS / UNIT;
  const u8* stage = sm.raw + buf * BLOCK_N * RAW_STRIDE;
  const MxTileLayout mx = MxLayoutOf(p, s, j0);
#pragma unroll 2
  for (int idx = lane; idx < S_TOKENS_PER_WARP * UNITS; idx += 32) {
    const int tok = tok0 + idx / UNITS, k0 = grp0 + (idx % UNITS) * UNIT;
    uint4 w[UNIT];
    if (tok < valid) {
      const u8* raw = stage + MxRecordOffset(p, s, j0, mx, tok);
      // 306-byte records keep 2-byte alignment: the packed bytes as halves.
      const u16* halves = reinterpret_cast<const u16*>(raw + k0 * 4);
      const MlaMxTable table = MakeMxTable(raw[MXFP4_PACKED_BYTES + (k0 * 8) / 32]);
#pragma unroll
      for (int u = 0; u < UNIT; ++u) {
        const u32 packed =
            static_cast<u32>(halves[2 * u]) | (static_cast<u32>(halves[2 * u + 1]) << 16);
        const MlaMxWords m = MlaMxToBf16x8(packed, table);
        w[u] = make_uint4(m.w[0], m.w[1], m.w[2], m.w[3]);
      }
    } else {
#pragma unroll
      for (int u = 0; u < UNIT; ++u) w[u] = make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < UNIT; ++u) {
      *reinterpret_cast<uint4*>(sm.kv + tok * STRIDE + (k0 + u) * 8) = w[u];
    }
  }
}

MLA_INLINE float QuadMax(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
MLA_INLINE float QuadSum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// f16 path: scale the tile's bf16 Q by 2^e so that its largest magnitude lands
// in [2^13, 2^14) and rewrite it as f16 in place (power-of-two scaling and
// bf16 -> f16 are exact for everything above amax * 2^-27; a8's values, four
// significant bits each, from 448 times the largest row scale times 2^-33). Returns 2^-e, the
// factor that undoes the scaling in the scores. Block-wide; ends with a barrier.
MLA_INLINE float ConvertQTileToF16(const Smem& sm, float* red) {
  constexpr int PAIRS = BLOCK_M * (HEAD_DIM_QK / 2);
  u32* q2 = reinterpret_cast<u32*>(sm.q);
  float amax = 0.0f;
  if (Q_MODE == Q_MODE_BF16) {
    for (int i = threadIdx.x; i < PAIRS; i += NUM_THREADS) {
      const int r = i / (HEAD_DIM_QK / 2), c = i % (HEAD_DIM_QK / 2);
      const u32 v = q2[r * (STRIDE / 2) + c];
      amax = fmaxf(amax, fmaxf(fabsf(Bf16ToFloat(v & 0xffffu)), fabsf(Bf16ToFloat(v >> 16))));
    }
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 16));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 8));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 4));
    amax = QuadMax(amax);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = amax;
    __syncthreads();
    for (int w = 0; w < MMA_WARPS; ++w) amax = fmaxf(amax, red[w]);
  } else {
    // a8: no value exceeds 448 times its row's scale (LoadQTile's, in place
    // since the tile loop's first barrier), which bounds the tile's largest
    // to within a factor of two without another pass over Q.
    for (int r = 0; r < BLOCK_M; ++r) amax = fmaxf(amax, sm.qs[r]);
    amax *= FP8_MAX;
  }
  int e = 0;
  if (amax > 0.0f) {
    const int amax_exp = static_cast<int>((__float_as_uint(amax) >> 23) & 0xffu) - 127;
    e = min(max(13 - amax_exp, -126), 126);
  }
  const float up = __uint_as_float(static_cast<u32>(e + 127) << 23);
  for (int i = threadIdx.x; i < PAIRS; i += NUM_THREADS) {
    const int r = i / (HEAD_DIM_QK / 2), c = i % (HEAD_DIM_QK / 2);
    const u32 v = q2[r * (STRIDE / 2) + c];
    q2[r * (STRIDE / 2) + c] = PackF16x2(Bf16ToFloat(v & 0xffffu) * up, Bf16ToFloat(v >> 16) * up);
  }
  __syncthreads();
  return __uint_as_float(static_cast<u32>(127 - e) << 23);
}

MLA_INLINE void ProcessItem(const MlaDecodeParams& p, const MlaWorkItem& item, const Smem& sm) {
  const MlaSeqInfo s = LoadSeq(p, item);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = warp / COL_SPLITS, c = warp % COL_SPLITS;
  const int rows_total = s.q_len * NUM_HEADS;
  const int r0 = g * 16 + (lane >> 2), r1 = r0 + 8;  // this thread's rows within the tile
  const int last_row = min(item.row_start + BLOCK_M, rows_total) - 1;
  // Causal visibility grows with the row, so the tile's last row bounds the range.
  const int kv_hi = min(item.kv_end, VisibleKv<NUM_HEADS, CAUSAL>(s, last_row));
  const int kv_lo = item.kv_start;
  const int lim0 = min(kv_hi, VisibleKv<NUM_HEADS, CAUSAL>(s, item.row_start + r0));
  const int lim1 = min(kv_hi, VisibleKv<NUM_HEADS, CAUSAL>(s, item.row_start + r1));
  const int num_tiles = kv_hi > kv_lo ? (kv_hi - kv_lo + BLOCK_N - 1) / BLOCK_N : 0;

  float score_scale = p.sm_scale * LOG2E;  // scores in the log2 domain
  if (KV_FORMAT == KV_FORMAT_FP8) score_scale *= p.kv_scale;

  float m0 = NegInf(), m1 = NegInf(), l0 = 0.0f, l1 = 0.0f;
  u32 qf[Q_IN_REGS ? K_STEPS : 1][4];  // Q fragments (Q_IN_REGS)
  float o[V_NTILES][4];
#pragma unroll
  for (int i = 0; i < V_NTILES; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;

  // MXFP4: the 2-byte piece of each tile in flight, oldest first (IssueMxTile).
  MxPieces pieces[STAGES - 1];
#pragma unroll
  for (int i = 0; i < STAGES - 1; ++i) pieces[i] = NoMxPieces();

  __syncthreads();  // the previous item is done with shared memory
  if (num_tiles > 0) {
    LoadQTile(p, s, item.row_start, sm);
    // Prologue: STAGES - 1 tiles in flight; one commit group per tile (empty
    // groups past the end keep the wait counts uniform).
#pragma unroll
    for (int st = 0; st < STAGES - 1; ++st) {
      if (st < num_tiles) IssueKvTile(p, s, kv_lo + st * BLOCK_N, kv_hi, st, sm, pieces[st]);
      CpAsyncCommit();
    }
  }
  for (int t = 0; t < num_tiles; ++t) {
    const int buf = t % STAGES;
    CpAsyncWait<STAGES - 2>();  // this thread's copies of tile t (and Q) have landed
    // MXFP4: tile t's 2-byte pieces (pieces[0]); the others move up a place.
    StoreMxPieces(pieces[0], sm.raw + buf * BLOCK_N * RAW_STRIDE);
#pragma unroll
    for (int i = 0; i + 1 < STAGES - 1; ++i) pieces[i] = pieces[i + 1];
    pieces[STAGES - 2] = NoMxPieces();
    // All threads' copies of tile t are visible, and every warp is done with
    // tile t-1, whose buffer the next issue refills.
    __syncthreads();
    if (t + STAGES - 1 < num_tiles) {
      IssueKvTile(p, s, kv_lo + (t + STAGES - 1) * BLOCK_N, kv_hi, (t + STAGES - 1) % STAGES, sm,
                  pieces[STAGES - 2]);
    }
    CpAsyncCommit();
    if (t == 0) {  // Q landed with tile 0
      if (F16_MMA) score_scale *= ConvertQTileToF16(sm, sm.rmax);
      if (Q_IN_REGS) {
        const u16* qa = sm.q + (lane & 15) * STRIDE + (lane >> 4) * 8;
#pragma unroll
        for (int ks = 0; ks < K_STEPS; ++ks) LdMatrixX4(qf[ks], qa + ks * 16);
      }
    }
    const u16* kt = sm.kv;
    if (DIRECT_BF16) {
      kt = sm.kv + buf * BLOCK_N * STRIDE;
    } else {
      // Each warp converts the tokens it scores; with several row groups the
      // groups split the dims and meet at a barrier before QK^T.
      const int j0 = kv_lo + t * BLOCK_N;
      constexpr int GROUPS = (HEAD_DIM_QK / 8) / ROW_GROUPS;
      const int valid = min(BLOCK_N, kv_hi - j0);
      if (KV_FORMAT == KV_FORMAT_FP8) {
        ConvertFp8Tile<GROUPS / 2>(valid, buf, sm, c * S_TOKENS_PER_WARP, g * (GROUPS / 2), lane);
      } else {
        ConvertKvTile<GROUPS>(p, s, j0, valid, buf, sm, c * S_TOKENS_PER_WARP, g * GROUPS, lane);
      }
      if (ROW_GROUPS > 1) {
        __syncthreads();
      } else {
        __syncwarp();
      }
    }

    // ---- S = Q K^T for this warp's rows and tokens ----
    // Two accumulator sets (even / odd k steps) halve the chain of dependent MMAs.
    float sacc[S_NTILES][4], sacc2[S_NTILES][4];
#pragma unroll
    for (int i = 0; i < S_NTILES; ++i) {
      sacc[i][0] = sacc[i][1] = sacc[i][2] = sacc[i][3] = 0.0f;
      sacc2[i][0] = sacc2[i][1] = sacc2[i][2] = sacc2[i][3] = 0.0f;
    }
    const u16* qa = sm.q + (g * 16 + (lane & 15)) * STRIDE + (lane >> 4) * 8;
    // x4: lanes 0-7 / 8-15 / 16-23 / 24-31 address k offsets 0 / 8 / 16 / 24,
    // i.e. the (b0, b1) halves of two consecutive k steps.
    const u16* kb = kt + (c * S_TOKENS_PER_WARP + (lane & 7)) * STRIDE + (lane >> 3) * 8;
    if (Q_IN_REGS) {
#pragma unroll
      for (int ks = 0; ks < K_STEPS; ks += 2) {
#pragma unroll
        for (int nt = 0; nt < S_NTILES; ++nt) {
          u32 b[4];  // two k steps of one n8 tile
          LdMatrixX4(b, kb + nt * 8 * STRIDE + ks * 16);
          Mma(sacc[nt], qf[ks], b[0], b[1]);
          Mma(sacc2[nt], qf[ks + 1], b[2], b[3]);
        }
      }
    } else {
#pragma unroll 2
      for (int ks = 0; ks < K_STEPS; ks += 2) {
        u32 a[4], a2[4];
        LdMatrixX4(a, qa + ks * 16);
        LdMatrixX4(a2, qa + ks * 16 + 16);
#pragma unroll
        for (int nt = 0; nt < S_NTILES; ++nt) {
          u32 b[4];
          LdMatrixX4(b, kb + nt * 8 * STRIDE + ks * 16);
          Mma(sacc[nt], a, b[0], b[1]);
          Mma(sacc2[nt], a2, b[2], b[3]);
        }
      }
    }
#pragma unroll
    for (int nt = 0; nt < S_NTILES; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) sacc[nt][e] += sacc2[nt][e];
    }
    // ---- online softmax: row max across the warps of the row group ----
    const int j0 = kv_lo + t * BLOCK_N;
    float mx0 = NegInf(), mx1 = NegInf();
#pragma unroll
    for (int nt = 0; nt < S_NTILES; ++nt) {
      const int j = j0 + c * S_TOKENS_PER_WARP + nt * 8 + 2 * (lane & 3);
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        sacc[nt][e] = j + e < lim0 ? sacc[nt][e] * score_scale : NegInf();
        sacc[nt][2 + e] = j + e < lim1 ? sacc[nt][2 + e] * score_scale : NegInf();
        mx0 = fmaxf(mx0, sacc[nt][e]);
        mx1 = fmaxf(mx1, sacc[nt][2 + e]);
      }
    }
    mx0 = QuadMax(mx0);
    mx1 = QuadMax(mx1);
    if ((lane & 3) == 0) {
      sm.rmax[r0 * COL_SPLITS + c] = mx0;
      sm.rmax[r1 * COL_SPLITS + c] = mx1;
    }
    __syncthreads();
#pragma unroll
    for (int w = 0; w < COL_SPLITS; ++w) {
      mx0 = fmaxf(mx0, sm.rmax[r0 * COL_SPLITS + w]);
      mx1 = fmaxf(mx1, sm.rmax[r1 * COL_SPLITS + w]);
    }
    const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
    // A row with nothing visible yet keeps max -inf; subtract 0 to avoid inf - inf.
    const float base0 = mn0 == NegInf() ? 0.0f : mn0;
    const float base1 = mn1 == NegInf() ? 0.0f : mn1;
    const float alpha0 = exp2f(m0 - base0), alpha1 = exp2f(m1 - base1);
    m0 = mn0;
    m1 = mn1;
    // Each warp turns its own scores into probabilities and publishes them.
    float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
    for (int nt = 0; nt < S_NTILES; ++nt) {
      const float p00 = exp2f(sacc[nt][0] - base0), p01 = exp2f(sacc[nt][1] - base0);
      const float p10 = exp2f(sacc[nt][2] - base1), p11 = exp2f(sacc[nt][3] - base1);
      sum0 += p00 + p01;
      sum1 += p10 + p11;
      const int col = c * S_TOKENS_PER_WARP + nt * 8 + 2 * (lane & 3);
      *reinterpret_cast<u32*>(sm.p + r0 * P_STRIDE + col) = PackOperand(p00, p01);
      *reinterpret_cast<u32*>(sm.p + r1 * P_STRIDE + col) = PackOperand(p10, p11);
    }
    // Partial sums over this warp's tokens; merged across warps at the end.
    l0 = l0 * alpha0 + sum0;
    l1 = l1 * alpha1 + sum1;
#pragma unroll
    for (int nt = 0; nt < V_NTILES; ++nt) {
      o[nt][0] *= alpha0;
      o[nt][1] *= alpha0;
      o[nt][2] *= alpha1;
      o[nt][3] *= alpha1;
    }
    __syncthreads();  // P complete; rmax may be rewritten next tile

    // ---- O += P V for this warp's columns ----
    const u16* pa_base = sm.p + (g * 16 + (lane & 15)) * P_STRIDE + (lane >> 4) * 8;
#pragma unroll
    for (int kk = 0; kk < BLOCK_N / 16; ++kk) {
      u32 pa[4];
      LdMatrixX4(pa, pa_base + kk * 16);
      const u16* vb = kt + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * STRIDE +
                      c * V_COLS_PER_WARP + (lane >> 4) * 8;
#pragma unroll
      for (int np = 0; np < V_NTILES / 2; ++np) {
        u32 b[4];
        LdMatrixX4Trans(b, vb + np * 16);
        Mma(o[2 * np], pa, b[0], b[1]);
        Mma(o[2 * np + 1], pa, b[2], b[3]);
      }
    }
  }

  // ---- epilogue: normalise, write out / lse or the partial ----
  l0 = QuadSum(l0);
  l1 = QuadSum(l1);
  if ((lane & 3) == 0) {
    sm.rsum[r0 * COL_SPLITS + c] = l0;
    sm.rsum[r1 * COL_SPLITS + c] = l1;
  }
  __syncthreads();
  l0 = l1 = 0.0f;
#pragma unroll
  for (int w = 0; w < COL_SPLITS; ++w) {
    l0 += sm.rsum[r0 * COL_SPLITS + w];
    l1 += sm.rsum[r1 * COL_SPLITS + w];
  }
  const float v_scale = KV_FORMAT == KV_FORMAT_FP8 ? p.kv_scale : 1.0f;
  const float inv0 = l0 > 0.0f ? v_scale / l0 : 0.0f;
  const float inv1 = l1 > 0.0f ? v_scale / l1 : 0.0f;
  const float lse0 = l0 > 0.0f ? (m0 + log2f(l0)) * LN2 : NegInf();
  const float lse1 = l1 > 0.0f ? (m1 + log2f(l1)) * LN2 : NegInf();
  const int row0 = item.row_start + r0, row1 = item.row_start + r1;
  const bool ok0 = row0 < rows_total, ok1 = row1 < rows_total;
  const int col_base = c * V_COLS_PER_WARP + 2 * (lane & 3);
  if (item.partial < 0) {
    u16* out = static_cast<u16*>(p.out);
    const long long base = static_cast<long long>(s.qo_start) * NUM_HEADS;
#pragma unroll
    for (int nt = 0; nt < V_NTILES; ++nt) {
      const int col = col_base + nt * 8;
      if (ok0)
        *reinterpret_cast<u32*>(out + (base + row0) * HEAD_DIM_V + col) =
            PackBf16x2(o[nt][0] * inv0, o[nt][1] * inv0);
      if (ok1)
        *reinterpret_cast<u32*>(out + (base + row1) * HEAD_DIM_V + col) =
            PackBf16x2(o[nt][2] * inv1, o[nt][3] * inv1);
    }
    if (WRITE_LSE && c == 0 && (lane & 3) == 0) {
      if (ok0) p.lse[base + row0] = lse0;
      if (ok1) p.lse[base + row1] = lse1;
    }
  } else {
    // Partials are kept before kv_scale (mla_common.cuh).
    const float pinv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f;
    const float pinv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
    const long long e = static_cast<long long>(item.partial) * BLOCK_M * HEAD_DIM_V;
#pragma unroll
    for (int nt = 0; nt < V_NTILES; ++nt) {
      const int col = col_base + nt * 8;
      StorePartial2(p.partial_o, e + r0 * HEAD_DIM_V + col, o[nt][0] * pinv0, o[nt][1] * pinv0);
      StorePartial2(p.partial_o, e + r1 * HEAD_DIM_V + col, o[nt][2] * pinv1, o[nt][3] * pinv1);
    }
    if (c == 0 && (lane & 3) == 0) {
      p.partial_lse[item.partial * BLOCK_M + r0] = lse0;
      p.partial_lse[item.partial * BLOCK_M + r1] = lse1;
    }
  }
}

MLA_INLINE void DecodeCta(const MlaDecodeParams& p) {
  extern __shared__ __align__(16) u8 mla_smem[];
  const Smem sm = CarveSmem(mla_smem);
  const int begin = p.work_indptr[blockIdx.x], end = p.work_indptr[blockIdx.x + 1];
  for (int w = begin; w < end; ++w) ProcessItem(p, p.work[w], sm);
}

}  // namespace mla_mma

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_DECODE_MMA_CUH_
