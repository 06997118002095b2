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
#include "src/jit/json_util.h"
#include "src/plan/scheduler.h"
#include "src/plan/tile_policy.h"

namespace mlajit::bench {
namespace {

// With every SM busy, L2 has given each at most 30.2 bytes a clock
// (`mlajit_bench --sm-fill`, RESULTS.md v55: bulk copies at 132 CTAs, 29.1-30.2
// by copy size and issuing warps, on an H100, whose SMs and L2 are the H200's
// chip's). One SM alone takes in about 105. The 26.7 used until v59 was the
// probe's one-thread loop (v55), which made this "bound" 12 % above the
// rate measured since. Its tensor cores do at most 4096 bf16 or 8192
// fp8 dense FLOPs a clock (their peak: the 64-row bf16 seesaw's products run
// there, v45, above the 680 TFLOP/s that cuBLAS sustains). DRAM's rate is
// the caller's (schedule_report.h).
constexpr double kClockHz = 1.98e9;
constexpr double kSmFillBytesPerSecond = 30.2 * kClockHz;
constexpr double kSmBf16FlopsPerSecond = 4096 * kClockHz;
constexpr double kSmFp8FlopsPerSecond = 8192 * kClockHz;

// What an item asks of its SM: the bytes it brings in (its KV positions as
// stored and its Q rows in bf16: each item loads its own Q, split pieces
// again) and the seconds its products take at the SM's tensor rate, as
// issued (block_m rows by whole 64-token tiles), each at the rate the
// accuracy contract allows (tools/bench/roofline.h): P V in bf16; S in bf16,
// or as two e4m3 terms for fp8 and MXFP4 KV with bf16 Q, or one with a8 Q.
struct SmLoad {
  double in_bytes = 0;
  double mma_seconds = 0;
};
SmLoad ItemLoad(const MlaWorkItem& w, const MlaSeqInfo& seq, int block_m,
                const reference::BatchConfig& config) {
  const int rows_total = seq.q_len * config.num_heads;
  const int64_t rows = std::max(0, std::min(block_m, rows_total - w.row_start));
  const int64_t tokens = std::max(0, w.kv_end - w.kv_start);
  const double issued = static_cast<double>(block_m) * ((tokens + 63) / 64 * 64);
  const double s_seconds = config.kv_format == KvFormat::kBf16 ? 1 / kSmBf16FlopsPerSecond
                           : config.q_mode == QMode::kFp8      ? 1 / kSmFp8FlopsPerSecond
                                                               : 2 / kSmFp8FlopsPerSecond;
  SmLoad load;
  load.in_bytes =
      static_cast<double>(tokens * KvBytesPerToken(config.kv_format) + rows * kHeadDimQk * 2);
  load.mma_seconds = issued * 2 * (kHeadDimQk * s_seconds + kHeadDimV / kSmBf16FlopsPerSecond);
  return load;
}

}  // namespace

plan::LayoutView LayoutViewOf(const reference::BatchConfig& batch,
                              const reference::BatchLayout& layout) {
  plan::LayoutView view;
  view.num_heads = batch.num_heads;
  view.page_size = batch.page_size;
  view.causal = batch.causal;
  view.qo_indptr = layout.qo_indptr;
  view.kv_indptr = layout.kv_indptr;
  view.kv_lens = layout.kv_lens;
  return view;
}

double SmBounds::bound_us() const { return std::max({in_us, mma_us, dram_us}); }

SmBounds BoundsOf(const plan::Schedule& s, const plan::ScheduleConfig& sc, int sm_count,
                  const reference::BatchConfig& config, double dram_bytes_per_second) {
  // The busiest SM takes in and computes at least its busiest CTA's share
  // and at least the mean over SMs (CTAs sharing an SM share its rates).
  SmLoad max_cta, total;
  for (int c = 0; c < sc.num_ctas; ++c) {
    SmLoad cta;
    for (int i = s.work_indptr[c]; i < s.work_indptr[c + 1]; ++i) {
      const MlaWorkItem& w = s.work[i];
      const SmLoad item = ItemLoad(w, s.seqs[w.seq], sc.block_m, config);
      cta.in_bytes += item.in_bytes;
      cta.mma_seconds += item.mma_seconds;
    }
    max_cta.in_bytes = std::max(max_cta.in_bytes, cta.in_bytes);
    max_cta.mma_seconds = std::max(max_cta.mma_seconds, cta.mma_seconds);
    total.in_bytes += cta.in_bytes;
    total.mma_seconds += cta.mma_seconds;
  }
  // DRAM: every KV position once, Q once, the output once.
  double unique = 0;
  for (const MlaSeqInfo& seq : s.seqs) {
    unique += static_cast<double>(seq.kv_len) * KvBytesPerToken(config.kv_format) +
              static_cast<double>(seq.q_len) * config.num_heads * (kHeadDimQk + kHeadDimV) * 2;
  }
  SmBounds b;
  b.sm_in_bytes = std::max(max_cta.in_bytes, total.in_bytes / sm_count);
  b.in_us = b.sm_in_bytes / kSmFillBytesPerSecond * 1e6;
  b.mma_us = std::max(max_cta.mma_seconds, total.mma_seconds / sm_count) * 1e6;
  b.dram_us = unique / dram_bytes_per_second * 1e6;
  return b;
}

absl::StatusOr<plan::ScheduleConfig> ScheduleConfigOfPlan(const std::string& plan_json) {
  MLAJIT_ASSIGN_OR_RETURN(const jit::jit_internal::FlatJsonObject o,
                          jit::jit_internal::ParseFlatJsonObject(plan_json));
  plan::ScheduleConfig sc;
  MLAJIT_ASSIGN_OR_RETURN(sc.num_ctas, o.GetInt("num_ctas"));
  MLAJIT_ASSIGN_OR_RETURN(sc.block_m, o.GetInt("block_m"));
  MLAJIT_ASSIGN_OR_RETURN(sc.block_n, o.GetInt("block_n"));
  MLAJIT_ASSIGN_OR_RETURN(sc.min_cost_per_cta, o.GetInt("min_split_cost"));
  return sc;
}

absl::StatusOr<SmBounds> ScheduleBounds(const reference::BatchConfig& config,
                                        const reference::BatchLayout& layout,
                                        const plan::ScheduleConfig& sc, int sm_count,
                                        double dram_bytes_per_second) {
  const plan::LayoutView view = LayoutViewOf(config, layout);
  MLAJIT_RETURN_IF_ERROR(plan::ValidateLayout(view));
  MLAJIT_ASSIGN_OR_RETURN(plan::Schedule s, plan::BuildSchedule(view, sc));
  return BoundsOf(s, sc, sm_count, config, dram_bytes_per_second);
}

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
  std::printf("%-40s %5s %5s %8s %6s %9s %9s %6s %6s %8s %7s %7s %7s %s\n", "case", "rows", "ctas",
              "cut", "active", "max_cost", "mean", "items", "merges", "sm_in_KB", "in_us", "mma_us",
              "dram_us", "splits (count x merges)");
  for (const auto& [name, config] : cases) {
    const reference::BatchLayout layout = reference::GenerateLayout(config);
    const plan::LayoutView view = LayoutViewOf(config, layout);
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
    const SmBounds b = BoundsOf(s, sc, sm_count, config);
    std::map<int, int> splits;
    for (const MlaCombineItem& m : s.combine) ++splits[m.num_splits];
    std::string hist;
    for (const auto& [n, count] : splits)
      absl::StrAppend(&hist, hist.empty() ? "" : " ", n, "x", count);
    const std::string cut =
        s.pieces_per_tile > 0 ? absl::StrCat("aligned", s.pieces_per_tile) : "line";
    std::printf(
        "%-40s %5d %5d %8s %6d %9lld %9.0f %6d %6zu %8.0f %7.1f %7.1f %7.1f %s\n", name.c_str(),
        t.block_m, sc.num_ctas, cut.c_str(), s.active_ctas, static_cast<long long>(s.max_cta_cost),
        static_cast<double>(s.total_cost) / std::max(1, s.active_ctas), max_items, s.combine.size(),
        b.sm_in_bytes / 1024, b.in_us, b.mma_us, b.dram_us, hist.empty() ? "-" : hist.c_str());
  }
  return absl::OkStatus();
}

}  // namespace mlajit::bench
