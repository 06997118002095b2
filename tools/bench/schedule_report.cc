#include "tools/bench/schedule_report.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/base/mla_types.h"
#include "src/base/status_macros.h"
#include "src/plan/scheduler.h"
#include "src/plan/tile_policy.h"

namespace mlajit::bench {
namespace {

// One SM takes in at most 26.7 bytes a clock by bulk copies, from L2 or DRAM
// (H200 at 1980 MHz, `mlajit_bench --sm-fill`; RESULTS.md v45, v51), and
// DRAM serves at most 4.45 TB/s (DESIGN.md's streaming read): the rates of
// the report's two bounds.
constexpr double kSmFillBytesPerSecond = 26.7 * 1.98e9;
constexpr double kDramBytesPerSecond = 4.45e12;

// Bytes an item brings into its SM: its KV positions as stored and its Q
// rows in bf16 (each item loads its own Q, split pieces again).
int64_t ItemInBytes(const MlaWorkItem& w, const MlaSeqInfo& seq, int block_m, int num_heads,
                    KvFormat kv_format) {
  const int rows_total = seq.q_len * num_heads;
  const int64_t rows = std::max(0, std::min(block_m, rows_total - w.row_start));
  const int64_t tokens = std::max(0, w.kv_end - w.kv_start);
  return tokens * KvBytesPerToken(kv_format) + rows * kHeadDimQk * 2;
}

}  // namespace

absl::Status PrintSchedules(
    const std::string& target,
    const std::vector<std::pair<std::string, reference::BatchConfig>>& cases) {
  std::vector<std::string> parts = absl::StrSplit(target, ':');
  int sm_count = 132;
  if (parts.empty() || parts[0].empty() || parts.size() > 2 ||
      (parts.size() == 2 && (!absl::SimpleAtoi(parts[1], &sm_count) || sm_count < 1))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--schedule \"", target, "\": expected ARCH or ARCH:SM_COUNT (e.g. sm_90a:132)"));
  }
  const std::string& arch = parts[0];
  std::printf("%-40s %5s %5s %8s %6s %9s %9s %6s %6s %8s %7s %7s %s\n", "case", "rows", "ctas",
              "cut", "active", "max_cost", "mean", "items", "merges", "sm_in_KB", "in_us",
              "dram_us", "splits (count x merges)");
  for (const auto& [name, config] : cases) {
    const reference::BatchLayout layout = reference::GenerateLayout(config);
    plan::LayoutView view;
    view.num_heads = config.num_heads;
    view.page_size = config.page_size;
    view.causal = config.causal;
    view.qo_indptr = layout.qo_indptr;
    view.kv_indptr = layout.kv_indptr;
    view.kv_lens = layout.kv_lens;
    MLAJIT_RETURN_IF_ERROR(plan::ValidateLayout(view));
    const plan::BatchWork work = plan::MeasureBatch(view, sm_count);
    MLAJIT_ASSIGN_OR_RETURN(
        const plan::TileShape t,
        plan::ChooseTilesWithOverrides(arch, config.q_len * config.num_heads, config.kv_format,
                                       &work, nullptr, config.page_size));
    const plan::ScheduleConfig sc = plan::ScheduleConfigFor(t, sm_count);
    MLAJIT_ASSIGN_OR_RETURN(plan::Schedule s, plan::BuildSchedule(view, sc));
    int max_items = 0;
    for (int c = 0; c < sc.num_ctas; ++c) {
      max_items = std::max(max_items, s.work_indptr[c + 1] - s.work_indptr[c]);
    }
    // The busiest SM takes in at least its busiest CTA's bytes and at least
    // the mean over SMs (CTAs sharing an SM share its rate).
    int64_t max_cta_in = 0, total_in = 0;
    for (int c = 0; c < sc.num_ctas; ++c) {
      int64_t in = 0;
      for (int i = s.work_indptr[c]; i < s.work_indptr[c + 1]; ++i) {
        const MlaWorkItem& w = s.work[i];
        in += ItemInBytes(w, s.seqs[w.seq], t.block_m, config.num_heads, config.kv_format);
      }
      max_cta_in = std::max(max_cta_in, in);
      total_in += in;
    }
    const double sm_in =
        std::max(static_cast<double>(max_cta_in), static_cast<double>(total_in) / sm_count);
    // DRAM: every KV position once, Q once, the output once.
    double unique = 0;
    for (const MlaSeqInfo& seq : s.seqs) {
      unique += static_cast<double>(seq.kv_len) * KvBytesPerToken(config.kv_format) +
                static_cast<double>(seq.q_len) * config.num_heads * (kHeadDimQk + kHeadDimV) * 2;
    }
    std::map<int, int> splits;
    for (const MlaCombineItem& m : s.combine) ++splits[m.num_splits];
    std::string hist;
    for (const auto& [n, count] : splits)
      absl::StrAppend(&hist, hist.empty() ? "" : " ", n, "x", count);
    const std::string cut =
        s.pieces_per_tile > 0 ? absl::StrCat("aligned", s.pieces_per_tile) : "line";
    std::printf("%-40s %5d %5d %8s %6d %9lld %9.0f %6d %6zu %8.0f %7.1f %7.1f %s\n", name.c_str(),
                t.block_m, sc.num_ctas, cut.c_str(), s.active_ctas,
                static_cast<long long>(s.max_cta_cost),
                static_cast<double>(s.total_cost) / std::max(1, s.active_ctas), max_items,
                s.combine.size(), sm_in / 1024, sm_in / kSmFillBytesPerSecond * 1e6,
                unique / kDramBytesPerSecond * 1e6, hist.empty() ? "-" : hist.c_str());
  }
  return absl::OkStatus();
}

}  // namespace mlajit::bench
