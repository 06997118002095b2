// MXFP4 on the sm_90a swap-AB path (mla_decode_wgmma.cuh): the CTA's second
// warpgroup turns tiles as stored into bf16 tiles that the first warpgroup's
// products read exactly as they read bf16 KV.
//
// Hopper has no 4-bit MMA, and MXFP4 costs about two instructions per element
// to decode, four times fp8's conversion. Converting in the product warpgroup,
// once per tile, took (128,1,8192,16) from 487 us (the mma.sync path) to 570:
// with one CTA per SM (a bf16 tile is 72 KB) nothing overlapped the
// conversion (tools/bench/RESULTS.md v18). Here the conversion of tile t + 1
// runs beside the products of tile t, in another warpgroup.
//
// The copying warpgroup (threads 128..255) runs the CTA's work items in the
// same order as the product warpgroup. Per item it copies raw tiles STAGES - 1
// ahead (mla_mma::IssueMxTile: one cp.async run per tile where tiles are runs
// of records, token by token otherwise) and converts each into bf16 tile
// g % 2, g counting tile uses over the CTA (MxBuffer). Two mbarriers per bf16
// tile hand it over: `full` when converted, `empty` when its products are
// done. Each item also takes one use without a tile: its epilogue stages the
// output rows in that bf16 tile, while the next item's first tile is
// converted into the other.
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_MXFP4_CUH_
#define MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_MXFP4_CUH_

#include "mla_wgmma_common.cuh"

namespace mla_wgmma {

// The copying warpgroup's own barrier (named barrier 2).
MLA_INLINE void SyncCopy() { asm volatile("bar.sync 2, 128;\n" ::: "memory"); }

// MXFP4 stage `stage` (the tile at j0, `valid` tokens) -> the bf16 tile at
// `dst`, in the bf16 staging layout; tokens at or past `valid` become zeros.
// Thread `tid` of 128 converts token tid % 64's 32-element scale blocks
// tid / 64, + 2, + 4, ... (nine, one table each, as the mma.sync path does):
// a warp reads 32 tokens' records (306 bytes apart); its 16-byte stores meet
// two to a bank group (the swizzle gives 8 tokens 4 keys; storing them
// conflict-free measured no faster, RESULTS.md v18). All nine blocks' bytes
// are loaded before any is converted, so that the loads overlap each other
// and the conversions have independent work to interleave: converting block
// by block (each one's loads after the previous one's stores, which the
// compiler cannot reorder) ran at about one instruction per six cycles per
// warp (RESULTS.md v18). Records are 2-byte aligned: a block's 16 packed
// bytes come as five aligned words, realigned by one byte permute per word.
MLA_INLINE void ConvertMxTile(const MlaDecodeParams& p, const MlaSeqInfo& s, int j0, int valid,
                              const u8* stage, u8* dst, int tid) {
  constexpr int BLOCKS = HEAD_DIM_QK / 32;                 // scale blocks per token: 18
  constexpr int PER_THREAD = TILE * BLOCKS / NUM_THREADS;  // 9
  static_assert(NUM_THREADS == 2 * TILE && BLOCKS == 2 * PER_THREAD, "two threads per token");
  const mla_mma::MxTileLayout mx = mla_mma::MxLayoutOf(p, s, j0);
  const int tok = tid % TILE, blk0 = tid / TILE;
  const u8* record = stage + mx.offset + tok * mx.stride;
  const int shift = static_cast<int>(reinterpret_cast<unsigned long long>(record) & 2);
  const u32* words = reinterpret_cast<const u32*>(record - shift);
  const u32 sel = shift ? 0x5432u : 0x3210u;
  u32 x[PER_THREAD][5];
  u32 scale[PER_THREAD];
  const bool live = tok < valid;
#pragma unroll
  for (int k = 0; k < PER_THREAD; ++k) {
    const int blk = blk0 + 2 * k;
#pragma unroll
    for (int i = 0; i < 5; ++i) x[k][i] = live ? words[4 * blk + i] : 0u;
    scale[k] = live ? record[MXFP4_PACKED_BYTES + blk] : 0u;
  }
  u8* row = dst + tok * RAW_STRIDE;
#pragma unroll
  for (int k = 0; k < PER_THREAD; ++k) {
    const int blk = blk0 + 2 * k;
    uint4 w[4] = {};
    if (live) {
      const MlaMxTable table = mla_mma::MakeMxTable(static_cast<u8>(scale[k]));
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const MlaMxWords m = MlaMxToBf16x8(MlaPrmt(x[k][i], x[k][i + 1], sel), table);
        w[i] = make_uint4(m.w[0], m.w[1], m.w[2], m.w[3]);
      }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      *reinterpret_cast<uint4*>(row + MlaWgmmaChunkSlot(KV_FORMAT, tok, 4 * blk + i) * 16) = w[i];
    }
  }
}

// The copying warpgroup's whole run (threads NUM_THREADS .. 2 NUM_THREADS - 1).
MLA_INLINE void CopyAndConvertTiles(const MlaDecodeParams& p, const Smem& sm) {
  const int tid = threadIdx.x - NUM_THREADS;
  int g = 0;
  ForEachWorkItem(p, [&](const MlaWorkItem& item, const MlaSeqInfo& s, const MlaWorkItem& next,
                         MlaSeqInfo& next_seq) {
    next_seq = LoadSeq(p, next.seq);
    const ItemRange r = RangeOf(item, s);
    auto issue = [&](int t) {
      const int j0 = r.kv_lo + t * TILE;
      mla_mma::IssueMxTile(p, s, j0, min(TILE, r.kv_hi - j0), sm.mx + (t % STAGES) * MX_STAGE_BYTES,
                           tid, NUM_THREADS);
    };
    SyncCopy();  // every thread is done converting the previous item's stages
#pragma unroll
    for (int st = 0; st < STAGES - 1; ++st) {
      if (st < r.num_tiles) issue(st);
      CpAsyncCommit();
    }
    for (int t = 0; t < r.num_tiles; ++t) {
      CpAsyncWait<STAGES - 2>();
      SyncCopy();  // stage t landed everywhere; stage t - 1 is converted
      if (t + STAGES - 1 < r.num_tiles) issue(t + STAGES - 1);
      CpAsyncCommit();
      const int b = MxBuffer(g);
      MbarWait(&sm.empty[b], MxParity(g) ^ 1u);  // the first round passes at once
      const int j0 = r.kv_lo + t * TILE;
      ConvertMxTile(p, s, j0, r.kv_hi - j0, sm.mx + (t % STAGES) * MX_STAGE_BYTES,
                    sm.raw + b * TILE * RAW_STRIDE, tid);
      MbarArrive(&sm.full[b]);
      ++g;
    }
    // The epilogue's use: the tile is handed over as it is.
    MbarWait(&sm.empty[MxBuffer(g)], MxParity(g) ^ 1u);
    MbarArrive(&sm.full[MxBuffer(g)]);
    ++g;
  });
}

}  // namespace mla_wgmma

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_MXFP4_CUH_
