// Tensor-map (TMA) copies of KV tiles for the sm_90a paths that stage tiles
// as stored: fp8 (mla_decode_wgmma.cuh, mla_decode_wgmma_rows_ws.cuh), five
// copies per tile instead of 2304 cp.async of 16 bytes, and bf16 on the
// swap-AB path and the 64-row seesaw (mla_decode_wgmma_rows_seesaw.cuh), one
// copy per 64-dim block, completing on an mbarrier. The host encodes the maps per call
// (MlaDecodeParams::kv_maps, src/plan/kv_tensor_maps.h); tiles the maps cannot serve (an item's
// last part tile, whose masked tokens must read as zeros; slots beyond the maps) keep the cp.async
// copies, so a kernel mixes both and each tile's consumers know from TmaTile which one to wait for.
//
// Proxies: tensor copies write through the async proxy. Before one rewrites a
// stage that generic stores or cp.async wrote (a part tile, staged output),
// every thread that wrote it runs FenceProxyAsync ahead of the barrier that
// precedes the copy; the mbarrier's completion makes the copied bytes visible
// to the generic loads and the wgmma reads of the threads that wait on it.
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_TMA_CUH_
#define MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_TMA_CUH_

#include "mla_wgmma_common.cuh"

namespace mla_wgmma {

// Arrives on `bar` and adds `bytes` to what its phase waits for: the tensor
// copies that name `bar` count their bytes off as they land.
MLA_INLINE void MbarArriveExpectTx(u64* bar, int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(SmemAddr(bar)),
               "r"(bytes)
               : "memory");
}
// Copies the box of `map` at (x bytes, row y) into shared memory at `dst`
// (the box's swizzle applied to dst's address bits: 128-byte swizzles need
// dst 1024-byte aligned to land in the layout the map describes), counting
// its bytes on `bar`. `map` is a kernel parameter (__grid_constant__).
MLA_INLINE void TensorCopy2d(void* dst, const MlaTensorMap* map, int x, int y, u64* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(SmemAddr(dst)),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y), "r"(SmemAddr(bar))
      : "memory");
}
// Fetches a tensor map into the cache that tensor copies read it from.
MLA_INLINE void PrefetchTensorMap(const MlaTensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(map))
               : "memory");
}
// Whether the tile at j0 goes by tensor copies, and from which slot: maps
// present, the tile whole (below kv_hi), its 64 positions one run of slots
// (a page of a multiple of 64 tokens holds it when it starts on a multiple of
// 64) below kv_map_rows. The same answer in every thread.
MLA_INLINE bool TmaTile(const MlaDecodeParams& p, const MlaSeqInfo& s, int j0, int kv_hi,
                        int& slot) {
  constexpr int P = PAGE_SIZE > 0 ? PAGE_SIZE : 1;
  if (!KV_TMA || p.kv_map_rows <= 0 || j0 + TILE > kv_hi) return false;
  if (PAGE_SIZE > 0 && j0 % P + TILE > P) return false;
  const long long first = KvSlot<PAGE_SIZE>(p, s, j0);
  if (first + TILE > p.kv_map_rows) return false;
  slot = static_cast<int>(first);
  return true;
}

// Whether the tile at j0 may have come by cp.async (TmaTile false), without
// TmaTile's page-table read: exact for flat KV, always true for paged KV. Its
// consumers need a proxy fence only then (the header comment).
MLA_INLINE bool MayBeCpAsyncTile(const MlaDecodeParams& p, const MlaSeqInfo& s, int j0,
                                 int kv_hi) {
  if (PAGE_SIZE > 0) return true;
  int slot = 0;
  return !TmaTile(p, s, j0, kv_hi, slot);
}

// The tile at `slot` (TmaTile) into `stage` (1024-byte aligned) in the
// swap-AB stage layout: fp8 (MlaWgmmaFp8Offset) the four 128-byte-swizzled
// blocks of 128 latent codes, then the 64-byte-swizzled rope block; bf16
// (MlaRowsKvOffset) the nine 128-byte-swizzled blocks of 64 dims. Arms `bar`
// for the tile's bytes (one arrival). One thread calls it. (Spreading bf16's
// nine copies over four warps did not shorten the S they overlap: RESULTS.md
// v66.)
MLA_INLINE void CopyKvTileTma(const MlaDecodeParams& p, int slot, u8* stage, u64* bar) {
  MbarArriveExpectTx(bar, MlaWgmmaStageBytes(KV_FORMAT));
  constexpr int BLOCKS = KV_FORMAT == KV_FORMAT_FP8 ? 4 : 9;
#pragma unroll
  for (int i = 0; i < BLOCKS; ++i) {
    TensorCopy2d(stage + 8192 * i, &p.kv_maps[0], 128 * i, slot, bar);
  }
  if (KV_FORMAT == KV_FORMAT_FP8) {
    TensorCopy2d(stage + kMlaWgmmaFp8RopeBlock, &p.kv_maps[1], 512, slot, bar);
  }
}

}  // namespace mla_wgmma

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_TMA_CUH_
