// Split-KV merge and the a8 Q-amax reduction: small portable kernels that run
// around the decode kernel on the same stream.
//
// Combine: each split's output is already normalised, so the merge weights are
// exp(lse_k - max lse) and the merged lse is max + log(sum of weights).
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_COMBINE_CUH_
#define MLAJIT_KERNEL_TEMPLATES_MLA_COMBINE_CUH_

#include "mla_common.cuh"
#include "mla_timeline.cuh"

namespace mla_combine {

constexpr int NUM_THREADS = NUM_WARPS * 32;
constexpr int GROUPS_PER_BLOCK = NUM_THREADS / 32;  // 32-lane groups
// Splits whose loads are in flight together: 16, or 8 for whole rows, whose
// lanes hold twice the columns (the registers of 16 would spill under the
// launch bounds).
template <int LC>
MLA_HOST_DEVICE constexpr int MergeBatch() {
  return LC == 16 ? 8 : 16;
}
constexpr int PARTIAL_BYTES = MLA_PARTIAL_BYTES;

// HIP's second launch bound means waves per execution unit, not CTAs per SM.
#if MLA_HIP
#define MLA_COMBINE_LAUNCH_BOUNDS __launch_bounds__(NUM_WARPS * 32)
#else
#define MLA_COMBINE_LAUNCH_BOUNDS \
  __launch_bounds__(NUM_WARPS * 32, MlaCombineBlocksPerSm(NUM_WARPS * 32))
#endif

// A lane merges LC columns of a row, as CHUNKS vectors of VC consecutive
// columns 32 * VC apart: 4 (a quarter of the row per 32-lane group, one
// 8-byte load per split), 8 (a half, one 16-byte load) or 16 (the whole row,
// two 16-byte loads, each a warp-wide contiguous 512 bytes). Its LC values of
// a split, as stored, are W words, chunk by chunk.
template <int LC>
struct Lane {
  static constexpr int VC = LC < 8 ? LC : 8;  // columns per vector load
  static constexpr int CHUNKS = LC / VC;
  static constexpr int W = LC * PARTIAL_BYTES / 4;
  static constexpr int VW = W / CHUNKS;                 // words per vector load
  static constexpr int PARTS = HEAD_DIM_V / (32 * LC);  // groups per row
  static_assert(VW == 2 || VW == 4, "8- or 16-byte loads");
  static_assert(PARTS * 32 * LC == HEAD_DIM_V, "a row splits into whole parts");
  // The column of this lane's chunk `j` of part `part`.
  static MLA_INLINE int Column(int part, int lane, int j) {
    return ((part * CHUNKS + j) * 32 + lane) * VC;
  }
};

// A batch of a row's splits: their LSEs and this lane's columns of each.
template <int B, int LC>
struct SplitBatch {
  float l[B];
  u32 v[B][Lane<LC>::W];
};
// Splits [k0, k0 + B), all loads issued before any is used; splits past n load
// nothing (predicated off) and weigh 0. `lse` points at split 0, `e` is the
// element of split 0's partial_o (mla_common.cuh).
template <int B, int LC>
MLA_INLINE void LoadSplits(SplitBatch<B, LC>& b, const float* lse, const float* partial_o,
                           long long e, int k0, int n) {
  constexpr long long SPLIT_STRIDE = static_cast<long long>(BLOCK_M) * HEAD_DIM_V;
  const u8* base = reinterpret_cast<const u8*>(partial_o);
#pragma unroll
  for (int i = 0; i < B; ++i) {
    const int k = k0 + i;
    b.l[i] = NegInf();
#pragma unroll
    for (int w = 0; w < Lane<LC>::W; ++w) b.v[i][w] = 0;
    if (k < n) {
      b.l[i] = lse[k * BLOCK_M];
#pragma unroll
      for (int j = 0; j < Lane<LC>::CHUNKS; ++j) {
        const u8* at = base + (e + k * SPLIT_STRIDE + j * 32 * Lane<LC>::VC) * PARTIAL_BYTES;
        u32* to = &b.v[i][j * Lane<LC>::VW];
        if constexpr (Lane<LC>::VW == 4) {
          const uint4 v = *reinterpret_cast<const uint4*>(at);
          to[0] = v.x;
          to[1] = v.y;
          to[2] = v.z;
          to[3] = v.w;
        } else {
          const uint2 v = *reinterpret_cast<const uint2*>(at);
          to[0] = v.x;
          to[1] = v.y;
        }
      }
    }
  }
}
// e^(l - mx) for l <= mx, mx finite, as one 2^x: no special cases to branch
// over (l = -inf gives 0), where expf spends a branch and its range
// reduction on each split of the merge's dependent chain (RESULTS.md v56).
// ex2.approx's relative error (2^-22) is far inside the output's bar.
MLA_INLINE float MergeWeight(float l, float mx_log2) {
  const float x = fmaf(l, LOG2E, -mx_log2);
#if MLA_HIP
  return exp2f(x);
#else
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
#endif
}

// Adds the batch with weights exp(lse - mx), mx finite; a split that saw
// nothing for this row has lse -inf and weight 0.
template <int B, int LC>
MLA_INLINE void MergeSplits(const SplitBatch<B, LC>& b, float mx, float& wsum, float (&acc)[LC]) {
  const float mx_log2 = mx * LOG2E;
#pragma unroll
  for (int i = 0; i < B; ++i) {
    const float w = MergeWeight(b.l[i], mx_log2);
    wsum += w;
#pragma unroll
    for (int c = 0; c < LC; ++c) {
      const u32 word = b.v[i][c * PARTIAL_BYTES / 4];
      const float v = PartialToFloat(static_cast<u16>(c % 2 ? word >> 16 : word & 0xffffu));
      acc[c] += w * v;
    }
  }
}

// One unit of a combine item: row r, the LC * 32 columns of part `part`,
// merged over the item's splits by one 32-lane group, in batches of
// MergeBatch splits: a batch's LSEs load with its partials, all in flight
// before any is used, so a unit of up to MergeBatch splits costs one memory
// latency. Batches merge online: one whose largest LSE exceeds the running
// one rescales what is merged so far, so no pass over the LSEs comes first.
// A single path (no separate one for short units) keeps the merge kernels
// small: the calls measured slower the more code their merge kernel held,
// executed or not (RESULTS.md v57, v58).
template <int LC>
MLA_INLINE void MergeUnit(const MlaDecodeParams& p, const MlaCombineItem& item, int r, int part) {
  const int lane = threadIdx.x & 31;
  const MlaSeqInfo s = p.seqs[item.seq];  // in flight with the first batch below
  // Rows past the sequence's end are skipped (uniform across the group).
  // Their partial rows lie inside the allocation (a slot holds a whole tile),
  // so the first batch loads before the test, values unused, and the seq
  // record costs no round trip of its own.
  const bool row_valid = item.row_start + r < s.q_len * NUM_HEADS;
  const int n = item.num_splits;
  const int col = Lane<LC>::Column(part, lane, 0);
  const float* lse = p.partial_lse + static_cast<long long>(item.partial_start) * BLOCK_M + r;
  const long long e = (static_cast<long long>(item.partial_start) * BLOCK_M + r) * HEAD_DIM_V + col;
  float acc[LC];
#pragma unroll
  for (int c = 0; c < LC; ++c) acc[c] = 0.0f;
  float wsum = 0.0f;
  float mx = NegInf();
  for (int k0 = 0; k0 < n; k0 += MergeBatch<LC>()) {
    SplitBatch<MergeBatch<LC>(), LC> b;
    LoadSplits(b, lse, p.partial_o, e, k0, n);
    if (!row_valid) return;
    float bm = mx;
#pragma unroll
    for (int i = 0; i < MergeBatch<LC>(); ++i) bm = fmaxf(bm, b.l[i]);
    if (bm == NegInf()) continue;  // nothing seen yet
    // A larger maximum rescales what is merged so far: e^(mx - bm), 0 the
    // first time (mx = -inf, nothing merged yet).
    if (bm > mx) {
      const float scale = MergeWeight(mx, bm * LOG2E);
      wsum *= scale;
#pragma unroll
      for (int c = 0; c < LC; ++c) acc[c] *= scale;
      mx = bm;
    }
    MergeSplits(b, mx, wsum, acc);
  }
  const float inv = wsum > 0.0f ? MlaPartialScale(p) / wsum : 0.0f;
  const long long qrow = static_cast<long long>(s.qo_start) * NUM_HEADS + item.row_start + r;
  u16* out = static_cast<u16*>(p.out) + qrow * HEAD_DIM_V + col;
  u32 w[LC / 2];
#pragma unroll
  for (int c = 0; c < LC / 2; ++c) w[c] = PackBf16x2(acc[2 * c] * inv, acc[2 * c + 1] * inv);
#pragma unroll
  for (int j = 0; j < Lane<LC>::CHUNKS; ++j) {
    const u32* v = &w[j * Lane<LC>::VW];
    u16* at = out + j * 32 * Lane<LC>::VC;
    if constexpr (Lane<LC>::VW == 4) {
      *reinterpret_cast<uint4*>(at) = make_uint4(v[0], v[1], v[2], v[3]);
    } else {
      *reinterpret_cast<uint2*>(at) = make_uint2(v[0], v[1]);
    }
  }
  if (WRITE_LSE && part == 0 && lane == 0) {
    p.lse[qrow] = wsum > 0.0f ? mx + logf(wsum) : NegInf();
  }
}

// The units (combine item, row, part) in order, one 32-lane group each, the
// groups of one wave of resident CTAs (the host sizes the grid with
// MlaCombineBlocksPerSm) striding over them. The next unit's item record loads
// while the current unit merges, so a unit's only dependent round trip is its
// partials. The first unit's record loads before the wait for the decode:
// the plan's records are in place before the decode starts (copied by the
// host before it on the stream, or written by the plan kernel, which the
// decode waited for before letting this kernel start), so the merge's first
// round trip after the decode is the partials' (one fewer on the chain
// that every call with a split pays after its decode).
template <int LC>
MLA_INLINE void CombineUnits(const MlaDecodeParams& p, int num_combine) {
  constexpr int UNITS_PER_ITEM = BLOCK_M * Lane<LC>::PARTS;
  const long long total = static_cast<long long>(num_combine) * UNITS_PER_ITEM;
  const long long stride = static_cast<long long>(gridDim.x) * GROUPS_PER_BLOCK;
  long long flat = static_cast<long long>(blockIdx.x) * GROUPS_PER_BLOCK + (threadIdx.x >> 5);
  if (flat >= total) return;
  MlaCombineItem item = p.combine[flat / UNITS_PER_ITEM];
  if (!MLA_ABLATE_MERGE_WAIT_LAST) MlaGridDependencySync();  // the decode's partials, from here on
  mla_timeline::MergeWaited();
  if (MLA_ABLATE_MERGE) return;
  for (; flat < total; flat += stride) {
    const long long next = flat + stride;
    const MlaCombineItem next_item = next < total ? p.combine[next / UNITS_PER_ITEM] : item;
    const int unit = static_cast<int>(flat % UNITS_PER_ITEM);
    MergeUnit<LC>(p, item, unit / Lane<LC>::PARTS, unit % Lane<LC>::PARTS);
    item = next_item;
  }
  if (MLA_ABLATE_MERGE_WAIT_LAST) MlaGridDependencySync();
}

// The combine items' count: the plan's, or the device planner's (read before
// the wait for the decode, like the first unit's record in CombineUnits).
MLA_INLINE int NumCombine(const MlaDecodeParams& p) {
  return p.plan_counters != 0 ? p.plan_counters[MLA_PLAN_NUM_COMBINE] : p.num_combine;
}

// The merge at the width the host chose (MlaCombineLaneColumns), a kernel
// holding only this path's code: the merge's calls measured faster the
// smaller its kernel, whichever path ran (RESULTS.md v57; it runs once a
// call, cold, right after the decode).
template <int LC>
MLA_INLINE void CombineItemsOfWidth(const MlaDecodeParams& p) {
  CombineUnits<LC>(p, NumCombine(p));
}

// The merge at the width that the item count gives, chosen in the kernel:
// for device-planned calls, whose count the host does not know.
MLA_INLINE void CombineItems(const MlaDecodeParams& p) {
  const int num_combine = NumCombine(p);
  const long long rows = static_cast<long long>(num_combine) * BLOCK_M;
  const long long groups = static_cast<long long>(gridDim.x) * GROUPS_PER_BLOCK;
  switch (MlaCombineLaneColumns(rows, groups)) {
    case 4:
      CombineUnits<4>(p, num_combine);
      break;
    case 16:
      CombineUnits<16>(p, num_combine);
      break;
    default:
      CombineUnits<8>(p, num_combine);
  }
}

}  // namespace mla_combine

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_COMBINE_CUH_
