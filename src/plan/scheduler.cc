#include "src/plan/scheduler.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "src/base/mla_types.h"

namespace mlajit::plan {
namespace {

absl::Status CheckIndptr(absl::Span<const int32_t> indptr, const char* name) {
  if (indptr.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is empty: expected batch_size + 1 entries"));
  }
  if (indptr[0] != 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, "[0]=", indptr[0], ": must be 0"));
  }
  for (size_t i = 1; i < indptr.size(); ++i) {
    if (indptr[i] < indptr[i - 1]) {
      return absl::InvalidArgumentError(absl::StrCat(name, "[", i, "]=", indptr[i], " < ", name,
                                                     "[", i - 1, "]=", indptr[i - 1],
                                                     ": must be non-decreasing"));
    }
  }
  return absl::OkStatus();
}

int SeqKvLen(const LayoutView& l, size_t b) {
  const int span = l.kv_indptr[b + 1] - l.kv_indptr[b];
  if (l.page_size == 0) return span;
  return l.kv_lens.empty() ? span * l.page_size : l.kv_lens[b];
}

}  // namespace

int64_t WorkUnits(const LayoutView& l, int block_m, int block_n) {
  int64_t units = 0;
  for (size_t b = 0; b + 1 < l.qo_indptr.size(); ++b) {
    const int64_t rows = int64_t{l.qo_indptr[b + 1] - l.qo_indptr[b]} * l.num_heads;
    const int64_t kv = SeqKvLen(l, b);
    units += (rows + block_m - 1) / block_m * ((kv + block_n - 1) / block_n);
  }
  return units;
}

ScheduleConfig ScheduleConfigFor(const TileShape& tiles, int sm_count) {
  ScheduleConfig c;
  c.num_ctas = sm_count * tiles.ctas_per_sm;
  c.block_m = tiles.block_m;
  c.block_n = tiles.block_n;
  c.min_cost_per_cta = tiles.min_split_cost;
  return c;
}

BatchWork MeasureBatch(const LayoutView& layout, int sm_count) {
  return BatchWork{WorkUnits(layout, 32, 64), sm_count};
}

BatchWork BoundBatch(int max_batch_size, int max_q_len, int num_heads, int64_t kv_len,
                     int sm_count) {
  const int64_t rows = int64_t{max_q_len} * num_heads;
  const int64_t units_per_sequence = (rows + 31) / 32 * ((kv_len + 63) / 64);
  return BatchWork{int64_t{max_batch_size} * units_per_sequence, sm_count};
}

MlaScheduleShape ToShape(const LayoutView& l, const ScheduleConfig& config) {
  MlaScheduleShape shape;
  shape.num_heads = l.num_heads;
  shape.causal = l.causal ? 1 : 0;
  shape.block_m = config.block_m;
  shape.block_n = config.block_n;
  shape.num_ctas = config.num_ctas;
  shape.min_cost_per_cta = config.min_cost_per_cta;
  return shape;
}

int64_t PieceOverhead(int rows) { return MlaPieceOverhead(rows); }

absl::Status ValidateLayout(const LayoutView& l) {
  if (l.num_heads < 1 || l.num_heads > kMaxHeads) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_heads=", l.num_heads, ": must be in 1..", kMaxHeads));
  }
  if (!IsValidPageSize(l.page_size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size=", l.page_size, ": must be 0 (flat), 1, 16, 32, 64 or 128"));
  }
  if (auto s = CheckIndptr(l.qo_indptr, "qo_indptr"); !s.ok()) return s;
  if (auto s = CheckIndptr(l.kv_indptr, "kv_indptr"); !s.ok()) return s;
  if (l.qo_indptr.size() != l.kv_indptr.size()) {
    return absl::InvalidArgumentError(absl::StrCat("kv_indptr has ", l.kv_indptr.size(),
                                                   " entries: expected ", l.qo_indptr.size(),
                                                   " (batch_size + 1, as qo_indptr)"));
  }
  const size_t batch = l.qo_indptr.size() - 1;
  for (size_t b = 0; b < batch; ++b) {
    const int q_len = l.qo_indptr[b + 1] - l.qo_indptr[b];
    if (q_len > kMaxQLen) {
      return absl::InvalidArgumentError(absl::StrCat("q_len of sequence ", b, " = ", q_len,
                                                     " (qo_indptr[", b + 1, "] - qo_indptr[", b,
                                                     "]): must be at most ", kMaxQLen));
    }
  }
  if (l.page_size == 0) {
    if (!l.kv_lens.empty()) {
      return absl::InvalidArgumentError(
          "kv_lens given for a flat layout (page_size=0): lengths come from kv_indptr");
    }
    return absl::OkStatus();
  }
  if (!l.kv_lens.empty() && l.kv_lens.size() != batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv_lens has ", l.kv_lens.size(), " entries: expected batch_size=", batch));
  }
  // Full pages: the token count span * page_size must fit the int32 lengths the
  // kernel reads (kv_indptr counts pages, so a valid-looking span can overflow).
  for (size_t b = 0; b < batch && l.kv_lens.empty(); ++b) {
    const int64_t tokens = int64_t{l.kv_indptr[b + 1] - l.kv_indptr[b]} * l.page_size;
    if (tokens > INT32_MAX) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kv_indptr[", b + 1, "] - kv_indptr[", b, "] = ", tokens / l.page_size, " pages of ",
          l.page_size, " = ", tokens, " tokens: a sequence holds at most ", INT32_MAX));
    }
  }
  for (size_t b = 0; b < batch && !l.kv_lens.empty(); ++b) {
    const int64_t capacity = int64_t{l.kv_indptr[b + 1] - l.kv_indptr[b]} * l.page_size;
    if (l.kv_lens[b] < 0 || l.kv_lens[b] > capacity) {
      return absl::InvalidArgumentError(absl::StrCat("kv_lens[", b, "]=", l.kv_lens[b],
                                                     ": must be in 0..", capacity, " (",
                                                     capacity / l.page_size, " pages of ",
                                                     l.page_size, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Schedule> BuildSchedule(const LayoutView& l, const ScheduleConfig& config) {
  if (auto s = ValidateLayout(l); !s.ok()) return s;
  if (config.num_ctas < 1 || config.block_m < 1 || config.block_n < 1) {
    return absl::InvalidArgumentError(absl::StrCat("schedule config num_ctas=", config.num_ctas,
                                                   " block_m=", config.block_m, " block_n=",
                                                   config.block_n, ": must all be positive"));
  }
  const MlaScheduleShape shape = ToShape(l, config);
  const int batch = static_cast<int>(l.qo_indptr.size()) - 1;
  const int num_ctas = config.num_ctas;
  Schedule s;
  s.total_q = l.qo_indptr[batch];
  s.seqs.resize(batch);

  // Steps 1-2 of mla_schedule.h: tiles and their places on the cost line.
  std::vector<MlaTile> tiles;
  for (int b = 0; b < batch; ++b) {
    const int q_len = l.qo_indptr[b + 1] - l.qo_indptr[b];
    const int kv_len = SeqKvLen(l, b);
    s.seqs[b] = MlaSeqInfo{l.qo_indptr[b], q_len, kv_len, l.kv_indptr[b]};
    s.max_q_len = std::max(s.max_q_len, q_len);
    for (int i = 0; i < MlaTilesOfSequence(q_len, shape); ++i) {
      tiles.push_back(MlaMakeTile(b, i, q_len, kv_len, shape));
    }
  }
  const int num_tiles = static_cast<int>(tiles.size());
  std::vector<long long> tile_start(num_tiles + 1, 0);
  for (int t = 0; t < num_tiles; ++t) tile_start[t + 1] = tile_start[t] + MlaTileCost(tiles[t]);
  s.total_cost = tile_start[num_tiles];
  long long max_tile_cost = 0;
  for (const MlaTile& t : tiles) max_tile_cost = std::max(max_tile_cost, MlaTileCost(t));
  const MlaCutRule rule = MlaChooseCuts(s.total_cost, max_tile_cost, num_tiles, shape);
  s.target_cost = rule.target;
  s.pieces_per_tile = rule.pieces_per_tile;

  // Step 3: the cuts; step 4: the split tiles' partial slots and merges.
  std::vector<MlaCut> cuts(num_ctas + 1);
  for (int c = 0; c <= num_ctas; ++c) {
    cuts[c] = MlaFindCut(c, rule, tile_start.data(), tiles.data(), num_tiles, config.block_n);
  }
  std::vector<MlaCutSplit> split(num_ctas + 1, MlaCutSplit{0, 0});
  s.combine.resize(num_ctas);
  int num_combine = 0;
  s.num_partials = MlaAssignPartials(cuts.data(), num_ctas, tiles.data(), split.data(),
                                     s.combine.data(), &num_combine);
  s.combine.resize(num_combine);

  // The work items, grouped by CTA.
  s.work_indptr.assign(num_ctas + 1, 0);
  for (int c = 0; c < num_ctas; ++c) {
    int64_t cost = 0;
    MlaForEachPiece(cuts[c], cuts[c + 1], tiles.data(), num_tiles,
                    [&](int t, int kv_start, int kv_end) {
                      const MlaTile& tile = tiles[t];
                      s.work.push_back(MlaWorkItem{tile.seq, tile.row_start, kv_start, kv_end,
                                                   MlaPiecePartial(c, t, cuts.data(), split.data()),
                                                   {0, 0, 0}, s.seqs[tile.seq]});
                      cost += (kv_end - kv_start) + PieceOverhead(tile.rows);
                    });
    s.work_indptr[c + 1] = static_cast<int32_t>(s.work.size());
    s.max_cta_cost = std::max(s.max_cta_cost, cost);
    if (cost > 0) ++s.active_ctas;
  }
  return s;
}

}  // namespace mlajit::plan
