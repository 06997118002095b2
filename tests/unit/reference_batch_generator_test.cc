// The batch generator: determinism, layout, value distribution, NaN fill.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "src/reference/batch_generator.h"
#include "src/reference/formats.h"

namespace mlajit {
namespace reference {
namespace {

bool SameBytes(const Batch& a, const Batch& b) {
  return a.qo_indptr == b.qo_indptr && a.kv_indptr == b.kv_indptr && a.kv_lens == b.kv_lens &&
         a.kv_indices == b.kv_indices && a.q == b.q && a.kv == b.kv &&
         std::memcmp(&a.kv_scale, &b.kv_scale, sizeof(float)) == 0 && a.sm_scale == b.sm_scale;
}

BatchConfig Paged(KvFormat f) {
  BatchConfig c;
  c.batch_size = 6;
  c.num_heads = 4;
  c.q_len = 2;
  c.kv_len = 300;
  c.lengths = LengthDistribution::kUniform;
  c.kv_format = f;
  c.page_size = 32;
  c.seed = 42;
  return c;
}

TEST(BatchGenerator, SameSeedSameBytesOtherSeedOtherBytes) {
  for (KvFormat f : {KvFormat::kBf16, KvFormat::kFp8E4m3, KvFormat::kMxfp4}) {
    const BatchConfig c = Paged(f);
    const Batch a = GenerateBatch(c), b = GenerateBatch(c);
    EXPECT_TRUE(SameBytes(a, b)) << KvFormatName(f);
    BatchConfig c2 = c;
    c2.seed = 43;
    const Batch d = GenerateBatch(c2);
    EXPECT_NE(a.q, d.q);
    EXPECT_NE(a.kv_lens, d.kv_lens);
    EXPECT_NE(a.kv_indices, d.kv_indices);
  }
}

TEST(BatchGenerator, NormalStreamIsBoxMullerAndStandardNormal) {
  // Own log/sin/cos polynomials agree with libm's Box-Muller to float rounding.
  double sum = 0, sq = 0;
  int beyond2 = 0;
  const int n = 200000;
  for (int i = 0; i < n / 2; ++i) {
    const uint64_t bits = reference_internal::Draw(123, i);
    float a, b;
    reference_internal::NormalPair(bits, &a, &b);
    const double u1 = (static_cast<double>(bits >> 32) + 0.5) / 4294967296.0;
    const double u2 = (static_cast<double>(bits & 0xFFFFFFFFu) + 0.5) / 4294967296.0;
    const double r = std::sqrt(-2 * std::log(u1));
    ASSERT_NEAR(a, r * std::cos(2 * M_PI * u2), 2e-6 * (1 + r));
    ASSERT_NEAR(b, r * std::sin(2 * M_PI * u2), 2e-6 * (1 + r));
    ASSERT_EQ(reference_internal::NormalAt(123, 2 * i), a);
    ASSERT_EQ(reference_internal::NormalAt(123, 2 * i + 1), b);
    for (double v : {double{a}, double{b}}) {
      sum += v;
      sq += v * v;
      beyond2 += std::fabs(v) > 2;
    }
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sq / n, 1.0, 0.02);
  EXPECT_NEAR(beyond2 / static_cast<double>(n), 0.0455, 0.003);  // P(|z| > 2)
}

TEST(BatchGenerator, LayoutIsConsistent) {
  const Batch b = GenerateBatch(Paged(KvFormat::kFp8E4m3));
  const BatchConfig& c = b.config;
  ASSERT_EQ(b.qo_indptr.size(), 7u);
  EXPECT_EQ(b.total_q(), 12);
  EXPECT_EQ(b.q.size(), 12u * 4 * kHeadDimQk);
  EXPECT_FLOAT_EQ(b.sm_scale, 1.0f / std::sqrt(192.0f));
  std::set<int32_t> pages;
  for (int s = 0; s < c.batch_size; ++s) {
    EXPECT_GE(b.kv_lens[s], 1);
    EXPECT_LE(b.kv_lens[s], c.kv_len);
    EXPECT_EQ(b.kv_indptr[s + 1] - b.kv_indptr[s], (b.kv_lens[s] + 31) / 32);
  }
  for (int32_t p : b.kv_indices) {
    EXPECT_GE(p, 0);
    EXPECT_LT(p, b.num_kv_slots() / 32);
    EXPECT_TRUE(pages.insert(p).second) << "page " << p << " used twice";
  }
  EXPECT_GT(b.num_kv_slots() / 32, static_cast<int64_t>(b.kv_indices.size()));  // spare pages exist
  EXPECT_FALSE(std::is_sorted(b.kv_indices.begin(), b.kv_indices.end()));      // shuffled
  EXPECT_TRUE(ValidateProblem(b.problem()).ok());
  BatchConfig ordered = c;
  ordered.shuffle_pages = false;
  const Batch o = GenerateBatch(ordered);
  EXPECT_TRUE(std::is_sorted(o.kv_indices.begin(), o.kv_indices.end()));
}

TEST(BatchGenerator, GenerateLayoutIsTheBatchsLayout) {
  for (int page : {0, 1, 64}) {
    for (LengthDistribution d :
         {LengthDistribution::kFixed, LengthDistribution::kUniform, LengthDistribution::kSkewed}) {
      BatchConfig c;
      c.batch_size = 9;
      c.q_len = 2;
      c.kv_len = 700;
      c.page_size = page;
      c.lengths = d;
      c.zero_length_fraction = 0.2;
      c.seed = 77;
      const Batch b = GenerateBatch(c);
      const BatchLayout l = GenerateLayout(c);
      EXPECT_EQ(l.qo_indptr, b.qo_indptr) << page;
      EXPECT_EQ(l.kv_indptr, b.kv_indptr) << page;
      EXPECT_EQ(l.kv_lens, b.kv_lens) << page;
    }
  }
}

TEST(BatchGenerator, UnusedSlotsHoldNan) {
  for (KvFormat f : {KvFormat::kBf16, KvFormat::kFp8E4m3, KvFormat::kMxfp4}) {
    const Batch b = GenerateBatch(Paged(f));
    const int bpt = KvBytesPerToken(f);
    std::vector<bool> used(b.num_kv_slots(), false);
    for (int s = 0; s < b.config.batch_size; ++s) {
      for (int i = 0; i < b.kv_lens[s]; ++i) used[b.kv_indices[b.kv_indptr[s] + i / 32] * 32 + i % 32] = true;
    }
    int64_t unused = 0;
    for (int64_t slot = 0; slot < b.num_kv_slots(); ++slot) {
      const uint8_t* t = &b.kv[slot * bpt];
      bool all_nan = true, any_nan = false;
      if (f == KvFormat::kFp8E4m3) {
        for (int d = 0; d < kHeadDimQk; ++d) {
          const bool nan = std::isnan(Fp8E4m3ToFloat(t[d]));
          all_nan &= nan;
          any_nan |= nan;
        }
      } else if (f == KvFormat::kBf16) {
        for (int d = 0; d < kHeadDimQk; ++d) {
          uint16_t bits;
          std::memcpy(&bits, t + 2 * d, 2);
          const bool nan = std::isnan(Bf16ToFloat(bits));
          all_nan &= nan;
          any_nan |= nan;
        }
      } else {
        std::vector<float> v(kHeadDimQk);
        DecodeMxfp4Token(t, v.data());
        for (float x : v) {
          all_nan &= std::isnan(x);
          any_nan |= std::isnan(x);
        }
      }
      if (used[slot]) {
        ASSERT_FALSE(any_nan) << KvFormatName(f) << " slot " << slot;
      } else {
        ASSERT_TRUE(all_nan) << KvFormatName(f) << " slot " << slot;
        ++unused;
      }
    }
    EXPECT_GT(unused, 32) << KvFormatName(f);  // page tails and spare pages
  }
}

TEST(BatchGenerator, Fp8UsesThePerTensorScale) {
  BatchConfig c = Paged(KvFormat::kFp8E4m3);
  c.page_size = 0;
  const Batch b = GenerateBatch(c);
  // The amax element lands exactly on +-448; the scale is amax / 448 with amax of
  // a few thousand normal samples, i.e. a few sigma.
  int at_max = 0;
  for (uint8_t code : b.kv) at_max += (code & 0x7F) == 0x7E;
  EXPECT_GE(at_max, 1);
  EXPECT_GT(b.kv_scale * 448, 3.0f);
  EXPECT_LT(b.kv_scale * 448, 7.0f);
  // Decoded values look standard normal.
  double sq = 0;
  for (uint8_t code : b.kv) sq += std::pow(Fp8E4m3ToFloat(code) * b.kv_scale, 2);
  EXPECT_NEAR(sq / b.kv.size(), 1.0, 0.05);
}

TEST(BatchGenerator, LengthDistributions) {
  BatchConfig c;
  c.batch_size = 40;
  c.num_heads = 1;
  c.kv_len = 320;
  c.lengths = LengthDistribution::kSkewed;
  Batch b = GenerateBatch(c);
  int longest = 0, at_max = 0;
  for (int s = 0; s < 40; ++s) {
    longest = std::max<int>(longest, b.kv_len(s));
    at_max += b.kv_len(s) == 320;
    if (b.kv_len(s) != 320) {
      EXPECT_LE(b.kv_len(s), 320 / 16);
    }
  }
  EXPECT_EQ(at_max, 1);
  EXPECT_EQ(longest, 320);
  c.lengths = LengthDistribution::kUniform;
  b = GenerateBatch(c);
  std::set<int64_t> distinct;
  for (int s = 0; s < 40; ++s) {
    EXPECT_GE(b.kv_len(s), 1);
    EXPECT_LE(b.kv_len(s), 320);
    distinct.insert(b.kv_len(s));
  }
  EXPECT_GT(distinct.size(), 20u);
  c.lengths = LengthDistribution::kFixed;
  c.zero_length_fraction = 0.25;
  b = GenerateBatch(c);
  int zeros = 0;
  for (int s = 0; s < 40; ++s) {
    zeros += b.kv_len(s) == 0;
    if (b.kv_len(s) != 0) {
      EXPECT_EQ(b.kv_len(s), 320);
    }
  }
  EXPECT_EQ(zeros, 10);
  c.q_len = 0;
  EXPECT_EQ(GenerateBatch(c).total_q(), 0);
}

}  // namespace
}  // namespace reference
}  // namespace mlajit
