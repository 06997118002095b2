// The device planner: builds a decode schedule on the GPU from a layout in
// device memory, so that a whole decode step (plan, decode, merge) can be
// captured in a graph and replayed while the lengths change. One CTA of
// PLAN_THREADS threads runs the steps of mla_schedule.h with one thread per
// sequence, tile or CTA, and writes exactly what the host planner would.
//
// A layout it cannot schedule (see MlaPlanError) leaves an empty schedule, so
// the decode that follows writes nothing, and the error in the counters, where
// mlajit_plan_check_update finds it.
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_PLAN_CUH_
#define MLAJIT_KERNEL_TEMPLATES_MLA_PLAN_CUH_

#include "mla_common.cuh"
#include "mla_schedule.h"

namespace mla_plan {

constexpr int PLAN_THREADS = 1024;

// Exclusive prefix sum of one value per thread (Hillis-Steele in shared
// memory: portable to any warp width); *total receives the block's sum.
MLA_INLINE long long ExclusiveScan(long long v, long long* buf, long long* total) {
  const int tid = threadIdx.x;
  buf[tid] = v;
  __syncthreads();
  for (int off = 1; off < PLAN_THREADS; off <<= 1) {
    const long long add = tid >= off ? buf[tid - off] : 0;
    __syncthreads();
    buf[tid] += add;
    __syncthreads();
  }
  const long long inclusive = buf[tid];
  *total = buf[PLAN_THREADS - 1];
  __syncthreads();  // buf is reused by the next call
  return inclusive - v;
}

// The largest of one value per thread (also a barrier).
MLA_INLINE long long BlockMax(long long v, long long* buf) {
  const int tid = threadIdx.x;
  buf[tid] = v;
  __syncthreads();
  for (int w = PLAN_THREADS / 2; w > 0; w >>= 1) {
    if (tid < w && buf[tid + w] > buf[tid]) buf[tid] = buf[tid + w];
    __syncthreads();
  }
  const long long m = buf[0];
  __syncthreads();
  return m;
}

MLA_INLINE void Fail(const MlaPlanParams& p, int* failed, int code, int index, int value) {
  if (atomicCAS(failed, 0, code) == 0) {
    p.counters[MLA_PLAN_ERROR] = code;
    p.counters[MLA_PLAN_ERROR_INDEX] = index;
    p.counters[MLA_PLAN_ERROR_VALUE] = value;
  }
}

MLA_INLINE void BuildPlan(const MlaPlanParams& p) {
  __shared__ long long scan[PLAN_THREADS];
  __shared__ int failed;
  MlaScheduleShape shape;
  shape.num_heads = NUM_HEADS;
  shape.causal = CAUSAL ? 1 : 0;
  shape.block_m = BLOCK_M;
  shape.block_n = BLOCK_N;
  shape.num_ctas = p.num_ctas;
  shape.min_cost_per_cta = p.min_cost_per_cta;
  const int tid = threadIdx.x, batch = p.batch_size, num_ctas = p.num_ctas;
  if (tid == 0) {
    failed = 0;
    for (int i = 0; i < MLA_PLAN_NUM_COUNTERS; ++i) p.counters[i] = 0;
  }
  __syncthreads();

  // Sequences: check, resolve and count their tiles.
  long long num_tiles = 0, total;
  for (int base = 0; base < batch; base += PLAN_THREADS) {
    const int b = base + tid;
    int tiles = 0;
    if (b < batch) {
      const int q0 = p.qo_indptr[b], q1 = p.qo_indptr[b + 1];
      const int k0 = p.kv_indptr[b], k1 = p.kv_indptr[b + 1];
      const int q_len = q1 - q0, span = k1 - k0;
      const int kv_len = PAGE_SIZE == 0 ? span : p.kv_lens != 0 ? p.kv_lens[b] : span * PAGE_SIZE;
      if (b == 0 && (q0 != 0 || k0 != 0)) {
        Fail(p, &failed, MLA_PLAN_BAD_INDPTR_START, 0, q0 != 0 ? q0 : k0);
      } else if (q_len < 0 || q_len > p.max_q_len) {
        Fail(p, &failed, MLA_PLAN_BAD_Q_LEN, b, q_len);
      } else if (span < 0) {
        Fail(p, &failed, MLA_PLAN_BAD_KV_SPAN, b, span);
      } else if (PAGE_SIZE > 0 &&
                 (kv_len < 0 || static_cast<long long>(kv_len) >
                                    static_cast<long long>(span) * (PAGE_SIZE > 0 ? PAGE_SIZE : 1))) {
        Fail(p, &failed, MLA_PLAN_BAD_KV_LEN, b, kv_len);
      } else {
        tiles = MlaTilesOfSequence(q_len, shape);
        MlaSeqInfo s;
        s.qo_start = q0;
        s.q_len = q_len;
        s.kv_len = kv_len;
        s.kv_base = k0;
        p.seqs[b] = s;
      }
    }
    const long long before = ExclusiveScan(tiles, scan, &total);
    if (b < batch) p.seq_tile_start[b] = static_cast<int>(num_tiles + before);
    num_tiles += total;
  }
  __syncthreads();
  if (failed != 0) {  // an empty schedule: the decode writes nothing
    for (int c = tid; c <= num_ctas; c += PLAN_THREADS) p.work_indptr[c] = 0;
    return;
  }

  // Tiles and their places on the cost line.
  for (int b = tid; b < batch; b += PLAN_THREADS) {
    const MlaSeqInfo s = p.seqs[b];
    const int first = p.seq_tile_start[b], n = MlaTilesOfSequence(s.q_len, shape);
    for (int i = 0; i < n; ++i) p.tiles[first + i] = MlaMakeTile(b, i, s.q_len, s.kv_len, shape);
  }
  __syncthreads();
  const int tiles_total = static_cast<int>(num_tiles);
  long long line = 0, max_cost = 0;
  for (int base = 0; base < tiles_total; base += PLAN_THREADS) {
    const int t = base + tid;
    const long long cost = t < tiles_total ? MlaTileCost(p.tiles[t]) : 0;
    max_cost = cost > max_cost ? cost : max_cost;
    const long long before = ExclusiveScan(cost, scan, &total);
    if (t < tiles_total) p.tile_start[t] = line + before;
    line += total;
  }
  if (tid == 0) p.tile_start[tiles_total] = line;
  const long long max_tile_cost = BlockMax(max_cost, scan);
  const MlaCutRule rule = MlaChooseCuts(line, max_tile_cost, num_tiles, shape);

  // Cuts, then (one thread) the split tiles' partial slots and merges.
  for (int c = tid; c <= num_ctas; c += PLAN_THREADS) {
    p.cuts[c] = MlaFindCut(c, rule, p.tile_start, p.tiles, tiles_total, BLOCK_N);
  }
  __syncthreads();
  if (tid == 0) {
    int num_combine = 0;
    const int partials =
        MlaAssignPartials(p.cuts, num_ctas, p.tiles, p.split, p.combine, &num_combine);
    p.counters[MLA_PLAN_NUM_COMBINE] = num_combine;
    p.counters[MLA_PLAN_NUM_PARTIALS] = partials;
    p.counters[MLA_PLAN_TOTAL_Q] = p.qo_indptr[batch];
  }

  // Work items per CTA, their offsets, then the items.
  long long items = 0;
  for (int base = 0; base < num_ctas; base += PLAN_THREADS) {
    const int c = base + tid;
    int count = 0;
    if (c < num_ctas) {
      MlaForEachPiece(p.cuts[c], p.cuts[c + 1], p.tiles, tiles_total,
                      [&](int, int, int) { ++count; });
    }
    const long long before = ExclusiveScan(count, scan, &total);
    if (c < num_ctas) p.work_indptr[c] = static_cast<int>(items + before);
    items += total;
  }
  if (tid == 0) p.work_indptr[num_ctas] = static_cast<int>(items);
  __syncthreads();  // also publishes thread 0's split[]
  for (int c = tid; c < num_ctas; c += PLAN_THREADS) {
    int w = p.work_indptr[c];
    MlaForEachPiece(p.cuts[c], p.cuts[c + 1], p.tiles, tiles_total,
                    [&](int t, int kv_start, int kv_end) {
                      MlaWorkItem item;
                      item.seq = p.tiles[t].seq;
                      item.row_start = p.tiles[t].row_start;
                      item.kv_start = kv_start;
                      item.kv_end = kv_end;
                      item.partial = MlaPiecePartial(c, t, p.cuts, p.split);
                      item.reserved[0] = item.reserved[1] = item.reserved[2] = 0;
                      item.seq_info = p.seqs[item.seq];
                      p.work[w++] = item;
                    });
  }
}

}  // namespace mla_plan

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_PLAN_CUH_
