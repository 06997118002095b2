// The split-KV schedule of the persistent decode kernel, written once for both
// planners: the host planner (src/plan/scheduler.cc) runs each step below as a
// loop, the device planner (mla_plan.cuh) runs it with one thread per index, so
// the two build identical schedules. Plain C++ with no includes (NVRTC, hiprtc
// and the host compiler all accept it); include mla_params.h first.
//
// The algorithm, in cost units (KV tokens; a piece also costs
// MlaPieceOverhead(rows) for loading Q and writing its result):
//  1. Each sequence's q_len * H query rows (q position major, head minor) are cut
//     into tiles of block_m rows; a tile needs KV positions [0, kv_need), what
//     its last row may see.
//  2. The tiles are laid end to end on a line, each occupying its overhead and
//     then its tokens. The line is cut at multiples of the target cost T (about
//     total / num_ctas, see MlaTargetCost); CTA c takes what lies between cut c
//     and cut c + 1.
//     Exception (MlaChooseCuts): when there are at least as many CTAs as
//     tiles and the tiles are either all too short to split (k = 1: one CTA
//     each) or all about the same size (nearly all CTAs then kept busy), each
//     tile is cut into k >= 1 equal pieces instead, cut c falling in tile
//     c / k. Cuts on the line would let a CTA straddle two tiles (two Q loads,
//     two partials, three splits for some tiles), and with k = 1 tiles a few
//     tokens apart (causal rows) make the cuts drift off the tile starts;
//     aligned pieces give each CTA one piece and each tile k.
//  3. A cut inside a tile's tokens moves to the nearest multiple of block_n; a
//     cut that would leave less than block_n tokens after it moves to the end of
//     the tile (no tiny pieces). Cuts never decrease, and interior cuts are
//     distinct (T > block_n), so no piece is empty.
//  4. A tile with interior cuts is split into pieces that write partials; its
//     pieces own consecutive partial slots and one MlaCombineItem merges them.
// Every step is independent per sequence, per tile or per CTA except step 4's
// walk over the cuts, which is O(num_ctas).
//
// Balance: a CTA's cost is at most T + 2 * block_n + 2 * MlaPieceOverhead(block_m)
// (rounding moves each cut by at most block_n, and the split pieces pay their
// overhead again).
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_SCHEDULE_H_
#define MLAJIT_KERNEL_TEMPLATES_MLA_SCHEDULE_H_

struct MlaScheduleShape {
  int num_heads;
  int causal;
  int block_m;
  int block_n;
  int num_ctas;
  int min_cost_per_cta;
};

// Rows [row_start, row_start + rows) of sequence `seq`, needing KV [0, kv_need).
struct MlaTile {
  int seq;
  int row_start;
  int rows;
  int kv_need;
};

// A cut on the line: before token `token` of tile `tile` (token 0: at the
// tile's start, overhead included). Interior cuts have 0 < token < kv_need.
struct MlaCut {
  int tile;
  int token;
};

// Per interior cut: the first interior cut of the same tile and the tile's
// first partial slot.
struct MlaCutSplit {
  int first_cut;
  int partial_start;
};

MLA_HOST_DEVICE inline long long MlaPieceOverhead(int rows) { return 4LL * rows + 32; }

MLA_HOST_DEVICE inline int MlaTilesOfSequence(int q_len, const MlaScheduleShape& s) {
  const long long rows = static_cast<long long>(q_len) * s.num_heads;
  return static_cast<int>((rows + s.block_m - 1) / s.block_m);
}

// Tile `i` of sequence `seq`; causal rows see a prefix, so the last row bounds it.
MLA_HOST_DEVICE inline MlaTile MlaMakeTile(int seq, int i, int q_len, int kv_len,
                                           const MlaScheduleShape& s) {
  MlaTile t;
  t.seq = seq;
  t.row_start = i * s.block_m;  // i < MlaTilesOfSequence: no overflow
  const int rows_total = q_len * s.num_heads;
  t.rows = rows_total - t.row_start < s.block_m ? rows_total - t.row_start : s.block_m;
  int need = kv_len;
  if (s.causal) {
    need = kv_len - q_len + (t.row_start + t.rows - 1) / s.num_heads + 1;
    need = need < 0 ? 0 : need > kv_len ? kv_len : need;
  }
  t.kv_need = need;
  return t;
}

MLA_HOST_DEVICE inline long long MlaTileCost(const MlaTile& t) {
  return t.kv_need + MlaPieceOverhead(t.rows);
}

// The spacing of the cuts. The average share, but
//  - no smaller than min_cost_per_cta less one piece overhead (a CTA that starts
//    inside a tile pays that overhead again, so its real cost is then about
//    min_cost_per_cta) nor than 2 * block_n;
//  - when every tile fits a CTA of its own and the largest is within the
//    balance slack of the average, the largest: equal tiles then land one per
//    CTA, unsplit, with no partials to write and merge.
MLA_HOST_DEVICE inline long long MlaTargetCost(long long total, long long max_tile_cost,
                                               long long num_tiles, const MlaScheduleShape& s) {
  long long target = (total + s.num_ctas - 1) / s.num_ctas;
  const long long floor_cost = s.min_cost_per_cta - MlaPieceOverhead(s.block_m);
  if (target < floor_cost) target = floor_cost;
  if (target < 2LL * s.block_n) target = 2LL * s.block_n;
  const long long slack = 2LL * s.block_n + 2 * MlaPieceOverhead(s.block_m);
  if (num_tiles <= s.num_ctas && max_tile_cost > target && max_tile_cost <= target + slack) {
    target = max_tile_cost;
  }
  return target;
}

// How the line is cut: at multiples of `target`, or (pieces_per_tile = k > 0)
// each tile into k aligned pieces, with target = the largest piece's cost
// (the balance bound above holds for both).
struct MlaCutRule {
  long long target;
  int pieces_per_tile;
};

MLA_HOST_DEVICE inline MlaCutRule MlaChooseCuts(long long total, long long max_tile_cost,
                                                long long num_tiles, const MlaScheduleShape& s) {
  MlaCutRule rule;
  rule.target = MlaTargetCost(total, max_tile_cost, num_tiles, s);
  rule.pieces_per_tile = 0;
  if (num_tiles == 0 || num_tiles > s.num_ctas) return rule;
  // As many pieces as CTAs allow, each at least the floor MlaTargetCost keeps.
  long long floor_cost = s.min_cost_per_cta - MlaPieceOverhead(s.block_m);
  if (floor_cost < 2LL * s.block_n) floor_cost = 2LL * s.block_n;
  const long long by_ctas = s.num_ctas / num_tiles;
  const long long by_floor = (max_tile_cost - MlaPieceOverhead(s.block_m)) / floor_cost;
  long long k = by_ctas < by_floor ? by_ctas : by_floor;
  if (by_floor < 1) {
    // No tile is long enough to split, so each takes a CTA of its own, equal
    // or not: the line would put several on one CTA while others idle, and a
    // CTA's second work item costs its whole dependent chain again (about
    // 4.5 us on the H200: (4,1,1,32) took 13.5 us against 9.0 for
    // (4,1,64,32), tools/bench/RESULTS.md, small batches).
    k = 1;
  } else if (num_tiles * max_tile_cost - total > total / 32) {
    return rule;  // not uniform
  } else if (k == by_ctas && 16 * num_tiles * k < 15LL * s.num_ctas) {
    // Bounded by the CTAs, the pieces should keep nearly all of them busy,
    // or the line's finer balance wins.
    return rule;
  }
  rule.pieces_per_tile = static_cast<int>(k);
  rule.target = (max_tile_cost + k - 1) / k;
  return rule;
}

// Cut c of the k-pieces rule. A tile gets min(k, kv_need / (2 block_n)) pieces
// (at least one), so that rounded cuts stay distinct and no piece is shorter
// than block_n; cuts beyond its pieces sit at the next tile's start.
MLA_HOST_DEVICE inline MlaCut MlaFindAlignedCut(int c, int k, const MlaTile* tiles, int num_tiles,
                                                int block_n) {
  MlaCut cut;
  cut.tile = c / k;
  cut.token = 0;
  if (cut.tile >= num_tiles) {
    cut.tile = num_tiles;
    return cut;
  }
  const int j = c % k;
  const int kv = tiles[cut.tile].kv_need;
  // 64-bit: 2 * block_n overflows int for block_n > 2^30 (a caller's config).
  const long long fit = kv / (2LL * block_n);
  const int pieces = fit < 1 ? 1 : fit > k ? k : static_cast<int>(fit);
  if (j == 0) return cut;
  if (j >= pieces) {
    cut.tile += 1;
    return cut;
  }
  const long long x = static_cast<long long>(j) * kv / pieces;
  cut.token = static_cast<int>((x + block_n / 2) / block_n * block_n);
  return cut;
}

// Cut c (0..num_ctas). tile_start[t]: the line position of tile t (prefix sum of
// the costs), tile_start[num_tiles] = total.
MLA_HOST_DEVICE inline MlaCut MlaFindCut(int c, const MlaCutRule& rule, const long long* tile_start,
                                         const MlaTile* tiles, int num_tiles, int block_n) {
  if (rule.pieces_per_tile > 0) {
    return MlaFindAlignedCut(c, rule.pieces_per_tile, tiles, num_tiles, block_n);
  }
  MlaCut cut;
  cut.tile = 0;
  cut.token = 0;
  if (c == 0) return cut;
  const long long x = c * rule.target;
  if (x >= tile_start[num_tiles]) {
    cut.tile = num_tiles;
    return cut;
  }
  // The last tile whose start is at or before x.
  int lo = 0, hi = num_tiles - 1;
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (tile_start[mid] <= x) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  cut.tile = lo;
  const MlaTile& t = tiles[lo];
  long long k = x - tile_start[lo] - MlaPieceOverhead(t.rows);
  if (k <= 0) return cut;  // inside the overhead: the tile starts after the cut
  k = (k + block_n / 2) / block_n * block_n;
  if (k >= t.kv_need || t.kv_need - k < block_n) {
    cut.tile = lo + 1;  // the rest of the tile stays before the cut
    return cut;
  }
  cut.token = static_cast<int>(k);
  return cut;
}

// Calls emit(tile, kv_start, kv_end) for each piece between cuts a and b, in
// tile order. A tile that needs no KV (kv_need 0) still gets one piece (it
// writes zeros and lse -inf), in the CTA whose range holds its start.
template <typename Emit>
MLA_HOST_DEVICE inline void MlaForEachPiece(MlaCut a, MlaCut b, const MlaTile* tiles,
                                            int num_tiles, Emit&& emit) {
  for (int t = a.tile; t <= b.tile && t < num_tiles; ++t) {
    const int start = t == a.tile ? a.token : 0;
    const int end = t == b.tile ? b.token : tiles[t].kv_need;
    if (start < end || (tiles[t].kv_need == 0 && t < b.tile)) emit(t, start, end);
  }
}

// Step 4 over all cuts (cuts[0..num_ctas]): fills split[c] for each interior
// cut, writes one combine item per split tile (in tile order) and returns the
// number of partial slots; *num_combine receives the item count.
MLA_HOST_DEVICE inline int MlaAssignPartials(const MlaCut* cuts, int num_ctas,
                                             const MlaTile* tiles, MlaCutSplit* split,
                                             MlaCombineItem* combine, int* num_combine) {
  int partials = 0, items = 0;
  for (int c = 1; c < num_ctas; ++c) {
    if (cuts[c].token == 0) continue;
    const bool first = !(cuts[c - 1].tile == cuts[c].tile && cuts[c - 1].token > 0);
    if (first) {
      int interior = 1;
      while (c + interior < num_ctas && cuts[c + interior].tile == cuts[c].tile &&
             cuts[c + interior].token > 0) {
        ++interior;
      }
      const MlaTile& t = tiles[cuts[c].tile];
      combine[items].seq = t.seq;
      combine[items].row_start = t.row_start;
      combine[items].partial_start = partials;
      combine[items].num_splits = interior + 1;
      ++items;
      split[c].first_cut = c;
      split[c].partial_start = partials;
      partials += interior + 1;
    } else {
      split[c] = split[c - 1];
    }
  }
  *num_combine = items;
  return partials;
}

// The partial slot of CTA c's piece of `tile` (cuts a = cuts[c], b = cuts[c+1]),
// or -1 when the tile is not split.
MLA_HOST_DEVICE inline int MlaPiecePartial(int c, int tile, const MlaCut* cuts,
                                           const MlaCutSplit* split) {
  const MlaCut a = cuts[c], b = cuts[c + 1];
  if (tile == a.tile && a.token > 0) {
    return split[c].partial_start + (c - split[c].first_cut + 1);
  }
  if (tile == b.tile && b.token > 0) return split[c + 1].partial_start;  // its first piece
  return -1;
}

// Launch parameters of the device planner (mla_plan.cuh): the layout in device
// memory, the schedule's outputs and the planner's scratch, all sized by the
// plan's declared limits.
struct MlaPlanParams {
  const int* qo_indptr;  // [batch_size + 1]
  const int* kv_indptr;  // [batch_size + 1]: tokens (flat) or pages (paged)
  const int* kv_lens;    // paged: [batch_size] tokens, or null for full pages
  MlaWorkItem* work;     // [max_tiles + num_ctas]
  int* work_indptr;      // [num_ctas + 1]
  MlaSeqInfo* seqs;      // [batch_size]
  MlaCombineItem* combine;  // [num_ctas]
  int* counters;         // [MLA_PLAN_NUM_COUNTERS]
  MlaTile* tiles;        // scratch [max_tiles]
  long long* tile_start; // scratch [max_tiles + 1]
  int* seq_tile_start;   // scratch [batch_size]
  MlaCut* cuts;          // scratch [num_ctas + 1]
  MlaCutSplit* split;    // scratch [num_ctas + 1]
  int batch_size;
  int max_q_len;
  int num_ctas;
  int min_cost_per_cta;
};

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_SCHEDULE_H_
