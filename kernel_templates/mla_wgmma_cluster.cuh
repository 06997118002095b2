// Split merges inside the swap-AB decode kernel (mla_decode_wgmma.cuh), in
// distributed shared memory: when the host launches the kernel in clusters of
// k CTAs (MlaDecodeParams::cluster_merge = k, plan::ClusterMergeSize), the
// pieces of one split tile run on the CTAs of one cluster, at most one piece
// per CTA. Each piece leaves its normalised rows (fp32, the epilogue's staged
// output, kv_scale applied) in its KV stages and its LSEs in its Q area; after
// a cluster barrier every CTA merges a 1/k share of the tile's rows x 512
// dims, reading the k pieces' values from their CTAs' shared memory, and
// writes out and lse. A second barrier keeps every CTA's shared memory alive
// until its peers have read it.
//
// This replaces the partials' global round trip and the combine kernel
// (a second launch, its own chain of reads) for the calls whose splits are
// equal pieces of equal tiles, which is what the scheduler's aligned rule
// (MlaChooseCuts) makes of most decode batches.
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_CLUSTER_CUH_
#define MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_CLUSTER_CUH_

#include "mla_wgmma_common.cuh"

namespace mla_wgmma {

// Only the one-warpgroup fp8 and bf16 kernels (MlaClusterMergeEligible): every
// thread of the CTA must reach the cluster barriers, and MXFP4's converting
// warpgroups return early.
constexpr bool CLUSTER_MERGE =
    ELIGIBLE && MlaClusterMergeEligible(KV_FORMAT, BLOCK_M, BLOCK_N, NUM_WARPS);

// What a CTA leaves in its Q area for its peers (the Q area is free once the
// CTA's one work item is past its tile loop).
struct ClusterHeader {
  int split;      // this CTA's item is a piece of a tile merged in the cluster
  int qo_start;   // its sequence's first query row
  int rows;       // the tile's rows that exist (below the sequence's q_len x H)
  int row_start;  // the tile's first row
};

MLA_INLINE ClusterHeader* HeaderOf(const Smem& sm) { return reinterpret_cast<ClusterHeader*>(sm.q); }
MLA_INLINE float* LseOf(const Smem& sm) { return reinterpret_cast<float*>(sm.q + 16); }

MLA_INLINE u32 ClusterRank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
MLA_INLINE u32 ClusterCtas() {
  u32 n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(n));
  return n;
}
// Every thread of every CTA of the cluster: writes before are visible to
// reads after, in all of them.
MLA_INLINE void ClusterSync() {
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// The shared::cluster address of `local` (this CTA's shared memory) in CTA `rank`.
MLA_INLINE u32 PeerAddr(const void* local, u32 rank) {
  u32 a;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(a) : "r"(SmemAddr(local)), "r"(rank));
  return a;
}
MLA_INLINE float LoadPeerF32(u32 addr) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(addr));
  return v;
}
MLA_INLINE int4 LoadPeerI4(u32 addr) {
  int4 v;
  asm volatile("ld.shared::cluster.v4.s32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr));
  return v;
}
MLA_INLINE float4 LoadPeerF4(u32 addr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr));
  return v;
}

// Before the CTA's work items: until an item says otherwise, this CTA holds
// no piece (its LSEs read as -inf, so peers give it no weight). The barrier
// orders these stores before the first item's Q stores to the same area,
// which other threads make (without a Q split, LoadQ has no barrier of its
// own before them).
MLA_INLINE void ClusterMergeInit(const Smem& sm) {
  if (threadIdx.x == 0) HeaderOf(sm)->split = 0;
  if (threadIdx.x < N) LseOf(sm)[threadIdx.x] = NegInf();
  SyncMma();
}

// After the CTA's work items, in every CTA of the cluster.
//
// Each thread merges one unit (a row's 8 dims) per pass. Every peer load of
// a pass is issued before any is used: the header and the k LSEs together,
// then the k pieces' 8 values together, so a pass costs two round trips to
// the peers rather than one per piece (a piece with no visible token is
// read too, and dropped by a select: 0 * NaN would be NaN).
MLA_INLINE void ClusterMerge(const MlaDecodeParams& p, const Smem& sm) {
  ClusterSync();  // every piece's rows, LSEs and header are in place
  const u32 k = ClusterCtas(), rank = ClusterRank();
  const float* staged = reinterpret_cast<const float*>(sm.raw);
  // The tile's N rows x 64 chunks of 8 dims, in k contiguous shares.
  constexpr int UNITS = N * (HEAD_DIM_V / 8);
  const int lo = static_cast<int>(rank * UNITS / k), hi = static_cast<int>((rank + 1) * UNITS / k);
  for (int u = lo + static_cast<int>(threadIdx.x); u < hi; u += NUM_THREADS) {
    const int n = u / (HEAD_DIM_V / 8), d8 = (u % (HEAD_DIM_V / 8)) * 8;
    // The cluster's tile is rank 0's: its first piece always runs there.
    const int4 h = LoadPeerI4(PeerAddr(HeaderOf(sm), 0));
    float lse[MLA_CLUSTER_MERGE_MAX];
#pragma unroll
    for (int i = 0; i < MLA_CLUSTER_MERGE_MAX; ++i) {
      lse[i] = i < static_cast<int>(k) ? LoadPeerF32(PeerAddr(LseOf(sm) + n, i)) : NegInf();
    }
    float4 a[MLA_CLUSTER_MERGE_MAX], b[MLA_CLUSTER_MERGE_MAX];
#pragma unroll
    for (int i = 0; i < MLA_CLUSTER_MERGE_MAX; ++i) {
      if (i < static_cast<int>(k)) {
        const u32 at = PeerAddr(staged + n * EPILOGUE_STRIDE + d8, i);
        a[i] = LoadPeerF4(at);
        b[i] = LoadPeerF4(at + 16);
      }
    }
    const int split = h.x, qo_start = h.y, rows = h.z, row_start = h.w;
    if (split == 0 || n >= rows) continue;  // no tile to merge, or a row past the sequence's
    float top = NegInf();
#pragma unroll
    for (int i = 0; i < MLA_CLUSTER_MERGE_MAX; ++i) top = fmaxf(top, lse[i]);
    float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    float total = 0.0f;
#pragma unroll
    for (int i = 0; i < MLA_CLUSTER_MERGE_MAX; ++i) {
      if (i >= static_cast<int>(k)) continue;  // uniform: k is the cluster's size
      const bool seen = lse[i] != NegInf();
      const float w = seen ? expf(lse[i] - top) : 0.0f;
      total += w;
      acc[0] += seen ? w * a[i].x : 0.0f;
      acc[1] += seen ? w * a[i].y : 0.0f;
      acc[2] += seen ? w * a[i].z : 0.0f;
      acc[3] += seen ? w * a[i].w : 0.0f;
      acc[4] += seen ? w * b[i].x : 0.0f;
      acc[5] += seen ? w * b[i].y : 0.0f;
      acc[6] += seen ? w * b[i].z : 0.0f;
      acc[7] += seen ? w * b[i].w : 0.0f;
    }
    const float inv = total > 0.0f ? 1.0f / total : 0.0f;
    const long long row = static_cast<long long>(qo_start) * NUM_HEADS + row_start + n;
    u16* out = static_cast<u16*>(p.out) + row * HEAD_DIM_V + d8;
    *reinterpret_cast<uint4*>(out) =
        make_uint4(PackBf16x2(acc[0] * inv, acc[1] * inv), PackBf16x2(acc[2] * inv, acc[3] * inv),
                   PackBf16x2(acc[4] * inv, acc[5] * inv), PackBf16x2(acc[6] * inv, acc[7] * inv));
    if (WRITE_LSE && d8 == 0) p.lse[row] = total > 0.0f ? top + logf(total) : NegInf();
  }
  ClusterSync();  // the peers are done reading this CTA's shared memory
}

}  // namespace mla_wgmma

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_WGMMA_CLUSTER_CUH_
