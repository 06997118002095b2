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

// KV positions the last row of a tile may see (causal rows see a prefix).
int TileKvNeed(const LayoutView& l, int q_len, int kv_len, int last_row) {
  if (!l.causal) return kv_len;
  const int t = last_row / l.num_heads;
  return std::clamp(kv_len - q_len + t + 1, 0, kv_len);
}

struct Tile {
  int seq, row_start, rows, kv_need;
};

// Greedy fill of the CTAs in order, each up to `target`; the last CTA takes what
// is left (so an infeasible target shows up as an overloaded last CTA).
void FillCtas(const std::vector<Tile>& tiles, const ScheduleConfig& config, int64_t target,
              Schedule* s) {
  const int64_t num_ctas = config.num_ctas;
  s->target_cost = target;
  s->work.clear();
  s->combine.clear();
  s->num_partials = 0;
  s->work_indptr.assign(num_ctas + 1, 0);
  std::vector<int64_t> cta_cost(num_ctas, 0);
  int64_t cta = 0;
  auto close_cta_if_full = [&]() {
    if (cta_cost[cta] >= target && cta + 1 < num_ctas) ++cta;
  };
  auto add_item = [&](const Tile& t, int kv_start, int kv_end) {
    s->work.push_back(MlaWorkItem{t.seq, t.row_start, kv_start, kv_end, -1, {0, 0, 0}});
    ++s->work_indptr[cta + 1];
    cta_cost[cta] += (kv_end - kv_start) + PieceOverhead(t.rows);
  };
  for (const Tile& t : tiles) {
    const size_t first_item = s->work.size();
    const int64_t overhead = PieceOverhead(t.rows);
    if (t.kv_need == 0) {  // still writes zeros and lse = -inf
      add_item(t, 0, 0);
      close_cta_if_full();
      continue;
    }
    int start = 0;
    while (start < t.kv_need) {
      const int64_t room = target - cta_cost[cta] - overhead;
      if (room < config.block_n && cta_cost[cta] > 0 && cta + 1 < num_ctas) {
        ++cta;  // too little room for a useful piece here
        continue;
      }
      int n = t.kv_need - start;
      if (cta + 1 < num_ctas && n > room) {
        // Whole KV tiles, rounded up, so that every CTA reaches the target.
        const int64_t tiles_n = (std::max<int64_t>(room, 1) + config.block_n - 1) / config.block_n;
        n = static_cast<int>(std::min<int64_t>(tiles_n * config.block_n, n));
        if (t.kv_need - start - n < config.block_n) n = t.kv_need - start;  // no tiny tail
      }
      add_item(t, start, start + n);
      start += n;
      close_cta_if_full();
    }
    const int pieces = static_cast<int>(s->work.size() - first_item);
    if (pieces > 1) {
      s->combine.push_back(MlaCombineItem{t.seq, t.row_start, s->num_partials, pieces});
      for (size_t i = first_item; i < s->work.size(); ++i) s->work[i].partial = s->num_partials++;
    }
  }
  s->max_cta_cost = 0;
  s->active_ctas = 0;
  for (int64_t c = 0; c < num_ctas; ++c) {
    s->work_indptr[c + 1] += s->work_indptr[c];
    s->max_cta_cost = std::max(s->max_cta_cost, cta_cost[c]);
    if (cta_cost[c] > 0) ++s->active_ctas;
  }
}

}  // namespace

int64_t PieceOverhead(int rows) { return 4 * int64_t{rows} + 32; }

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
  const size_t batch = l.qo_indptr.size() - 1;
  Schedule s;
  s.total_q = l.qo_indptr[batch];
  s.seqs.resize(batch);

  std::vector<Tile> tiles;
  for (size_t b = 0; b < batch; ++b) {
    const int q_len = l.qo_indptr[b + 1] - l.qo_indptr[b];
    const int kv_len = SeqKvLen(l, b);
    s.seqs[b] = MlaSeqInfo{l.qo_indptr[b], q_len, kv_len, l.kv_indptr[b]};
    s.max_q_len = std::max(s.max_q_len, q_len);
    const int rows = q_len * l.num_heads;
    for (int r = 0; r < rows; r += config.block_m) {
      const int tile_rows = std::min(config.block_m, rows - r);
      tiles.push_back({static_cast<int>(b), r, tile_rows,
                       TileKvNeed(l, q_len, kv_len, r + tile_rows - 1)});
      s.total_cost += tiles.back().kv_need + PieceOverhead(tile_rows);
    }
  }

  // Pieces add overhead, so the greedy fill below may need a target above the
  // plain average: search the smallest target whose fill fits the grid within
  // the balance bound (the fill is cheap: one pass over the tiles).
  const int64_t num_ctas = config.num_ctas;
  const int64_t slack = 2 * int64_t{config.block_n} + 2 * PieceOverhead(config.block_m);
  int64_t lo = std::max<int64_t>((s.total_cost + num_ctas - 1) / num_ctas,
                                 config.min_cost_per_cta);
  int64_t hi = std::max<int64_t>(lo, s.total_cost + slack);
  Schedule best = s;
  FillCtas(tiles, config, hi, &best);
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    Schedule trial = s;
    FillCtas(tiles, config, mid, &trial);
    if (trial.max_cta_cost <= mid + slack) {
      best = std::move(trial);
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  s = std::move(best);
  return s;
}

}  // namespace mlajit::plan
