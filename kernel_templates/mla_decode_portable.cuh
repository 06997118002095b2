// Portable scalar MLA decode path: plain CUDA/HIP C++ (no warp intrinsics, no
// inline assembly), for GPUs without a tuned path (AMD until the MFMA path
// lands, NVIDIA before sm_80). It follows the same work items and output
// contract as the tensor-core path but favours obviousness over speed: one
// query row at a time, KV read straight from global memory.
//
// Block of NUM_WARPS * 32 threads (a divisor of 512); dynamic shared memory
// MlaPortableSmemBytes(threads).
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_DECODE_PORTABLE_CUH_
#define MLAJIT_KERNEL_TEMPLATES_MLA_DECODE_PORTABLE_CUH_

#include "mla_common.cuh"

namespace mla_portable {

constexpr int NUM_THREADS = NUM_WARPS * 32;
constexpr int TILE = 16;                     // tokens scored per step
constexpr int DIMS_PER_THREAD = HEAD_DIM_V / NUM_THREADS;
constexpr int PARTS = NUM_THREADS / TILE;    // threads cooperating on one dot product
constexpr int TOKEN_BYTES = KvTokenBytes<KV_FORMAT>::value;
static_assert(HEAD_DIM_V % NUM_THREADS == 0 && NUM_THREADS % TILE == 0, "block shape");

MLA_INLINE void ProcessRow(const MlaDecodeParams& p, const MlaWorkItem& item, const MlaSeqInfo& s,
                           int r, float* sq, float* ss, float* sred) {
  const int tid = threadIdx.x;
  const int row = item.row_start + r;
  const int rows_total = s.q_len * NUM_HEADS;
  const long long qrow = static_cast<long long>(s.qo_start) * NUM_HEADS + row;
  const int lo = item.kv_start;
  const int hi = min(item.kv_end, VisibleKv<NUM_HEADS, CAUSAL>(s, row));
  const u8* kv = static_cast<const u8*>(p.kv);

  float score_scale = p.sm_scale * LOG2E;
  if (KV_FORMAT == KV_FORMAT_FP8) score_scale *= p.kv_scale;

  const u16* q = static_cast<const u16*>(p.q) + qrow * HEAD_DIM_QK;
  float q_scale = 1.0f;  // a8: the row's own scale
  if (Q_MODE == Q_MODE_FP8) {
    float amax = 0.0f;  // (fmaxf drops NaN)
    for (int d = tid; d < HEAD_DIM_QK; d += NUM_THREADS)
      amax = fmaxf(amax, fabsf(Bf16ToFloat(q[d])));
    sred[tid] = amax;
    __syncthreads();
    for (int k = 0; k < NUM_THREADS; ++k) amax = fmaxf(amax, sred[k]);
    __syncthreads();  // sred is rewritten by the scores
    q_scale = QScaleFromAmax(amax);
    score_scale *= q_scale;
  }
  for (int d = tid; d < HEAD_DIM_QK; d += NUM_THREADS)
    sq[d] = QuantiseQ<Q_MODE>(Bf16ToFloat(q[d]), QInverseScale(q_scale));
  __syncthreads();

  float m = NegInf(), l = 0.0f;
  float o[DIMS_PER_THREAD];
  for (int i = 0; i < DIMS_PER_THREAD; ++i) o[i] = 0.0f;

  for (int j0 = lo; j0 < hi; j0 += TILE) {
    {  // scores of tokens j0 .. j0 + TILE
      const int tok = tid % TILE, part = tid / TILE;
      const int j = j0 + tok;
      float acc = 0.0f;
      if (j < hi) {
        const u8* token = kv + KvSlot<PAGE_SIZE>(p, s, j) * TOKEN_BYTES;
        for (int d = part; d < HEAD_DIM_QK; d += PARTS) acc += sq[d] * LoadKvElement<KV_FORMAT>(token, d);
      }
      sred[tid] = acc;
    }
    __syncthreads();
    if (tid < TILE) {
      float sum = 0.0f;
      for (int k = 0; k < PARTS; ++k) sum += sred[k * TILE + tid];
      ss[tid] = j0 + tid < hi ? sum * score_scale : NegInf();
    }
    __syncthreads();
    float mx = NegInf();
    for (int k = 0; k < TILE; ++k) mx = fmaxf(mx, ss[k]);
    const float mn = fmaxf(m, mx);  // finite: token j0 is visible
    const float alpha = exp2f(m - mn);
    l *= alpha;
    for (int i = 0; i < DIMS_PER_THREAD; ++i) o[i] *= alpha;
    for (int k = 0; k < TILE && j0 + k < hi; ++k) {
      const float pk = exp2f(ss[k] - mn);
      l += pk;
      const u8* token = kv + KvSlot<PAGE_SIZE>(p, s, j0 + k) * TOKEN_BYTES;
      for (int i = 0; i < DIMS_PER_THREAD; ++i)
        o[i] += pk * LoadKvElement<KV_FORMAT>(token, tid + i * NUM_THREADS);
    }
    m = mn;
    __syncthreads();  // ss / sred are rewritten by the next step
  }

  const float v_scale = KV_FORMAT == KV_FORMAT_FP8 ? p.kv_scale : 1.0f;
  const float inv = l > 0.0f ? v_scale / l : 0.0f;
  const float lse = l > 0.0f ? (m + log2f(l)) * LN2 : NegInf();
  if (row >= rows_total) return;
  if (item.partial < 0) {
    u16* out = static_cast<u16*>(p.out) + qrow * HEAD_DIM_V;
    for (int i = 0; i < DIMS_PER_THREAD; ++i) out[tid + i * NUM_THREADS] = FloatToBf16(o[i] * inv);
    if (WRITE_LSE && tid == 0) p.lse[qrow] = lse;
  } else {
    // Partials are kept before kv_scale (mla_common.cuh).
    const float pinv = l > 0.0f ? 1.0f / l : 0.0f;
    const long long e = (static_cast<long long>(item.partial) * BLOCK_M + r) * HEAD_DIM_V + tid;
    for (int i = 0; i < DIMS_PER_THREAD; ++i) {
      StorePartial1(p.partial_o, e + i * NUM_THREADS, o[i] * pinv);
    }
    if (tid == 0) p.partial_lse[item.partial * BLOCK_M + r] = lse;
  }
}

MLA_INLINE void DecodeCta(const MlaDecodeParams& p) {
  extern __shared__ float mla_portable_smem[];
  float* sq = mla_portable_smem;      // [576]
  float* ss = sq + HEAD_DIM_QK;       // [TILE]
  float* sred = ss + TILE;            // [NUM_THREADS]
  const int begin = p.work_indptr[blockIdx.x], end = p.work_indptr[blockIdx.x + 1];
  for (int w = begin; w < end; ++w) {
    const MlaWorkItem item = p.work[w];
    const MlaSeqInfo s = LoadSeq(p, item);
    const int rows = min(BLOCK_M, s.q_len * NUM_HEADS - item.row_start);
    for (int r = 0; r < rows; ++r) {
      ProcessRow(p, item, s, r, sq, ss, sred);
      __syncthreads();  // sq is reloaded for the next row
    }
  }
}

}  // namespace mla_portable

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_DECODE_PORTABLE_CUH_
