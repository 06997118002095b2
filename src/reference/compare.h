// Compares a kernel's output with the CPU reference: relative L2 error, max
// absolute error, NaN count and the count of elements still holding the poison
// pattern the output was filled with before the launch (never written).
//
//   std::vector<uint16_t> out(n, kPoisonBf16);        // poison, then run the kernel
//   Comparison c = CompareBf16(out, ref_out, kPoisonBf16);
//   EXPECT_TRUE(c.Passes(1e-2)) << c.ToString();
#ifndef MLAJIT_SRC_REFERENCE_COMPARE_H_
#define MLAJIT_SRC_REFERENCE_COMPARE_H_

#include <cstdint>
#include <string>

#include "absl/types/span.h"

namespace mlajit {
namespace reference {

// Signalling-NaN patterns: arithmetic only ever produces quiet NaNs (0x7FC0,
// 0xFFC0, 0x7FC00000, ...) and conversions quieten, so a kernel never writes
// these by computing; finding one means the element was never stored.
inline constexpr uint16_t kPoisonBf16 = 0x7FA5;
inline constexpr uint32_t kPoisonF32 = 0x7FA5A5A5u;

struct Comparison {
  double rel_l2 = 0;          // ||got - ref|| / ||ref|| over written elements (||got - ref|| if ref is 0)
  double max_abs = 0;         // max |got - ref| over written elements
  int64_t nan_count = 0;      // written elements that are NaN in got or in ref
  int64_t unwritten_count = 0;  // elements equal to the poison bits
  int64_t count = 0;          // elements compared
  bool size_mismatch = false;  // got and ref differ in size (never passes)

  std::string ToString() const;
  // No size mismatch, no NaN, nothing unwritten, rel_l2 < rel_tol.
  bool Passes(double rel_tol) const;
};

// got_bf16: bf16 bits; ref: float, same size. Equal infinities count as equal.
Comparison CompareBf16(absl::Span<const uint16_t> got_bf16, absl::Span<const float> ref,
                       uint16_t poison_bits = kPoisonBf16);
// For float outputs such as lse; -inf == -inf (kv_len 0 rows) is an exact match.
Comparison CompareF32(absl::Span<const float> got, absl::Span<const float> ref,
                      uint32_t poison_bits = kPoisonF32);

}  // namespace reference
}  // namespace mlajit

#endif  // MLAJIT_SRC_REFERENCE_COMPARE_H_
