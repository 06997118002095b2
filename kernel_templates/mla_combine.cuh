// Split-KV merge and the a8 Q-amax reduction: small portable kernels that run
// around the decode kernel on the same stream.
//
// Combine: each split's output is already normalised, so the merge weights are
// exp(lse_k - max lse) and the merged lse is max + log(sum of weights).
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_COMBINE_CUH_
#define MLAJIT_KERNEL_TEMPLATES_MLA_COMBINE_CUH_

#include "mla_common.cuh"

namespace mla_combine {

constexpr int NUM_THREADS = NUM_WARPS * 32;
constexpr int ROWS_PER_BLOCK = NUM_THREADS / 32;  // one 32-lane group per row
constexpr int DIMS_PER_LANE = HEAD_DIM_V / 32;    // 16

MLA_INLINE float GroupMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
#if MLA_HIP
    v = fmaxf(v, __shfl_xor(v, o));  // offsets < 32 stay inside a 32-lane half
#else
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
#endif
  }
  return v;
}

// One 32-lane group per (combine item, row): the lanes first find the largest
// split LSE together, then each lane merges 16 output columns over the splits.
// The splits' loads are independent, so they overlap instead of forming one
// long latency chain per row.
MLA_INLINE void CombineItems(const MlaDecodeParams& p) {
  const int lane = threadIdx.x & 31, group = threadIdx.x >> 5;
  const int num_combine =
      p.plan_counters != 0 ? p.plan_counters[MLA_PLAN_NUM_COMBINE] : p.num_combine;
  const long long total_rows = static_cast<long long>(num_combine) * BLOCK_M;
  for (long long flat = static_cast<long long>(blockIdx.x) * ROWS_PER_BLOCK + group;
       flat < total_rows; flat += static_cast<long long>(gridDim.x) * ROWS_PER_BLOCK) {
    const int ci = static_cast<int>(flat / BLOCK_M), r = static_cast<int>(flat % BLOCK_M);
    const MlaCombineItem item = p.combine[ci];
    const MlaSeqInfo s = p.seqs[item.seq];
    if (item.row_start + r >= s.q_len * NUM_HEADS) continue;  // uniform across the group
    const float* lse = p.partial_lse + static_cast<long long>(item.partial_start) * BLOCK_M + r;
    float mx = NegInf();
    for (int k = lane; k < item.num_splits; k += 32) mx = fmaxf(mx, lse[k * BLOCK_M]);
    mx = GroupMax(mx);
    float acc[DIMS_PER_LANE];
#pragma unroll
    for (int i = 0; i < DIMS_PER_LANE; ++i) acc[i] = 0.0f;
    float wsum = 0.0f;
    if (mx != NegInf()) {
      const float* po = p.partial_o +
                        (static_cast<long long>(item.partial_start) * BLOCK_M + r) * HEAD_DIM_V +
                        lane * DIMS_PER_LANE;
#pragma unroll 2
      for (int k = 0; k < item.num_splits; ++k) {
        const float lse_k = lse[k * BLOCK_M];
        // A split that saw nothing for this row has lse -inf and weight 0.
        const float w = lse_k == NegInf() ? 0.0f : expf(lse_k - mx);
        wsum += w;
        const float4* src =
            reinterpret_cast<const float4*>(po + static_cast<long long>(k) * BLOCK_M * HEAD_DIM_V);
#pragma unroll
        for (int i = 0; i < DIMS_PER_LANE / 4; ++i) {
          const float4 v = src[i];
          acc[4 * i] += w * v.x;
          acc[4 * i + 1] += w * v.y;
          acc[4 * i + 2] += w * v.z;
          acc[4 * i + 3] += w * v.w;
        }
      }
    }
    const float inv = wsum > 0.0f ? 1.0f / wsum : 0.0f;
    const long long qrow = static_cast<long long>(s.qo_start) * NUM_HEADS + item.row_start + r;
    u32 packed[DIMS_PER_LANE / 2];
#pragma unroll
    for (int i = 0; i < DIMS_PER_LANE / 2; ++i)
      packed[i] = PackBf16x2(acc[2 * i] * inv, acc[2 * i + 1] * inv);
    uint4* out = reinterpret_cast<uint4*>(static_cast<u16*>(p.out) + qrow * HEAD_DIM_V +
                                          lane * DIMS_PER_LANE);
    out[0] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    out[1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
    if (WRITE_LSE && lane == 0) p.lse[qrow] = wsum > 0.0f ? mx + logf(wsum) : NegInf();
  }
}

// amax |q| over the whole tensor into *q_amax (zeroed by the host beforehand).
// Non-negative floats order like their bit patterns, so an unsigned atomicMax
// merges the block results.
MLA_INLINE void QAmax(const MlaDecodeParams& p) {
  __shared__ float red[NUM_THREADS];
  const u16* q = static_cast<const u16*>(p.q);
  float m = 0.0f;
  const long long elements =
      p.plan_counters != 0
          ? static_cast<long long>(p.plan_counters[MLA_PLAN_TOTAL_Q]) * NUM_HEADS * HEAD_DIM_QK
          : p.q_elements;
  const long long stride = static_cast<long long>(gridDim.x) * NUM_THREADS;
  for (long long i = static_cast<long long>(blockIdx.x) * NUM_THREADS + threadIdx.x;
       i < elements; i += stride)
    m = fmaxf(m, fabsf(Bf16ToFloat(q[i])));
  red[threadIdx.x] = m;
  __syncthreads();
  for (int w = NUM_THREADS / 2; w > 0; w /= 2) {
    if (static_cast<int>(threadIdx.x) < w)
      red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + w]);
    __syncthreads();
  }
  if (threadIdx.x == 0)
    atomicMax(reinterpret_cast<unsigned int*>(const_cast<float*>(p.q_amax)), __float_as_uint(red[0]));
}

}  // namespace mla_combine

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_COMBINE_CUH_
