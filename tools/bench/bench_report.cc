#include "tools/bench/bench_report.h"

#include <cmath>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "src/base/mla_types.h"

namespace mlajit::bench {

std::string CaseName(const reference::BatchConfig& c) {
  return absl::StrFormat("(%d,%d,%d,%d) %s%s%s%s", c.batch_size, c.q_len, c.kv_len, c.num_heads,
                         std::string(KvFormatName(c.kv_format)),
                         c.q_mode == QMode::kFp8 ? " a8" : "",
                         c.page_size ? absl::StrCat(" p", c.page_size) : "",
                         c.lengths == reference::LengthDistribution::kSkewed    ? " skewed"
                         : c.lengths == reference::LengthDistribution::kUniform ? " uniform"
                                                                                : "");
}

std::string ClocksJson(const ClockSummary& k) {
  if (!k.available) return "null";
  return absl::StrFormat(
      "{\"samples\":%d,\"sm_mhz_median\":%u,\"sm_mhz_min\":%u,\"sm_mhz_max\":%u,"
      "\"slowed\":%.4f,\"reasons\":\"%s\"}",
      k.samples, k.sm_mhz_median, k.sm_mhz_min, k.sm_mhz_max, k.slowed,
      ClockReasonNames(k.reasons));
}

std::string ResultsTable(const std::vector<CaseResult>& results, bool checked) {
  std::string out;
  absl::StrAppendFormat(
      &out,
      "\n%-8s %-30s %9s %9s %9s %9s %9s %9s %8s %8s %9s %7s %11s %9s %8s %7s %9s %3s %7s "
      "%7s\n",
      "suite", "case", "median_us", "min_us", "paced_us", "burst_us", "graph_us", "host_us", "TB/s",
      "TFLOP/s", "floor_us", "%floor", "contract_us", "%contract", "bound_us", "%bound", "rel_err",
      "ok", "sm_MHz", "slow%");
  std::string current;
  double log_sum = 0, log_floor = 0, log_contract = 0, log_paced = 0, log_bound = 0;
  int n = 0;
  bool all_bounds = true;  // the geomean's bound only when every case has one
  auto flush_geomean = [&]() {
    if (n > 0) {
      const double median = std::exp(log_sum / n), floor = std::exp(log_floor / n);
      const double contract = std::exp(log_contract / n), bound = std::exp(log_bound / n);
      const std::string bound_cols =
          all_bounds ? absl::StrFormat(" %8.2f %6.1f%%", bound, 100 * bound / median) : "";
      absl::StrAppendFormat(
          &out, "%-8s %-30s %9.2f %9s %9.2f %9s %9s %9s %8s %8s %9.2f %6.1f%% %11.2f %8.1f%%%s\n",
          current.c_str(), "geomean", median, "", std::exp(log_paced / n), "", "", "", "", "",
          floor, 100 * floor / median, contract, 100 * contract / median, bound_cols.c_str());
    }
    log_sum = log_floor = log_contract = log_paced = log_bound = 0;
    n = 0;
    all_bounds = true;
  };
  for (const CaseResult& r : results) {
    if (r.c.suite != current) {
      flush_geomean();
      current = r.c.suite;
    }
    const double s = r.median_us * 1e-6;
    const std::string graph = r.graph_us > 0 ? absl::StrFormat("%.2f", r.graph_us) : "-";
    const ClockSummary& k = r.clocks;
    const std::string mhz = k.available ? absl::StrCat(k.sm_mhz_median) : "-";
    const std::string slowed = k.available ? absl::StrFormat("%.0f", 100 * k.slowed) : "-";
    const double bound = r.bounds.bound_us();
    const std::string bound_us = bound > 0 ? absl::StrFormat("%.2f", bound) : "-";
    const std::string bound_pct =
        bound > 0 ? absl::StrFormat("%.1f%%", 100 * bound / r.median_us) : "-";
    absl::StrAppendFormat(
        &out,
        "%-8s %-30s %9.2f %9.2f %9.2f %9.2f %9s %9.2f %8.2f %8.1f %9.2f %6.1f%% %11.2f %8.1f%% "
        "%8s %7s %9.2e %3s %7s %7s\n",
        r.c.suite.c_str(), CaseName(r.c.config).c_str(), r.median_us, r.min_us, r.paced_us,
        r.burst_us, graph.c_str(), r.host_us, r.bytes / s * 1e-12, r.flops / s * 1e-12, r.floor_us,
        100 * r.floor_us / r.median_us, r.contract_floor_us,
        100 * r.contract_floor_us / r.median_us, bound_us.c_str(), bound_pct.c_str(), r.rel_err,
        checked ? (r.passed ? "yes" : "NO") : "-", mhz.c_str(), slowed.c_str());
    log_sum += std::log(r.median_us);
    log_floor += std::log(r.floor_us);
    log_contract += std::log(r.contract_floor_us);
    log_paced += std::log(r.paced_us);
    if (bound > 0) {
      log_bound += std::log(bound);
    } else {
      all_bounds = false;
    }
    ++n;
  }
  flush_geomean();
  return out;
}

std::string ResultsJson(const Ceilings& ceilings, const std::optional<LaunchFloor>& floor,
                        const std::vector<ChainFloor>& chains, int runs, double warmup_ms,
                        const std::vector<CaseResult>& results,
                        const std::vector<NamedPowerWindow>& power) {
  std::ostringstream out;
  auto ceiling_json = [](const Ceiling& c) {
    return absl::StrFormat("{\"value\":%.6g,\"measured\":%s,\"how\":\"%s\"}", c.value,
                           c.measured ? "true" : "false",
                           absl::StrReplaceAll(c.how, {{"\\", "\\\\"}, {"\"", "\\\""}}));
  };
  out << "{\"ceilings\":{\"read_bytes_per_s\":" << ceiling_json(ceilings.read)
      << ",\"fp8_flops\":" << ceiling_json(ceilings.fp8)
      << ",\"bf16_flops\":" << ceiling_json(ceilings.bf16) << "}";
  if (floor.has_value()) {
    out << absl::StrFormat(
        ",\"launch_floor\":{\"grid\":%d,\"one_cta_us\":%.3f,\"full_grid_us\":%.3f,"
        "\"two_chained_us\":%.3f,\"three_chained_us\":%.3f,\"two_burst_us\":%.3f,"
        "\"dependent_launch\":%s,\"two_plain_us\":%.3f,\"three_plain_us\":%.3f,"
        "\"two_burst_plain_us\":%.3f,\"held_one_cta_us\":%.3f,\"held_full_grid_us\":%.3f,"
        "\"held_two_chained_us\":%.3f,\"held_three_chained_us\":%.3f}",
        floor->grid, floor->one_cta_us, floor->full_grid_us, floor->two_chained_us,
        floor->three_chained_us, floor->two_burst_us, floor->dependent_launch ? "true" : "false",
        floor->two_plain_us, floor->three_plain_us, floor->two_burst_plain_us,
        floor->held_one_cta_us, floor->held_full_grid_us, floor->held_two_chained_us,
        floor->held_three_chained_us);
  }
  if (!chains.empty()) {
    out << ",\"chain_floor\":[";
    for (size_t i = 0; i < chains.size(); ++i) {
      const ChainFloor& c = chains[i];
      out << (i ? "," : "")
          << absl::StrFormat(
                 "{\"shape\":\"%s\",\"row_tiles\":%d,\"splits\":%d,\"tiles_per_piece\":%d,"
                 "\"rows\":%d,\"token_bytes\":%d,\"ctas_per_sm\":%d,\"kv_copies\":%d,"
                 "\"decode_only_us\":%.3f,\"decode_merge_us\":%.3f,"
                 "\"decode_merge_l2_us\":%.3f}",
                 c.shape.name, c.shape.row_tiles, c.shape.splits, c.shape.tiles_per_piece,
                 c.shape.rows, c.shape.token_bytes, c.shape.ctas_per_sm, c.kv_copies,
                 c.decode_only_us, c.decode_merge_us, c.decode_merge_l2_us);
    }
    out << "]";
  }
  if (!power.empty()) {
    out << ",\"power\":{";
    for (size_t i = 0; i < power.size(); ++i) {
      out << (i ? "," : "") << "\"" << power[i].name << "\":" << PowerWindowJson(&power[i].window);
    }
    out << "}";
  }
  out << ",\"runs\":" << runs << ",\"warmup_ms\":" << warmup_ms << ",\"cases\":[";
  for (size_t i = 0; i < results.size(); ++i) {
    const CaseResult& r = results[i];
    out << (i ? "," : "") << "{\"suite\":\"" << r.c.suite << "\",\"case\":\""
        << CaseName(r.c.config) << "\",\"median_us\":" << r.median_us << ",\"min_us\":" << r.min_us
        << ",\"paced_us\":" << r.paced_us << ",\"hold_us\":" << r.hold_us
        << ",\"burst_us\":" << r.burst_us << ",\"graph_us\":" << r.graph_us
        << ",\"host_us\":" << r.host_us << ",\"bytes\":" << r.bytes << ",\"flops\":" << r.flops
        << ",\"floor_us\":" << r.floor_us << ",\"contract_floor_us\":" << r.contract_floor_us
        << ",\"bounds\":"
        << (r.bounds.bound_us() > 0
                ? absl::StrFormat("{\"sm_in_bytes\":%.0f,\"in_us\":%.3f,\"mma_us\":%.3f,"
                                  "\"dram_us\":%.3f,\"bound_us\":%.3f}",
                                  r.bounds.sm_in_bytes, r.bounds.in_us, r.bounds.mma_us,
                                  r.bounds.dram_us, r.bounds.bound_us())
                : "null")
        << ",\"rel_err\":" << r.rel_err << ",\"passed\":" << (r.passed ? "true" : "false")
        << ",\"checked\":" << (r.checked ? "true" : "false") << ",\"copies\":" << r.copies
        << ",\"clocks\":" << ClocksJson(r.clocks)
        << ",\"power\":" << PowerWindowJson(r.power ? &*r.power : nullptr) << ",\"times_us\":["
        << absl::StrJoin(r.times_us, ",",
                         [](std::string* o, double t) { absl::StrAppendFormat(o, "%.2f", t); })
        << "]"
        << ",\"plan\":" << (r.plan_json.empty() ? "null" : r.plan_json) << "}";
  }
  out << "]}";
  return out.str();
}

}  // namespace mlajit::bench
