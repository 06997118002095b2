// Fuzzes plan creation below the C ABI: mlajit_plan_create hands the caller's
// indptr arrays to plan::ValidateLayout and then plan::BuildSchedule
// (src/plan/scheduler.h). A runtime needs a GPU, so the target calls that layer.
//
// Input (read with FuzzedDataProvider): a mode byte, then the layout and the
// schedule config. In "deltas" mode the indptr arrays are prefix sums of fuzzed
// lengths, so most layouts are valid and the scheduler itself is exercised; in
// "raw" mode they are fuzzed int32 values, which exercises the validation.
//
// Oracle: no crash or undefined behaviour; errors are kInvalidArgument; a
// schedule covers every tile's KV range with items inside their sequence,
// partial slots and combine items agree, and the balance bound holds.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "src/base/mla_types.h"
#include "src/plan/scheduler.h"

namespace {

using mlajit::plan::LayoutView;
using mlajit::plan::Schedule;
using mlajit::plan::ScheduleConfig;

constexpr int kPageSizes[] = {0, 1, 16, 32, 64, 128};

// Prefix sums of fuzzed lengths; stops before int32 overflow (a caller's int32
// array cannot hold a larger offset anyway).
std::vector<int32_t> PrefixSums(FuzzedDataProvider& in, size_t batch, int64_t max_len) {
  std::vector<int32_t> indptr = {0};
  int64_t sum = 0;
  for (size_t b = 0; b < batch && in.remaining_bytes() > 0; ++b) {
    sum += in.ConsumeIntegralInRange<int64_t>(0, max_len);
    if (sum > INT32_MAX) break;
    indptr.push_back(static_cast<int32_t>(sum));
  }
  return indptr;
}

void CheckSchedule(const LayoutView& l, const ScheduleConfig& c, const Schedule& s) {
  const size_t batch = l.qo_indptr.size() - 1;
  FUZZ_CHECK(s.seqs.size() == batch);
  FUZZ_CHECK(s.total_q == l.qo_indptr[batch]);
  FUZZ_CHECK(s.work_indptr.size() == static_cast<size_t>(c.num_ctas) + 1);
  FUZZ_CHECK(s.work_indptr.front() == 0);
  FUZZ_CHECK(static_cast<size_t>(s.work_indptr.back()) == s.work.size());
  FUZZ_CHECK(std::is_sorted(s.work_indptr.begin(), s.work_indptr.end()));
  FUZZ_CHECK(s.active_ctas >= 0 && s.active_ctas <= c.num_ctas);

  // Every tile's KV need, recomputed from the layout: the items must add up to it.
  int64_t needed_tokens = 0;
  for (size_t b = 0; b < batch; ++b) {
    const ::MlaSeqInfo& q = s.seqs[b];
    FUZZ_CHECK(q.q_len == l.qo_indptr[b + 1] - l.qo_indptr[b]);
    FUZZ_CHECK(q.kv_len >= 0);
    const int rows = q.q_len * l.num_heads;
    for (int r = 0; r < rows; r += c.block_m) {
      const int last = std::min(r + c.block_m, rows) - 1;
      needed_tokens += l.causal ? std::clamp(q.kv_len - q.q_len + last / l.num_heads + 1, 0,
                                             q.kv_len)
                                : q.kv_len;
      if (c.block_m > rows - r) break;  // no r += block_m past INT_MAX
    }
  }
  int64_t covered_tokens = 0;
  int32_t partial_items = 0;
  for (const ::MlaWorkItem& w : s.work) {
    FUZZ_CHECK(w.seq >= 0 && static_cast<size_t>(w.seq) < batch);
    const ::MlaSeqInfo& q = s.seqs[w.seq];
    FUZZ_CHECK(w.row_start >= 0 && (w.row_start < q.q_len * l.num_heads || q.q_len == 0));
    FUZZ_CHECK(0 <= w.kv_start && w.kv_start <= w.kv_end && w.kv_end <= q.kv_len);
    FUZZ_CHECK(w.partial >= -1 && w.partial < s.num_partials);
    covered_tokens += w.kv_end - w.kv_start;
    partial_items += w.partial >= 0;
  }
  FUZZ_CHECK(covered_tokens == needed_tokens);
  FUZZ_CHECK(partial_items == s.num_partials);
  int32_t splits = 0;
  for (const ::MlaCombineItem& m : s.combine) {
    FUZZ_CHECK(m.num_splits > 1 && m.partial_start == splits);
    splits += m.num_splits;
  }
  FUZZ_CHECK(splits == s.num_partials);
  const int64_t slack = 2 * int64_t{c.block_n} + 2 * mlajit::plan::PieceOverhead(c.block_m);
  FUZZ_CHECK(s.max_cta_cost <= s.target_cost + slack);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const uint8_t mode = in.ConsumeIntegral<uint8_t>();
  const bool raw = mode & 1;

  LayoutView l;
  l.num_heads = raw ? in.ConsumeIntegral<int>() : in.ConsumeIntegralInRange<int>(1, mlajit::kMaxHeads);
  l.page_size = (mode & 2) ? in.ConsumeIntegral<int>() : in.PickValueInArray(kPageSizes);
  l.causal = in.ConsumeBool();
  ScheduleConfig c;
  if (mode & 4) {  // anything an int holds, as a caller of BuildSchedule could pass
    c.num_ctas = in.ConsumeIntegralInRange<int>(INT32_MIN, 4096);  // the grid is allocated
    c.block_m = in.ConsumeIntegral<int>();
    c.block_n = in.ConsumeIntegral<int>();
    c.min_cost_per_cta = in.ConsumeIntegral<int>();
  } else {  // the shapes the tile policy picks from
    c.num_ctas = in.ConsumeIntegralInRange<int>(1, 264);
    c.block_m = 16 << in.ConsumeIntegralInRange<int>(0, 3);
    c.block_n = 16 << in.ConsumeIntegralInRange<int>(0, 2);
    c.min_cost_per_cta = in.ConsumeIntegralInRange<int>(0, 4096);
  }
  const bool with_kv_lens = in.ConsumeBool();
  const size_t batch = in.ConsumeIntegralInRange<size_t>(0, 256);

  std::vector<int32_t> qo, kv, kv_lens;
  if (raw) {
    for (size_t i = 0; i <= batch && in.remaining_bytes() > 0; ++i) {
      qo.push_back(in.ConsumeIntegral<int32_t>());
      kv.push_back(in.ConsumeIntegral<int32_t>());
      if (with_kv_lens && i < batch) kv_lens.push_back(in.ConsumeIntegral<int32_t>());
    }
  } else {
    qo = PrefixSums(in, batch, mlajit::kMaxQLen);
    kv = PrefixSums(in, qo.size() - 1, in.ConsumeBool() ? INT32_MAX : 4096);
    qo.resize(kv.size());
    const int page = std::max(l.page_size, 1);
    for (size_t b = 0; with_kv_lens && b + 1 < kv.size(); ++b) {
      const int64_t capacity = int64_t{kv[b + 1] - kv[b]} * page;
      kv_lens.push_back(static_cast<int32_t>(
          std::min<int64_t>(in.ConsumeIntegralInRange<int64_t>(0, capacity), INT32_MAX)));
    }
  }
  l.qo_indptr = qo;
  l.kv_indptr = kv;
  l.kv_lens = kv_lens;

  const absl::Status valid = mlajit::plan::ValidateLayout(l);
  FUZZ_CHECK(valid.ok() || valid.code() == absl::StatusCode::kInvalidArgument);
  absl::StatusOr<Schedule> s = mlajit::plan::BuildSchedule(l, c);
  if (!s.ok()) {
    FUZZ_CHECK(s.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  FUZZ_CHECK(valid.ok());
  CheckSchedule(l, c, *s);
  return 0;
}
