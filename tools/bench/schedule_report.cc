#include "tools/bench/schedule_report.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/base/status_macros.h"
#include "src/plan/scheduler.h"
#include "src/plan/tile_policy.h"

namespace mlajit::bench {

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
  std::printf("%-40s %5s %5s %8s %6s %9s %9s %6s %6s %s\n", "case", "rows", "ctas", "cut", "active",
              "max_cost", "mean", "items", "merges", "splits (count x merges)");
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
    std::map<int, int> splits;
    for (const MlaCombineItem& m : s.combine) ++splits[m.num_splits];
    std::string hist;
    for (const auto& [n, count] : splits)
      absl::StrAppend(&hist, hist.empty() ? "" : " ", n, "x", count);
    const std::string cut =
        s.pieces_per_tile > 0 ? absl::StrCat("aligned", s.pieces_per_tile) : "line";
    std::printf("%-40s %5d %5d %8s %6d %9lld %9.0f %6d %6zu %s\n", name.c_str(), t.block_m,
                sc.num_ctas, cut.c_str(), s.active_ctas, static_cast<long long>(s.max_cta_cost),
                static_cast<double>(s.total_cost) / std::max(1, s.active_ctas), max_items,
                s.combine.size(), hist.empty() ? "-" : hist.c_str());
  }
  return absl::OkStatus();
}

}  // namespace mlajit::bench
