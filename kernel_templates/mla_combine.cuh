// Split-KV merge and the a8 Q-amax reduction: small portable kernels that run
// around the decode kernel on the same stream.
//
// Combine: one block per MlaCombineItem (grid-stride), one row at a time per
// thread group; each split's output is already normalised, so the merge weights
// are exp(lse_k - max lse).
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_COMBINE_CUH_
#define MLAJIT_KERNEL_TEMPLATES_MLA_COMBINE_CUH_

#include "mla_common.cuh"

namespace mla_combine {

constexpr int NUM_THREADS = NUM_WARPS * 32;
constexpr int GROUP = 64;  // threads per row: 8 output columns each
constexpr int GROUPS = NUM_THREADS / GROUP;
static_assert(NUM_THREADS % GROUP == 0, "block shape");

MLA_INLINE void CombineItems(const MlaDecodeParams& p) {
  const int g = threadIdx.x / GROUP, lane = threadIdx.x % GROUP;
  for (int ci = blockIdx.x; ci < p.num_combine; ci += gridDim.x) {
    const MlaCombineItem item = p.combine[ci];
    const MlaSeqInfo s = p.seqs[item.seq];
    const int rows = min(BLOCK_M, s.q_len * NUM_HEADS - item.row_start);
    for (int r = g; r < rows; r += GROUPS) {
      float mx = NegInf();
      for (int k = 0; k < item.num_splits; ++k)
        mx = fmaxf(mx, p.partial_lse[(item.partial_start + k) * BLOCK_M + r]);
      float acc[8];
      for (int i = 0; i < 8; ++i) acc[i] = 0.0f;
      float wsum = 0.0f;
      if (mx != NegInf()) {
        for (int k = 0; k < item.num_splits; ++k) {
          const long long slot = static_cast<long long>(item.partial_start + k) * BLOCK_M + r;
          const float lse_k = p.partial_lse[slot];
          if (lse_k == NegInf()) continue;  // this split saw nothing for the row
          const float w = expf(lse_k - mx);
          wsum += w;
          const float* po = p.partial_o + slot * HEAD_DIM_V + lane * 8;
          for (int i = 0; i < 8; ++i) acc[i] += w * po[i];
        }
      }
      const float inv = wsum > 0.0f ? 1.0f / wsum : 0.0f;
      const long long qrow = static_cast<long long>(s.qo_start) * NUM_HEADS + item.row_start + r;
      u16* out = static_cast<u16*>(p.out) + qrow * HEAD_DIM_V + lane * 8;
      for (int i = 0; i < 8; ++i) out[i] = FloatToBf16(acc[i] * inv);
      if (WRITE_LSE && lane == 0) p.lse[qrow] = wsum > 0.0f ? mx + logf(wsum) : NegInf();
    }
  }
}

// amax |q| over the whole tensor into *q_amax (zeroed by the host beforehand).
// Non-negative floats order like their bit patterns, so an unsigned atomicMax
// merges the block results.
MLA_INLINE void QAmax(const MlaDecodeParams& p) {
  __shared__ float red[NUM_THREADS];
  const u16* q = static_cast<const u16*>(p.q);
  float m = 0.0f;
  const long long stride = static_cast<long long>(gridDim.x) * NUM_THREADS;
  for (long long i = static_cast<long long>(blockIdx.x) * NUM_THREADS + threadIdx.x;
       i < p.q_elements; i += stride)
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
