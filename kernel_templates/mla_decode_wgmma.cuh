// Hopper (sm_90a) MLA decode path: warpgroup MMA with the KV tile as the M
// operand ("swap AB"), for tiles of 16 or 32 query rows. fp8 and bf16 tiles
// are read as stored; MXFP4 tiles are converted to e4m3 (times a power of two
// per tile) by one or two more warpgroups (mla_wgmma_mxfp4.cuh) and then read
// like fp8 ones.
//
// Decode has few query rows per sequence (heads x q_len: 16..32 for most
// DeepSeek deployments) and many KV tokens. wgmma's M is at least 64, so
// instead of padding the rows to 64 the kernel computes the transposed
// products, with 64 KV tokens as M and the rows as N:
//   S^T [64 tokens x N rows]  = K  [64 x 576] . Q^T [576 x N]
//   O^T [512 dims  x N rows] += V^T[512 x 64] . P^T [64 x N]
// One CTA is one warpgroup (4 warps); two CTAs share an SM for fp8. bf16
// tiles of 32 rows may instead be two warpgroups of 16 rows each (8 warps,
// ROW_GROUPS): both read every KV tile from the same stage, copied once, and
// meet at the same CTA-wide barriers; Q^T, P^T and the row statistics are
// each warpgroup's own (GroupSmem).
//
// S^T is one product with both operands in shared memory, K the tile as
// stored (in the 128-byte swizzle, fp8's rope block in the 64-byte one,
// which the copies write):
//   - fp8 KV: an e4m3 product, Q^T its e4m3 codes. a8 has them already; bf16
//     Q is split into two e4m3 terms, hi + lo / 16, which hold the tile's
//     bf16 values exactly from 2^-13 of their largest magnitude up, and which
//     S computes side by side as 2N columns. (S used to convert each K byte
//     to f16 in registers, 12 dependent rounds of loads, conversions and MMAs
//     per tile.)
//   - bf16 KV: a bf16 product, Q^T in the 128-byte swizzle too. (Until v66
//     K came from registers, 36 chained products behind their shared loads:
//     about 1800 cycles a tile against fp8's 600-1000.)
//
// P V's A operand (V^T) comes from registers: each thread reads the tile
// bytes it needs with 16-byte shared loads (and converts fp8 -> f16 on the
// way), so every KV byte is read from shared memory once per product and
// never written back converted. A thread's M rows (output dims) are chosen
// so that its loads are whole 16-byte chunks (MlaWgmmaOutDim), which the
// epilogue writes back in place. The index maps live in mla_wgmma_layout.h,
// where the CPU tests check them.
// P^T lives in shared memory in the no-swizzle core-matrix layout (8 rows x
// 16 bytes per core matrix) and is read through a descriptor.
//
// Shared memory: MlaWgmmaSmemBytes() in mla_params.h (host and device agree).
// Files: mla_wgmma_common.cuh (constants, wgmma primitives), mla_wgmma_loads.cuh
// (Q, KV tiles, A fragments), mla_wgmma_layout.h (the index maps); this file
// runs a CTA's work items.
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_DECODE_WGMMA_CUH_
#define MLAJIT_KERNEL_TEMPLATES_MLA_DECODE_WGMMA_CUH_

#include "mla_wgmma_common.cuh"
#include "mla_wgmma_loads.cuh"
#include "mla_wgmma_mxfp4.cuh"
#include "mla_wgmma_ss.cuh"
#include "mla_timeline.cuh"

namespace mla_wgmma {

// ---- one work item --------------------------------------------------------

// Timeline stamps (mla_timeline.cuh; nothing unless MLA_TIMELINE is set), by
// thread 0: `stamps` counts the CTA's tiles [0] and work items [1].
MLA_INLINE void TileStamp(const int (&stamps)[2], int event) {
  mla_timeline::Stamp(0, 0, stamps[0], event);
}
MLA_INLINE void ItemStamp(const int (&stamps)[2], int event) {
  mla_timeline::Stamp(1, 0, stamps[1], event);
}

// `next` is the CTA's following work item (or `item` again): its sequence
// record is fetched into `next_seq` once this item's Q is loaded, so that the
// next item does not start with a dependent global round trip. MXFP4: `g`
// counts the CTA's e4m3 tile uses (mla_wgmma_mxfp4.cuh).
// fp8 tiles by tensor copies: bit b of `tma_phase` is the parity of stage
// b's next barrier phase (counted over the CTA's work items).
MLA_INLINE void ProcessItem(const MlaDecodeParams& p, const MlaWorkItem& item, const MlaSeqInfo& s,
                            const Smem& sm, const MlaWorkItem& next, MlaSeqInfo& next_seq, int& g,
                            u32& tma_phase, int (&stamps)[2]) {
  ItemStamp(stamps, mla_timeline::kSwItemStart);
  // This warpgroup's rows of the item: [row_start, row_start + N).
  const unsigned tid = GroupTid();
  const int lane = tid & 31, warp = tid >> 5;
  const int r = lane >> 2, quad = lane & 3;
  const int rows_total = s.q_len * NUM_HEADS;
  const int group_row0 = RowGroup() * N;  // 0 with one row group
  const int row_start = item.row_start + group_row0;
  const ItemRange range = RangeOf(item, s, BLOCK_M);
  const int kv_lo = range.kv_lo, kv_hi = range.kv_hi, num_tiles = range.num_tiles;

  // This thread's accumulator columns (query rows): n = 8j + 2 quad + e.
  int lim[ROWS_PER_THREAD];
#pragma unroll
  for (int c = 0; c < ROWS_PER_THREAD; ++c) {
    const int n = 8 * (c / 2) + 2 * quad + (c % 2);
    lim[c] = min(kv_hi, VisibleKv<NUM_HEADS, CAUSAL>(s, row_start + n));
  }

  float score_scale = p.sm_scale * LOG2E;
  if (FP8) score_scale *= p.kv_scale;
  // MXFP4: O holds its values times 2^-frame, frame the shift of the last
  // tile (Smem::mx_shift), so that P V can take the tile's e4m3 codes as they
  // are; O is rescaled in fp32 when the shift moves.
  int frame = 0;

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

  // fp8 and bf16 tiles of 16 rows: Q's loads go out first, before the item
  // waits for shared memory and issues its first copies (they need only the
  // item). Holding Q (36 registers a thread for 16 rows, 72 for 32) across
  // the copies' issue spilled the 32-row kernels and those of MXFP4 tiles
  // (timed: MXFP4 6 us slower; RESULTS.md v40), and bf16's until its S took
  // K through descriptors (v66).
  constexpr bool Q_FIRST = !MX && N == 16;
  QRows q_rows;
  if (Q_FIRST && num_tiles > 0) q_rows = LoadQRows(p, s, row_start);
  if (KV_TMA) FenceProxyAsync();  // the epilogue's staged rows -> tensor copies
  SyncMma();  // the previous item is done with shared memory
  u32 tma_tiles = 0;  // bit b: stage b's tile comes by tensor copies
  if (num_tiles > 0) {
#pragma unroll
    for (int st = 0; st < STAGES - 1; ++st) {
      if (!MX && st < num_tiles && IssueKvTile(p, s, kv_lo + st * TILE, kv_hi, st, sm)) {
        tma_tiles |= 1u << st;
      }
      CpAsyncCommit();
    }
    if (!Q_FIRST) q_rows = LoadQRows(p, s, row_start);
    score_scale *= StoreQ(q_rows, sm);
  }
  next_seq = LoadSeq(p, next);
  ItemStamp(stamps, mla_timeline::kSwQLoaded);
  const VAddr v_addr = MakeVAddr(sm.raw, warp, r, quad);
  const Desc q_desc = E4M3_TILES ? StepDesc(sm.q) : SwizzledDesc(sm.q, 16, 1024, 1);
  const Desc p_desc = StepDesc(sm.p);

  for (int t = 0; t < num_tiles; ++t) {
    const int buf = MX ? MxBuffer(g) : t % STAGES;
    float tile_scale = score_scale;
    int shift = 0;
    if (MX) {
      MbarWait(&sm.full[buf], MxParity(g));  // converted by a converting warpgroup
      shift = sm.mx_shift[buf];
      tile_scale = ldexpf(tile_scale, shift);
    } else {
      CpAsyncWait<STAGES - 2>();
      if (KV_TMA && (tma_tiles >> buf & 1u) != 0) {
        MbarWait(&sm.full[buf], tma_phase >> buf & 1u);
        tma_phase ^= 1u << buf;
      }
    }
    TileStamp(stamps, mla_timeline::kSwTileWaited);
    // Q^T (first tile) / P^T stores -> wgmma reads; a partial tile's cp.async
    // and P^T -> the tensor copies issued next into the stage of tile t - 1.
    FenceProxyAsync();
    SyncMma();  // tile t landed everywhere; everyone is done with tile t-1
    TileStamp(stamps, mla_timeline::kSwTileSynced);
    // (Issuing these copies after S instead, off warp 0's way to S, took
    // 200 cycles off S and delayed the loads as much: RESULTS.md v39.)
    if (!MX) {
      if (t + STAGES - 1 < num_tiles) {
        const int nb = (t + STAGES - 1) % STAGES;
        const bool tma = IssueKvTile(p, s, kv_lo + (t + STAGES - 1) * TILE, kv_hi, nb, sm);
        tma_tiles = (tma_tiles & ~(1u << nb)) | (static_cast<u32>(tma) << nb);
      }
      CpAsyncCommit();
    }
    if (MLA_ABLATE_MATH && !MX) {
      ++stamps[0];
      continue;
    }
    const int tile_off = buf * STAGE_BYTES;

    // ---- S^T = K Q^T: this warp's 16 tokens x N rows ----
    float sacc[N / 2];
    if (E4M3_TILES) {
      // One e4m3 product on the tile as stored (mla_wgmma_layout.h): 16 k32
      // steps in the 128-byte-swizzled blocks, two in the rope block.
      const u8* tile = sm.raw + tile_off;
      const Desc k128 = SwizzledDesc(tile, 16, 1024, 1);
      const Desc k64 = SwizzledDesc(tile + kMlaWgmmaFp8RopeBlock, 16, 512, 2);
      float s8[N];  // NS / 2 used
      Fence();
#pragma unroll
      for (int k = 0; k < K8_STEPS; ++k) {
        const Desc a = k < 16 ? k128.At(MlaWgmmaFp8KStepOffset(k))
                              : k64.At(MlaWgmmaFp8KStepOffset(k) - kMlaWgmmaFp8RopeBlock);
        // (NS is 128 in the 64-row shapes, which compile this path but never run it)
        mla_wgmma_ss::SsE4m3<ELIGIBLE ? NS : 16>(s8, a, q_desc.At(k * Q8_STEP_BYTES), k > 0);
      }
      Commit();
      Wait<0>();
      TileStamp(stamps, mla_timeline::kSwSDone);
      PinAccumulators(s8);
      // Columns 8 j + c of the low terms are columns 8 (j + N / 8) + c.
#pragma unroll
      for (int i = 0; i < N / 2; ++i) {
        sacc[i] = Q_SPLIT ? s8[i] + s8[i + N / 2] * Q_LO_WEIGHT : s8[i];
      }
    } else {
      // One bf16 product on the tile as stored: four k16 steps of 32 bytes
      // in each of the nine 128-byte-swizzled blocks, Q^T alike. Step k
      // accumulates into set k % S_SETS. (Measured: the sets leave S's time
      // as it was with one, about 880 cycles alone and 1430 beside the next
      // tile's copies landing, RESULTS.md v66, but the kernel of 16 rows
      // then takes 210 registers instead of 254.)
      const Desc k128 = SwizzledDesc(sm.raw + tile_off, 16, 1024, 1);
      float sets[S_SETS][N / 2];
      Fence();
#pragma unroll
      for (int k = 0; k < K_STEPS; ++k) {
        mla_wgmma_ss::SsBf16<ELIGIBLE ? N : 16>(sets[k % S_SETS], k128.At(MlaRowsKStepOffset(k)),
                                                q_desc.At(MlaWgmmaQ16KStepOffset(N, k)),
                                                k >= S_SETS);
      }
      Commit();
      Wait<0>();
      TileStamp(stamps, mla_timeline::kSwSDone);
#pragma unroll
      for (int k = 0; k < S_SETS; ++k) PinAccumulators(sets[k]);
#pragma unroll
      for (int i = 0; i < N / 2; ++i) {
        sacc[i] = sets[0][i];
#pragma unroll
        for (int k = 1; k < S_SETS; ++k) sacc[i] += sets[k][i];
      }
    }

    // ---- online softmax over the tile's tokens, per query row ----
    // sacc[4j + 2h + e]: token 16 warp + r + 8h, row 8j + 2 quad + e.
    // Fast path: P relative to the running maxima m as they stand, with no
    // exchange between warps and no rescale of O, valid while no score
    // exceeds its row's m by more than HEADROOM (P <= 2^HEADROOM). The first
    // tile, or a score that jumps, sends the whole CTA through the exchange
    // (the decision is uniform over the warpgroup: SyncMmaOr).
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
      // a8: times the row's own scale (Smem::qs, stored with Q before the
      // tile loop's first barrier; read per tile, as registers held across
      // the loop spilled the 32-row kernels).
      const float row_tile_scale =
          Q_MODE == Q_MODE_FP8 ? tile_scale * sm.qs[8 * j + 2 * quad + e] : tile_scale;
      s0 = j0 < lim[c] ? s0 * row_tile_scale : NegInf();
      s1 = j0 + 8 < lim[c] ? s1 * row_tile_scale : NegInf();
      if (DEFERRED_MAX) {
        over |= fmaxf(s0, s1) > m[c] + HEADROOM;  // m = -inf: any visible score
        const float base = m[c] == NegInf() ? 0.0f : m[c];
        const float p0 = Exp2(s0 - base), p1 = Exp2(s1 - base);
        ls[c] = p0 + p1;
        WriteP(sm, warp, j, 2 * quad + e, r, PackOperand(p0, p1));
      }
    }
    if (DEFERRED_MAX) FenceProxyAsync();
    if (!DEFERRED_MAX || SyncMmaOr(over)) {
#pragma unroll
      for (int c = 0; c < ROWS_PER_THREAD; ++c) {
        const int j = c / 2, e = c % 2;
        float v = fmaxf(sacc[4 * j + e], sacc[4 * j + 2 + e]);
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 4));
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 8));
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 16));
        if (r == 0) sm.red[warp * N + 8 * j + 2 * quad + e] = v;
      }
      SyncMma();
      float alpha[ROWS_PER_THREAD];
#pragma unroll
      for (int c = 0; c < ROWS_PER_THREAD; ++c) {
        const int j = c / 2, e = c % 2;
        const int n = 8 * j + 2 * quad + e;
        const float v =
            fmaxf(fmaxf(sm.red[n], sm.red[N + n]), fmaxf(sm.red[2 * N + n], sm.red[3 * N + n]));
        const float mn = fmaxf(m[c], v);
        const float base = mn == NegInf() ? 0.0f : mn;  // nothing visible yet: avoid inf - inf
        alpha[c] = Exp2(m[c] - base);
        m[c] = mn;
        const float p0 = Exp2(sacc[4 * j + e] - base), p1 = Exp2(sacc[4 * j + 2 + e] - base);
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
      SyncMma();  // P^T rewritten; red read
    }
#pragma unroll
    for (int c = 0; c < ROWS_PER_THREAD; ++c) l[c] += ls[c];
    TileStamp(stamps, mla_timeline::kSwPWritten);

    if (MX && shift != frame) {  // uniform over the warpgroup
      // O is zero before the first tile; a jump past fp32's range flushes
      // (or saturates) O rather than multiplying a zero by infinity.
      const float f = t == 0 ? 1.0f : ldexpf(1.0f, min(max(frame - shift, -126), 126));
#pragma unroll
      for (int b = 0; b < 8; ++b) {
#pragma unroll
        for (int i = 0; i < N / 2; ++i) o[b][i] *= f;
      }
      frame = shift;
    }

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
    TileStamp(stamps, mla_timeline::kSwPvIssued);
    Wait<0>();
    TileStamp(stamps, mla_timeline::kSwPvDone);
    ++stamps[0];
#pragma unroll
    for (int b = 0; b < 8; ++b) PinAccumulators(o[b]);
    if (MX) {
      MbarArrive(&sm.empty[buf]);  // this thread's reads of the tile are done
      ++g;
    }
  }

  // ---- epilogue: row sums across lanes and warps, normalise, write ----
  ItemStamp(stamps, mla_timeline::kSwLoopDone);
#pragma unroll
  for (int c = 0; c < ROWS_PER_THREAD; ++c) {
    float v = l[c];
    v += __shfl_xor_sync(0xffffffffu, v, 4);
    v += __shfl_xor_sync(0xffffffffu, v, 8);
    v += __shfl_xor_sync(0xffffffffu, v, 16);
    if (r == 0) sm.red[warp * N + 8 * (c / 2) + 2 * quad + (c % 2)] = v;
  }
  if (MX) MbarWait(&sm.full[MxBuffer(g)], MxParity(g));  // a tile to stage in
  SyncMma();
  ItemStamp(stamps, mla_timeline::kSwSumsShared);
  // The normalised rows go through shared memory (the KV stages, idle now:
  // every copy has landed and every thread is past the tile loop; MXFP4: the
  // e4m3 tile of this use) so that global stores are whole rows. Stored from
  // the accumulators, each warp instruction wrote 16 bytes to each of 32
  // places 64 bytes apart; a probe timed those stores at 2.1 us of the 2.5 us
  // after the last tile (tools/bench/RESULTS.md v17).
  // Partials are kept before kv_scale (mla_common.cuh).
  const float v_scale = FP8 && item.partial < 0 ? p.kv_scale : MX ? ldexpf(1.0f, frame) : 1.0f;
  float* staged = reinterpret_cast<float*>(sm.raw + (MX ? MxBuffer(g) * STAGE_BYTES : 0)) +
                  RowGroup() * N * EPILOGUE_STRIDE;
  // Every row's sum before any store (the compiler cannot move these loads
  // above the staging stores, which it cannot prove apart from red), and the
  // fast division and logarithm: sum is at least 1 (the token that set the
  // row's maximum has p = 1) and below 2^22, and the rows end in bf16 or f16.
  // With the IEEE forms the four rows ran as four chains of a load, a
  // division with its slow-path branch and log2f, about 1500 cycles of the
  // epilogue (RESULTS.md v39).
  float inv[ROWS_PER_THREAD], lse[ROWS_PER_THREAD];
#pragma unroll
  for (int c = 0; c < ROWS_PER_THREAD; ++c) {
    const int n = 8 * (c / 2) + 2 * quad + (c % 2);
    const float sum = sm.red[n] + sm.red[N + n] + sm.red[2 * N + n] + sm.red[3 * N + n];
    inv[c] = sum > 0.0f ? __fdividef(v_scale, sum) : 0.0f;
    lse[c] = sum > 0.0f ? (m[c] + __log2f(sum)) * LN2 : NegInf();
  }
#pragma unroll
  for (int c = 0; c < ROWS_PER_THREAD; ++c) {
    const int j = c / 2, e = c % 2;
    const int n = 8 * j + 2 * quad + e;
    float* row = staged + n * EPILOGUE_STRIDE;
#pragma unroll
    for (int b = 0; b < 8; b += 2) {
      const float x = inv[c];
      const int q4 = MlaWgmmaOutChunk(KV_FORMAT, warp, lane, b);
      *reinterpret_cast<float4*>(row + MlaWgmmaStagedChunk(KV_FORMAT, q4)) =
          make_float4(o[b][4 * j + e] * x, o[b][4 * j + 2 + e] * x, o[b + 1][4 * j + e] * x,
                      o[b + 1][4 * j + 2 + e] * x);
    }
    if (warp == 0 && r == 0) {
      const int out_row = row_start + n;
      if (item.partial >= 0) {
        p.partial_lse[item.partial * BLOCK_M + group_row0 + n] = lse[c];
      } else if (WRITE_LSE && out_row < rows_total) {
        p.lse[static_cast<long long>(s.qo_start) * NUM_HEADS + out_row] = lse[c];
      }
    }
  }
  ItemStamp(stamps, mla_timeline::kSwOwnRowsStaged);
  SyncMma();
  ItemStamp(stamps, mla_timeline::kSwRowsStaged);
  if (item.partial >= 0) {
    // The slot holds the whole tile: BLOCK_M rows of 512 values; this
    // warpgroup's N, one row per pass.
    const long long e = (static_cast<long long>(item.partial) * BLOCK_M + group_row0) * HEAD_DIM_V;
#pragma unroll 4
    for (int n = 0; n < N; ++n) {
      StorePartial4(p.partial_o, e + n * HEAD_DIM_V + 4 * tid,
                    *reinterpret_cast<const float4*>(staged + n * EPILOGUE_STRIDE +
                                                     MlaWgmmaStagedChunk(KV_FORMAT, tid)));
    }
  } else {
    // The tile's rows below rows_total are consecutive rows of out: two rows of
    // 512 bf16 per pass, 8 dims per thread.
    const int rows = min(N, rows_total - row_start);
    u16* out = static_cast<u16*>(p.out) +
               (static_cast<long long>(s.qo_start) * NUM_HEADS + row_start) * HEAD_DIM_V;
    const int half = tid >> 6, d8 = 8 * (tid & 63);
#pragma unroll 4
    for (int n = half; n < N; n += 2) {
      if (n >= rows) break;
      const float* from = staged + n * EPILOGUE_STRIDE;
      const float4 a =
          *reinterpret_cast<const float4*>(from + MlaWgmmaStagedChunk(KV_FORMAT, d8 / 4));
      const float4 b =
          *reinterpret_cast<const float4*>(from + MlaWgmmaStagedChunk(KV_FORMAT, d8 / 4 + 1));
      *reinterpret_cast<uint4*>(out + n * HEAD_DIM_V + d8) =
          make_uint4(PackBf16x2(a.x, a.y), PackBf16x2(a.z, a.w), PackBf16x2(b.x, b.y),
                     PackBf16x2(b.z, b.w));
    }
  }
  ItemStamp(stamps, mla_timeline::kSwStoresIssued);
  ++stamps[1];
  if (MX) {
    MbarArrive(&sm.empty[MxBuffer(g)]);
    ++g;
  }
}

MLA_INLINE void DecodeCta(const MlaDecodeParams& p) {
  extern __shared__ __align__(128) u8 mla_smem[];
  const Smem sm = GroupSmem(CarveSmem(mla_smem), RowGroup());
  // Only thread 0 stamps, so its own write of the flag needs no barrier.
  mla_timeline::BeginLaunch();
  mla_timeline::Stamp(2, 0, 0, mla_timeline::kSwCtaStart);
  if (MX) {
    if (threadIdx.x == 0) {
      for (int b = 0; b < 2; ++b) {
        MbarInit(&sm.full[b], NUM_THREADS);
        MbarInit(&sm.empty[b], NUM_THREADS);
      }
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();  // the only CTA-wide barrier: the warpgroups part here
    if (threadIdx.x >= NUM_THREADS) {
      if (MX_CONVERTERS == 2) SetMaxRegisters<MX_CONVERTER_REGISTERS, false>();
      CopyAndConvertTiles(p, sm, threadIdx.x / NUM_THREADS - 1);
      return;
    }
    if (MX_CONVERTERS == 2) SetMaxRegisters<MX_PRODUCT_REGISTERS, true>();
  }
  if (KV_TMA) {
    if (threadIdx.x == 0) {
      for (int b = 0; b < STAGES; ++b) MbarInit(&sm.full[b], 1);
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
      if (p.kv_map_rows > 0) {
        PrefetchTensorMap(&p.kv_maps[0]);
        PrefetchTensorMap(&p.kv_maps[1]);
      }
    }
    // (the first item's barrier orders the initialisation before any use)
  }
  int g = 0;
  u32 tma_phase = 0;
  int stamps[2] = {0, 0};
  ForEachWorkItem(p, [&](const MlaWorkItem& item, const MlaSeqInfo& seq, const MlaWorkItem& next,
                         MlaSeqInfo& next_seq) {
    mla_timeline::GridItemStart(stamps[1], RangeOf(item, seq, BLOCK_M).num_tiles);
    ProcessItem(p, item, seq, sm, next, next_seq, g, tma_phase, stamps);
    mla_timeline::GridItemEnd(stamps[1] - 1);  // (ProcessItem counted it)
  });
  mla_timeline::EndLaunch(0);
  mla_timeline::GridExit(0);
}

}  // namespace mla_wgmma

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_DECODE_WGMMA_CUH_
