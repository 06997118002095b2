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
// Thread `tid` of 128 converts whole 32-element scale blocks (one table each,
// as the mma.sync path does): unit u is token u % 64 of block u / 64, so that
// a warp reads 32 tokens' records (306 bytes apart) and its stores spread over
// the swizzle. Records are 2-byte aligned: a block's 16 packed bytes come as
// five aligned words, realigned by one byte permute per word.
MLA_INLINE void ConvertMxTile(const MlaDecodeParams& p, const MlaSeqInfo& s, int j0, int valid,
                              const u8* stage, u8* dst, int tid) {
  constexpr int BLOCKS = HEAD_DIM_QK / 32;  // scale blocks per token: 18
  static_assert(TILE * BLOCKS % NUM_THREADS == 0, "whole units per thread");
  const mla_mma::MxTileLayout mx = mla_mma::MxLayoutOf(p, s, j0);
  const u8* records = stage + mx.offset;
#pragma unroll 3
  for (int u = tid; u < TILE * BLOCKS; u += NUM_THREADS) {
    const int tok = u % TILE, blk = u / TILE;
    uint4 w[4] = {};
    if (tok < valid) {
      const u8* record = records + tok * mx.stride;
      const u8* src = record + 16 * blk;
      const int shift = static_cast<int>(reinterpret_cast<unsigned long long>(src) & 2);
      const u32* words = reinterpret_cast<const u32*>(src - shift);
      u32 x[5];
#pragma unroll
      for (int i = 0; i < 5; ++i) x[i] = words[i];
      const u32 sel = shift ? 0x5432u : 0x3210u;
      const MlaMxTable table = mla_mma::MakeMxTable(record[MXFP4_PACKED_BYTES + blk]);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const MlaMxWords m = MlaMxToBf16x8(MlaPrmt(x[i], x[i + 1], sel), table);
        w[i] = make_uint4(m.w[0], m.w[1], m.w[2], m.w[3]);
      }
    }
    u8* row = dst + tok * RAW_STRIDE;
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
