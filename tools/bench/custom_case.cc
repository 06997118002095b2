#include "tools/bench/custom_case.h"

#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/base/mla_types.h"

namespace mlajit::bench {
namespace {

absl::Status Bad(absl::string_view spec, absl::string_view field, absl::string_view value,
                 absl::string_view expected) {
  return absl::InvalidArgumentError(
      absl::StrCat("--case \"", spec, "\": ", field, "=\"", value, "\": expected ", expected));
}

// `text` as an integer in [lo, hi], else an error naming `field`.
absl::StatusOr<int> Field(absl::string_view spec, absl::string_view field, absl::string_view text,
                          int lo, int hi) {
  int v = 0;
  if (!absl::SimpleAtoi(text, &v) || v < lo || v > hi) {
    return Bad(spec, field, text, absl::StrCat("an integer in ", lo, "..", hi));
  }
  return v;
}

}  // namespace

absl::StatusOr<reference::BatchConfig> ParseCustomCase(absl::string_view spec) {
  const std::vector<absl::string_view> f = absl::StrSplit(spec, ',');
  if (f.size() < 4 || f.size() > 8) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--case \"", spec, "\": ", f.size(),
        " fields; expected BATCH,Q_LEN,KV_LEN,HEADS[,FORMAT[,PAGE[,a8][,uniform|skewed]]]"));
  }
  reference::BatchConfig c;
  // The limits keep a case's host-side reference and inputs to a few GB.
  auto batch = Field(spec, "BATCH", f[0], 1, 4096);
  auto q_len = Field(spec, "Q_LEN", f[1], 1, kMaxQLen);
  auto kv_len = Field(spec, "KV_LEN", f[2], 1, 1 << 20);
  auto heads = Field(spec, "HEADS", f[3], 1, kMaxHeads);
  for (const auto* v : {&batch, &q_len, &kv_len, &heads}) {
    if (!v->ok()) return v->status();
  }
  c.batch_size = *batch;
  c.q_len = *q_len;
  c.kv_len = *kv_len;
  c.num_heads = *heads;
  c.kv_format = KvFormat::kFp8E4m3;
  if (f.size() > 4 && f[4] != "fp8") {  // "fp8": fp8_e4m3 for short
    const auto format = KvFormatFromName(std::string_view(f[4].data(), f[4].size()));
    if (!format) return Bad(spec, "FORMAT", f[4], "bf16, fp8_e4m3 (or fp8) or mxfp4");
    c.kv_format = *format;
  }
  if (f.size() > 5) {
    int page = -1;
    if (!absl::SimpleAtoi(f[5], &page) || !IsValidPageSize(page)) {
      return Bad(spec, "PAGE", f[5], "0 (flat), 1, 16, 32, 64 or 128");
    }
    c.page_size = page;
  }
  c.lengths = reference::LengthDistribution::kFixed;
  // Then, in either order: a8, and the length distribution.
  bool seen_q_mode = false, seen_lengths = false;
  for (size_t i = 6; i < f.size(); ++i) {
    if (f[i] == "a8" && !seen_q_mode) {
      c.q_mode = QMode::kFp8;
      seen_q_mode = true;
    } else if ((f[i] == "uniform" || f[i] == "skewed") && !seen_lengths) {
      c.lengths = f[i] == "uniform" ? reference::LengthDistribution::kUniform
                                    : reference::LengthDistribution::kSkewed;
      seen_lengths = true;
    } else {
      return Bad(spec, "option", f[i],
                 "a8 (Q quantised to fp8) or uniform / skewed (KV lengths), each once");
    }
  }
  c.seed = 1234;
  return c;
}

}  // namespace mlajit::bench
