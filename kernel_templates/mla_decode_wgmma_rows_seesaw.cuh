// The 64-row path's "seesaw" schedule for bf16 KV (included by
// mla_decode_wgmma_rows.cuh, whose constants, loads and epilogue it shares).
//
// The two-stage schedule of mla_decode_wgmma_rows.cuh runs a tile's products
// one after the other: S by warpgroup 0, its softmax, then P V by both, with
// the tensor cores idle through the softmax, the barriers and each product's
// fill and drain. Measured on (32,4,8192,32) bf16 (RESULTS.md v41): S and P V
// take 0.63 and 0.54 us of a tile's 2.65, at their full rates, and nothing
// overlaps them.
//
// Here the warpgroups take turns on pairs of tiles (A in buffer 0, B in
// buffer 1), each keeping one half of O (warpgroup wg: dims 256 wg ..):
//   warpgroup 0: S_A = Q K_A^T; its rows' new maxima -> shared memory;
//                P_A (registers, and into A's rope block for warpgroup 1);
//                O_L = a_A O_L + P_A V_A[L]; then, with warpgroup 1's maxima,
//                O_L = a_B O_L + P_B V_B[L] (P_B from B's rope block)
//   warpgroup 1: S_B = Q K_B^T beside warpgroup 0's S_A and softmax; with
//                warpgroup 0's maxima, its own; O_R = a_A O_R + P_A V_A[R],
//                with P_B computed under it; then O_R = a_B O_R + P_B V_B[R]
// so that one warpgroup's softmax runs under the other's products. The rows'
// maxima move only past RESCALE_SLACK (mla_wgmma_rows_common.cuh), so a_A and
// a_B are 1 on most tiles and neither O half is rescaled between the products.
//
// Shared memory is the two-stage schedule's: Q and two KV tiles of 72 KB.
// There is no third tile buffer, so buffers are freed by blocks as they are
// read last (MlaRowsSeesawCopiesBlock): each warpgroup copies, completing on
// an mbarrier, the V blocks only its own P V reads, and the rope block (S's
// last 64 dims, P's place once S is done) of the buffer whose P it reads
// from there; by tensor copies where the tile is whole and its slots
// consecutive, by cp.async otherwise.
//
// The warpgroups meet at four named barriers a pair: warpgroup 0's maxima
// (MAX_A) and P_A (P_A), warpgroup 1's maxima (MAX_B) and P_B (P_B). Each is
// arrived at by one warpgroup and waited at by the other, once a pair, and
// every arrival comes after a wait that follows the other warpgroup's wait of
// the previous phase, so that no phase receives two rounds of arrivals:
//   warpgroup 0: arrive MAX_A, arrive P_A, wait MAX_B, wait P_B
//   warpgroup 1: wait MAX_A, arrive MAX_B, wait P_A, arrive P_B
// (the B steps only when the pair has a tile B).
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_DECODE_WGMMA_ROWS_SEESAW_CUH_
#define MLAJIT_KERNEL_TEMPLATES_MLA_DECODE_WGMMA_ROWS_SEESAW_CUH_

namespace mla_wgmma_rows {

using mla_wgmma::CpAsyncTrackOnBarrier;
using mla_wgmma::Exp2;
using mla_wgmma::MbarArrive;
using mla_wgmma::MbarArriveExpectTx;
using mla_wgmma::MbarArriveWarp;
using mla_wgmma::MbarInit;
using mla_wgmma::MbarWait;
using mla_wgmma::RESCALE_SLACK;
using mla_wgmma::TensorCopy2d;
using mla_wgmma::TmaTile;
using mla_wgmma_ss::RsM64N256K16Bf16;

constexpr bool SEESAW = ELIGIBLE && !FP8;
// Items of at least this many tiles take the seesaw. v41 measured it 5-10 %
// faster than the two-stage schedule on items of 64 and 128 tiles but 3-4 %
// slower on split pieces of 8; after v42-v44 it is 3 % faster on pieces of 8
// and still 2 % slower on pieces of 4 (RESULTS.md v45).
constexpr int SEESAW_MIN_TILES = 8;

// Named barriers (0 is __syncthreads), 256 threads each.
constexpr int BAR_MAX_A = 1;
constexpr int BAR_P_A = 2;
constexpr int BAR_MAX_B = 3;
constexpr int BAR_P_B = 4;
MLA_INLINE void BarArrive(int id) { asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory"); }
MLA_INLINE void BarWait(int id) { asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory"); }

// Its state lives where the two-stage schedule keeps P: the rows' maxima
// after tile A (warpgroup 0's) and after tile B (warpgroup 1's), and one
// mbarrier per buffer and copying warpgroup (full[2 buf + wg]), set up per
// item and invalidated after it.
struct SeesawSmem {
  float* max_a;
  float* max_b;
  u64* full;
};
MLA_INLINE SeesawSmem CarveSeesaw(const Smem& sm) {
  SeesawSmem ss;
  ss.max_a = reinterpret_cast<float*>(sm.p);
  ss.max_b = ss.max_a + ROWS;
  ss.full = reinterpret_cast<u64*>(sm.p + 2 * ROWS * 4);
  return ss;
}

// How many blocks warpgroup wg copies into buffer `buf`.
MLA_HOST_DEVICE constexpr int SeesawBlockCount(int wg, int buf) {
  int n = 0;
  for (int b = 0; b < HEAD_DIM_QK / 64; ++b) n += MlaRowsSeesawCopiesBlock(wg, buf, b) ? 1 : 0;
  return n;
}

// Starts copying KV positions [j0, j0 + TILE) of warpgroup wg's blocks of
// buffer `buf` (positions at or past kv_hi zero-filled); they complete on
// `full` (one arrival per warp). A whole tile in consecutive slots goes by
// tensor copies (mla_wgmma_tma.cuh), one per block from one thread, so that
// the warps' memory-instruction queues, which the softmax's shuffles and
// stores share, do not carry 18 cp.async a thread (RESULTS.md v43); other
// tiles (an item's last part tile, pages of fewer than 64 tokens) by cp.async.
MLA_INLINE void CopySeesawBlocks(const MlaDecodeParams& p, const MlaSeqInfo& s, int j0, int kv_hi,
                                 const Smem& sm, int wg, int buf, u64* full) {
  constexpr int TOKEN_BYTES = KvTokenBytes<KV_FORMAT>::value;
  const int w = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, c0 = lane & 7;
  const u8* kv = static_cast<const u8*>(p.kv);
  u8* tile = sm.kv + buf * OPERAND_BYTES;
  int slot = 0;
  if (TmaTile(p, s, j0, kv_hi, slot)) {
    if (lane == 0 && w == 0) {
      MbarArriveExpectTx(full, SeesawBlockCount(wg, buf) * BLOCK_BYTES);
#pragma unroll
      for (int b = 0; b < HEAD_DIM_QK / 64; ++b) {
        if (MlaRowsSeesawCopiesBlock(wg, buf, b)) {
          TensorCopy2d(tile + b * BLOCK_BYTES, &p.kv_maps[0], 128 * b, slot, full);
        }
      }
    } else if (lane == 0) {
      MbarArrive(full);
    }
    return;
  }
#pragma unroll
  for (int pass = 0; pass < TILE / 16; ++pass) {
    const int tok = MlaRowsSeesawCopyToken(w, lane, pass);
    const int j = j0 + tok;
    const bool valid = j < kv_hi;
    const u8* src = kv + KvSlot<PAGE_SIZE>(p, s, valid ? j : j0) * TOKEN_BYTES + c0 * 16;
    u8* dst = tile + MlaRowsKvRowOffset(tok, c0);
#pragma unroll
    for (int b = 0; b < HEAD_DIM_QK / 64; ++b) {
      if (MlaRowsSeesawCopiesBlock(wg, buf, b)) {
        mla_wgmma::CpAsync16(dst + b * BLOCK_BYTES, src + b * 128, valid);
      }
    }
  }
  CpAsyncTrackOnBarrier(full);
  MbarArriveWarp(full);
}

// Timeline stamps (mla_timeline.cuh; nothing unless MLA_TIMELINE is set):
// lane 0 of each warp stamps `event` of the CTA's pair g as role `warp`, so
// that the warps of a warpgroup can be seen apart. (wg: the caller's
// warpgroup, which every warp of it passes.)
MLA_INLINE void SeesawStamp(int wg, int g, int event) {
  const int warp = 4 * wg + ((threadIdx.x >> 5) & 3);
  mla_timeline::Stamp(warp, 32 * warp, g, event);
}

// S = Q K^T over tile buffer BUF (stamped as pair g's kSeLanded of
// warpgroup wg once all of it is in). Committed, not waited for. Warpgroup
// 0's blocks of either buffer are copied first (after its half of P V, while
// warpgroup 1 still has its half to run: RESULTS.md v44), so S starts on them
// and the DRAM latency of the blocks warpgroup 1 copied last runs under that
// part. Between the parts the first is waited for: a wait for the copies
// between the steps of one product in flight makes ptxas serialise every
// wgmma of the kernel.
template <int BUF>
MLA_INLINE void ScoreSeesaw(float (&sc)[32], Desc q_desc, const u8* tile, u64* full, u32 parity,
                            int wg, int g) {
  const Desc k_desc = KOperand(tile);
  MbarWait(full, parity);
  if (MLA_ABLATE_MATH) {
#pragma unroll
    for (int i = 0; i < 32; ++i) sc[i] = 0.0f;
    MbarWait(full + 1, parity);
    SeesawStamp(wg, g, mla_timeline::kSeLanded);
    return;
  }
  FenceProxyAsync();  // cp.async writes -> wgmma reads
  Fence();
#pragma unroll
  for (int k = 0; k < K_STEPS; ++k) {
    if (MlaRowsSeesawCopiesBlock(0, BUF, k / 4)) {
      SsM64N64K16<true>(sc, q_desc.At(k * STEP_BYTES), k_desc.At(MlaRowsKStepOffset(k)), k > 0);
    }
  }
  Commit();
  Wait<0>();
  PinAccumulators(sc);
  MbarWait(full + 1, parity);
  SeesawStamp(wg, g, mla_timeline::kSeLanded);
  FenceProxyAsync();
  Fence();
#pragma unroll
  for (int k = 0; k < K_STEPS; ++k) {
    if (!MlaRowsSeesawCopiesBlock(0, BUF, k / 4)) {
      SsM64N64K16<true>(sc, q_desc.At(k * STEP_BYTES), k_desc.At(MlaRowsKStepOffset(k)), 1);
    }
  }
  Commit();
}

// The tile's largest score of each of this thread's rows, scaled (log2 units;
// score_scale[h] is row h's scale, positive).
MLA_INLINE void TileMax(const float (&sc)[32], const float (&score_scale)[2], float (&mx)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float x = NegInf();
#pragma unroll
    for (int j = 0; j < 8; ++j) x = fmaxf(x, fmaxf(sc[4 * j + 2 * h], sc[4 * j + 2 * h + 1]));
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
    mx[h] = x * score_scale[h];
  }
}

// A row's maximum after a tile whose largest score is mx: it moves only past
// RESCALE_SLACK (-inf + slack is -inf: the first visible tile sets it).
MLA_INLINE float RaisedMax(float m, float mx) { return mx > m + RESCALE_SLACK ? mx : m; }
// What exponents are taken against: 0 while a row has seen nothing (no inf - inf).
MLA_INLINE float ExpBase(float m) { return m == NegInf() ? 0.0f : m; }

// A warpgroup's rows after the tile it scored: each row's maximum raised by
// the tile's (mx), published at `out` for the other warpgroup (quad 0), the
// exponents' base and the factor that takes O and l to the new maximum.
MLA_INLINE void RaiseAndPublishMax(float (&m)[2], const float (&mx)[2], float* out, int row0,
                                   int quad, float (&base)[2], float (&a)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float mn = RaisedMax(m[h], mx[h]);
    if (quad == 0) out[row0 + 8 * h] = mn;
    base[h] = ExpBase(mn);
    a[h] = Exp2(m[h] - base[h]);
    m[h] = mn;
  }
}
// The other warpgroup's maxima (at `in`) after the tile it scored: the factor
// that takes O and l to them, and l taken there.
MLA_INLINE void AdoptMax(float (&m)[2], const float* in, int row0, float (&a)[2], float (&l)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float mn = in[row0 + 8 * h];
    a[h] = Exp2(m[h] - ExpBase(mn));
    m[h] = mn;
    l[h] *= a[h];
  }
}

// P = 2^(s * scale - base) of this thread's rows: bf16 A fragments of the
// four k16 steps of P V (frag[j / 2][2 (j % 2) + h] holds row h, columns
// 8 j + 2 quad, + 1), the same values into the chunked P operand at `p`, and
// this thread's part of the rows' sums.
MLA_INLINE void SoftmaxSeesaw(const float (&sc)[32], const float (&score_scale)[2],
                              const float (&base)[2], u32 (&frag)[4][4], u8* p, int row0, int quad,
                              float (&sum)[2]) {
  if (MLA_ABLATE_MATH) {
    sum[0] = sum[1] = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
#pragma unroll
      for (int i = 0; i < 4; ++i) frag[k][i] = 0;
    }
    return;
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    sum[h] = 0.0f;
    u8* prow = p + (row0 + 8 * h) * 16 + quad * 4;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float p0 = Exp2(fmaf(sc[4 * j + 2 * h], score_scale[h], -base[h]));
      const float p1 = Exp2(fmaf(sc[4 * j + 2 * h + 1], score_scale[h], -base[h]));
      sum[h] += p0 + p1;
      const u32 w = PackBf16x2(p0, p1);
      frag[j / 2][2 * (j % 2) + h] = w;
      *reinterpret_cast<u32*>(prow + j * 1024) = w;
    }
  }
}

// O *= a per row (registers 4 j + 2 h + e hold row h), where any row of the
// warp moved; waits for the warpgroup's products in flight first.
MLA_INLINE void RescaleO(float (&o)[128], const float (&a)[2]) {
  if (!__any_sync(0xffffffffu, a[0] != 1.0f || a[1] != 1.0f)) return;
  Wait<0>();
  PinAccumulators(o);
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    o[4 * j] *= a[0];
    o[4 * j + 1] *= a[0];
    o[4 * j + 2] *= a[1];
    o[4 * j + 3] *= a[1];
  }
}

// Keeps the A fragments of an RS product in their registers until its wait.
MLA_INLINE void PinFragments(u32 (&frag)[4][4]) {
#pragma unroll
  for (int k = 0; k < 4; ++k) {
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(frag[k][i])::"memory");
  }
}

// O += P V over this warpgroup's 256 dims of buffer `tile`: P from registers.
MLA_INLINE void PvOwn(float (&o)[128], u32 (&frag)[4][4], const u8* tile, int wg) {
  if (MLA_ABLATE_MATH) return;
  const Desc v_desc = VOperand(tile, wg);
  Fence();
#pragma unroll
  for (int k = 0; k < TILE / 16; ++k) {
    RsM64N256K16Bf16(o, frag[k], v_desc.At(MlaRowsVStepOffset(k)), 1);
  }
  Commit();
}
// The same with the other warpgroup's P, from the buffer's rope block.
MLA_INLINE void PvOther(float (&o)[128], const u8* tile, int wg) {
  if (MLA_ABLATE_MATH) return;
  const Desc v_desc = VOperand(tile, wg), p_desc = KMajor(tile + 8 * BLOCK_BYTES);
  Fence();
#pragma unroll
  for (int k = 0; k < TILE / 16; ++k) {
    SsM64N256K16<true>(o, p_desc.At(k * STEP_BYTES), v_desc.At(MlaRowsVStepOffset(k)), 1);
  }
  Commit();
}

// g0: the CTA's seesaw pairs before this item (the timeline's count).
MLA_INLINE void ProcessItemSeesaw(const MlaDecodeParams& p, const MlaWorkItem& item,
                                  const MlaSeqInfo& s, const Smem& sm, const MlaWorkItem& next,
                                  MlaSeqInfo& next_seq, int g0) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int wg = warp >> 2, r = lane >> 2, quad = lane & 3;
  const int row0 = 16 * (warp & 3) + r;  // this thread's rows: row0, row0 + 8
  const mla_wgmma::ItemRange range = mla_wgmma::RangeOf(item, s, ROWS);
  const int kv_lo = range.kv_lo, kv_hi = range.kv_hi, num_tiles = range.num_tiles;
  const SeesawSmem ss = CarveSeesaw(sm);

  int lim[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    lim[h] = min(kv_hi, VisibleKv<NUM_HEADS, CAUSAL>(s, item.row_start + row0 + 8 * h));
  }
  // Per row: a8 multiplies in each row's own scale once Q is stored.
  float score_scale[2];
  score_scale[0] = score_scale[1] = p.sm_scale * LOG2E;

  float m[2] = {NegInf(), NegInf()}, l[2] = {0.0f, 0.0f};
  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.0f;

  // The previous item's generic writes to the tile buffers (cp.async tiles,
  // P, staged rows) before tensor copies rewrite them (mla_wgmma_tma.cuh).
  if (mla_wgmma::KV_TMA) FenceProxyAsync();
  __syncthreads();  // the previous item is done with shared memory
  if (threadIdx.x == 0) {
    for (int i = 0; i < 4; ++i) MbarInit(ss.full + i, 4);  // one arrival per copying warp
    if (mla_wgmma::KV_TMA) {
      // The initialisation, visible to the tensor copies that complete on them.
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
      if (p.kv_map_rows > 0) mla_wgmma::PrefetchTensorMap(&p.kv_maps[0]);
    }
  }
  __syncthreads();
  if (num_tiles > 0) CopySeesawBlocks(p, s, kv_lo, kv_hi, sm, wg, 0, ss.full + wg);
  if (num_tiles > 0) {
    const float back = LoadQ(p, s, item.row_start, sm);
    score_scale[0] *= back;
    score_scale[1] *= back;
  }
  next_seq = LoadSeq(p, next);
  FenceProxyAsync();  // Q -> wgmma reads
  __syncthreads();
  if (Q_MODE == Q_MODE_FP8) {  // LoadQ's row scales, past the barrier
    score_scale[0] *= sm.qs[row0];
    score_scale[1] *= sm.qs[row0 + 8];
  }
  if (wg == 1 && num_tiles > 1) {
    // Tile 1 (both halves) once tile 0 is in: when every CTA starts at once,
    // asking for both tiles together delays the first (RESULTS.md v41).
    MbarWait(ss.full, 0);
    MbarWait(ss.full + 1, 0);
    CopySeesawBlocks(p, s, kv_lo + TILE, kv_hi, sm, 0, 1, ss.full + 2);
    CopySeesawBlocks(p, s, kv_lo + TILE, kv_hi, sm, 1, 1, ss.full + 3);
  }
  const Desc q_desc = KMajor(sm.q);
  u8* const buf_a = sm.kv;
  u8* const buf_b = sm.kv + OPERAND_BYTES;

  float sc[32];
  u32 frag[4][4];
  // One loop per warpgroup: ptxas serialises every wgmma when the roles part
  // inside a loop that both run.
  if (wg == 0) {
    for (int pair = 0; 2 * pair < num_tiles; ++pair) {
      const int ta = 2 * pair, tb = ta + 1;
      const bool has_b = tb < num_tiles;
      const u32 parity = static_cast<u32>(pair & 1);
      const int ja = kv_lo + ta * TILE, jb = ja + TILE;
      const int g = g0 + pair;
      float mx[2] = {NegInf(), NegInf()}, base[2] = {0.0f, 0.0f};
      float a_a[2] = {1.0f, 1.0f}, a_b[2] = {1.0f, 1.0f}, sum[2] = {0.0f, 0.0f};
      ScoreSeesaw<0>(sc, q_desc, buf_a, ss.full, parity, 0, g);
      Wait<0>();
      PinAccumulators(sc);
      SeesawStamp(0, g, mla_timeline::kSeSDone);
      MaskScores(sc, lim, ja + 2 * quad, ja + TILE > min(lim[0], lim[1]));
      TileMax(sc, score_scale, mx);
      RaiseAndPublishMax(m, mx, ss.max_a, row0, quad, base, a_a);
      BarArrive(BAR_MAX_A);
      SeesawStamp(0, g, mla_timeline::kSeMaxOut);
      SoftmaxSeesaw(sc, score_scale, base, frag, buf_a + 8 * BLOCK_BYTES, row0, quad, sum);
      FenceProxyAsync();  // P_A -> warpgroup 1's wgmma reads
      BarArrive(BAR_P_A);
      SeesawStamp(0, g, mla_timeline::kSePOut);
      RescaleO(o, a_a);  // (nothing in flight: S_A's wait covered the last P V)
      PvOwn(o, frag, buf_a, 0);
#pragma unroll
      for (int h = 0; h < 2; ++h) l[h] = l[h] * a_a[h] + sum[h];
      // A's V blocks 0..3 are free once P_A V_A[L] is done: tile A + 2 goes
      // out now, while warpgroup 1 runs its softmax, so that it has the rest
      // of the pair to land.
      Wait<0>();
      PinFragments(frag);
      PinAccumulators(o);
      if (ta + 2 < num_tiles) {
        CopySeesawBlocks(p, s, ja + 2 * TILE, kv_hi, sm, 0, 0, ss.full + 0);
      }
      SeesawStamp(0, g, mla_timeline::kSeOwnPvDone);
      if (has_b) {
        BarWait(BAR_MAX_B);
        SeesawStamp(0, g, mla_timeline::kSeMaxIn);
        AdoptMax(m, ss.max_b, row0, a_b, l);
        RescaleO(o, a_b);
        BarWait(BAR_P_B);
        SeesawStamp(0, g, mla_timeline::kSePIn);
        PvOther(o, buf_b, 0);
        Wait<0>();  // P_B V_B[L] is done: B's blocks 0..3 and P_B are free
        PinAccumulators(o);
        if (tb + 2 < num_tiles) {
          CopySeesawBlocks(p, s, jb + 2 * TILE, kv_hi, sm, 0, 1, ss.full + 2);
        }
      }
      SeesawStamp(0, g, mla_timeline::kSePairDone);
    }
  } else {
    for (int pair = 0; 2 * pair < num_tiles; ++pair) {
      const int ta = 2 * pair, tb = ta + 1;
      const bool has_b = tb < num_tiles;
      const u32 parity = static_cast<u32>(pair & 1);
      const int ja = kv_lo + ta * TILE, jb = ja + TILE;
      const int g = g0 + pair;
      float mx[2] = {NegInf(), NegInf()}, base[2] = {0.0f, 0.0f};
      float a_a[2] = {1.0f, 1.0f}, a_b[2] = {1.0f, 1.0f}, sum[2] = {0.0f, 0.0f};
      if (has_b) {
        ScoreSeesaw<1>(sc, q_desc, buf_b, ss.full + 2, parity, 1, g);
        Wait<0>();
        PinAccumulators(sc);
        SeesawStamp(1, g, mla_timeline::kSeSDone);
        MaskScores(sc, lim, jb + 2 * quad, jb + TILE > min(lim[0], lim[1]));
        TileMax(sc, score_scale, mx);
      }
      BarWait(BAR_MAX_A);
      SeesawStamp(1, g, mla_timeline::kSeBMaxIn);
      AdoptMax(m, ss.max_a, row0, a_a, l);
      if (has_b) {
        RaiseAndPublishMax(m, mx, ss.max_b, row0, quad, base, a_b);
        BarArrive(BAR_MAX_B);
        SeesawStamp(1, g, mla_timeline::kSeBMaxOut);
      }
      BarWait(BAR_P_A);
      SeesawStamp(1, g, mla_timeline::kSeBPIn);
      RescaleO(o, a_a);  // (nothing in flight: the last pair ended with a wait)
      PvOther(o, buf_a, 1);
      // P_B's softmax runs while P_A V_A[R] is on the tensor cores, so that
      // A's blocks 4..7 come free, and tile A + 2 goes out, one softmax
      // earlier than softmax-then-product would (RESULTS.md v42).
      if (has_b) {
        SoftmaxSeesaw(sc, score_scale, base, frag, buf_b + 8 * BLOCK_BYTES, row0, quad, sum);
        FenceProxyAsync();  // P_B -> warpgroup 0's wgmma reads
        BarArrive(BAR_P_B);
        SeesawStamp(1, g, mla_timeline::kSeBPOut);
#pragma unroll
        for (int h = 0; h < 2; ++h) l[h] = l[h] * a_b[h] + sum[h];
      }
      // A's V blocks 4..7 and P_A are free once P_A V_A[R] is done: tile
      // A + 2 goes out before P_B V_B[R] (warpgroup 0's P_B V_B[L] keeps the
      // tensor cores busy meanwhile).
      Wait<0>();
      PinAccumulators(o);
      if (ta + 2 < num_tiles) {
        CopySeesawBlocks(p, s, ja + 2 * TILE, kv_hi, sm, 1, 0, ss.full + 1);
      }
      SeesawStamp(1, g, mla_timeline::kSeBOtherPvDone);
      if (has_b) {
        RescaleO(o, a_b);
        PvOwn(o, frag, buf_b, 1);
        Wait<0>();  // P_B V_B[R] is done: B's blocks 4..7 are free
        PinFragments(frag);
        PinAccumulators(o);
        if (tb + 2 < num_tiles) {
          CopySeesawBlocks(p, s, jb + 2 * TILE, kv_hi, sm, 1, 1, ss.full + 3);
        }
      }
      SeesawStamp(1, g, mla_timeline::kSePairDone);
    }
  }

  // ---- epilogue: both warpgroups' row sums, normalise, write ----
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    if (quad == 0) (wg == 0 ? sm.red : sm.alpha)[row0 + 8 * h] = l[h];
  }
  __syncthreads();  // also: every copy landed and was read, no wait is pending
  if (threadIdx.x == 0) {
    for (int i = 0; i < 4; ++i) {
      asm volatile("mbarrier.inval.shared::cta.b64 [%0];\n" ::"r"(mla_wgmma::SmemAddr(ss.full + i))
                   : "memory");
    }
  }
  const float sums[2] = {sm.red[row0] + sm.alpha[row0], sm.red[row0 + 8] + sm.alpha[row0 + 8]};
  StoreRows(p, item, s, o, m, sums);
}

}  // namespace mla_wgmma_rows

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_DECODE_WGMMA_ROWS_SEESAW_CUH_
