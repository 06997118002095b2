// Output comparison; see compare.h.
#include "src/reference/compare.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/reference/formats.h"

namespace mlajit {
namespace reference {
namespace {

// Accumulates one (got, ref) pair; `written` false for poison.
class Accumulator {
 public:
  void Add(bool written, double got, double ref) {
    ++c_.count;
    if (!written) {
      ++c_.unwritten_count;
      return;
    }
    if (std::isnan(got) || std::isnan(ref)) {
      ++c_.nan_count;
      return;
    }
    if (got == ref) {
      // Exact match, infinities included (-inf lse of an empty row): adds
      // nothing, and keeps inf - inf out of the sums.
      if (std::isfinite(ref)) ref_sq_ += ref * ref;
      return;
    }
    const double diff = got - ref;  // inf when only one side is infinite
    diff_sq_ += diff * diff;
    ref_sq_ += std::isfinite(ref) ? ref * ref : 0.0;
    c_.max_abs = std::max(c_.max_abs, std::fabs(diff));
  }

  Comparison Finish(bool size_mismatch) {
    c_.size_mismatch = size_mismatch;
    const double diff = std::sqrt(diff_sq_);
    c_.rel_l2 = ref_sq_ > 0 ? diff / std::sqrt(ref_sq_) : diff;
    return c_;
  }

 private:
  Comparison c_;
  double diff_sq_ = 0, ref_sq_ = 0;
};

}  // namespace

std::string Comparison::ToString() const {
  return absl::StrFormat(
      "rel_l2=%.3e max_abs=%.3e nan=%d unwritten=%d count=%d%s", rel_l2, max_abs, nan_count,
      unwritten_count, count, size_mismatch ? " SIZE MISMATCH" : "");
}

bool Comparison::Passes(double rel_tol) const {
  // Written as a positive test so that a NaN rel_l2 fails too.
  return !size_mismatch && nan_count == 0 && unwritten_count == 0 && rel_l2 < rel_tol;
}

Comparison CompareBf16(absl::Span<const uint16_t> got_bf16, absl::Span<const float> ref,
                       uint16_t poison_bits) {
  Accumulator acc;
  const size_t n = std::min(got_bf16.size(), ref.size());
  for (size_t i = 0; i < n; ++i) {
    acc.Add(got_bf16[i] != poison_bits, Bf16ToFloat(got_bf16[i]), ref[i]);
  }
  return acc.Finish(got_bf16.size() != ref.size());
}

Comparison CompareF32(absl::Span<const float> got, absl::Span<const float> ref,
                      uint32_t poison_bits) {
  Accumulator acc;
  const size_t n = std::min(got.size(), ref.size());
  for (size_t i = 0; i < n; ++i) acc.Add(FloatBits(got[i]) != poison_bits, got[i], ref[i]);
  return acc.Finish(got.size() != ref.size());
}

}  // namespace reference
}  // namespace mlajit
