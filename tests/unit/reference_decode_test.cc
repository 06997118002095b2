// The CPU reference decode against a deliberately naive implementation written
// here (one thread, one token at a time, textbook softmax), plus the layout and
// edge-case contracts of DESIGN.md section 1.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/reference/batch_generator.h"
#include "src/reference/compare.h"
#include "src/reference/formats.h"
#include "src/reference/mla_reference.h"

namespace mlajit {
namespace reference {
namespace {

using ::testing::HasSubstr;

struct Result {
  std::vector<float> out, lse;
};

// Token i of sequence b as 576 doubles, scales applied.
std::vector<double> NaiveToken(const DecodeProblem& p, int b, int64_t i) {
  int64_t slot = p.kv_indptr[b] + i;
  if (p.page_size > 0) {
    slot = static_cast<int64_t>(p.kv_indices[p.kv_indptr[b] + i / p.page_size]) * p.page_size +
           i % p.page_size;
  }
  const uint8_t* src = p.kv.data() + slot * KvBytesPerToken(p.kv_format);
  std::vector<double> k(kHeadDimQk);
  if (p.kv_format == KvFormat::kFp8E4m3) {
    for (int d = 0; d < kHeadDimQk; ++d) k[d] = static_cast<double>(Fp8E4m3ToFloat(src[d])) * p.kv_scale;
  } else if (p.kv_format == KvFormat::kBf16) {
    for (int d = 0; d < kHeadDimQk; ++d) {
      uint16_t bits;
      std::memcpy(&bits, src + 2 * d, 2);
      k[d] = Bf16ToFloat(bits);
    }
  } else {
    std::vector<float> f(kHeadDimQk);
    DecodeMxfp4Token(src, f.data());
    for (int d = 0; d < kHeadDimQk; ++d) k[d] = f[d];
  }
  return k;
}

Result Naive(const DecodeProblem& p) {
  const int B = static_cast<int>(p.qo_indptr.size()) - 1;
  const int H = p.num_heads;
  const int total_q = p.qo_indptr[B];
  std::vector<double> q(p.q.size());
  std::vector<float> qf(p.q.size());
  for (size_t i = 0; i < p.q.size(); ++i) qf[i] = Bf16ToFloat(p.q[i]);
  if (p.q_mode == QMode::kFp8) {
    // a8: each query row (token and head, 576 values) quantised on its own,
    // by the smallest power of two that takes its largest |q| to 448 or less.
    for (size_t row = 0; row < q.size() / kHeadDimQk; ++row) {
      const size_t at = row * kHeadDimQk;
      double amax = 0;
      for (int d = 0; d < kHeadDimQk; ++d) amax = std::max(amax, double{std::fabs(qf[at + d])});
      float scale = 1.0f;
      if (amax > 0) {
        while (448.0 * scale < amax) scale *= 2.0f;
        while (448.0 * (scale / 2.0f) >= amax) scale /= 2.0f;
      }
      for (int d = 0; d < kHeadDimQk; ++d) {
        q[at + d] = static_cast<double>(Fp8E4m3ToFloat(FloatToFp8E4m3(qf[at + d] / scale))) * scale;
      }
    }
  } else {
    for (size_t i = 0; i < q.size(); ++i) q[i] = qf[i];
  }
  Result r;
  r.out.assign(static_cast<size_t>(total_q) * H * kHeadDimV, 0.0f);
  r.lse.assign(static_cast<size_t>(total_q) * H, -std::numeric_limits<float>::infinity());
  for (int b = 0; b < B; ++b) {
    int64_t kv_len;
    if (p.page_size == 0) {
      kv_len = p.kv_indptr[b + 1] - p.kv_indptr[b];
    } else {
      kv_len = p.kv_lens.empty() ? int64_t{p.kv_indptr[b + 1] - p.kv_indptr[b]} * p.page_size
                                 : p.kv_lens[b];
    }
    std::vector<std::vector<double>> kv;
    for (int64_t i = 0; i < kv_len; ++i) kv.push_back(NaiveToken(p, b, i));
    const int q_len = p.qo_indptr[b + 1] - p.qo_indptr[b];
    for (int t = 0; t < q_len; ++t) {
      int64_t visible = kv_len;
      if (p.causal) visible = std::max<int64_t>(0, std::min<int64_t>(kv_len, kv_len - q_len + t + 1));
      for (int h = 0; h < H; ++h) {
        const size_t row = static_cast<size_t>(p.qo_indptr[b] + t) * H + h;
        if (visible == 0) continue;
        std::vector<double> s(visible);
        for (int64_t j = 0; j < visible; ++j) {
          double dot = 0;
          for (int d = 0; d < kHeadDimQk; ++d) dot += q[row * kHeadDimQk + d] * kv[j][d];
          s[j] = p.sm_scale * dot;
        }
        const double m = *std::max_element(s.begin(), s.end());
        double sum = 0;
        for (double v : s) sum += std::exp(v - m);
        for (int d = 0; d < kHeadDimV; ++d) {
          double o = 0;
          for (int64_t j = 0; j < visible; ++j) o += std::exp(s[j] - m) / sum * kv[j][d];
          r.out[row * kHeadDimV + d] = static_cast<float>(o);
        }
        r.lse[row] = static_cast<float>(m + std::log(sum));
      }
    }
  }
  return r;
}

Result RunRef(const DecodeProblem& p, int threads = 0) {
  const size_t rows = p.q.size() / kHeadDimQk;
  // NaN first: anything the reference forgets to write shows up.
  Result r{std::vector<float>(rows * kHeadDimV, std::nanf("")), std::vector<float>(rows, std::nanf(""))};
  const absl::Status st = ReferenceDecode(p, absl::MakeSpan(r.out), absl::MakeSpan(r.lse), threads);
  EXPECT_TRUE(st.ok()) << st;
  return r;
}

// Elementwise agreement to float rounding (both sides accumulate in double).
void ExpectClose(const Result& got, const Result& want, const std::string& what) {
  ASSERT_EQ(got.out.size(), want.out.size()) << what;
  ASSERT_EQ(got.lse.size(), want.lse.size()) << what;
  for (size_t i = 0; i < want.out.size(); ++i) {
    ASSERT_FALSE(std::isnan(got.out[i])) << what << " out[" << i << "]";
    ASSERT_NEAR(got.out[i], want.out[i], 1e-6 * (1 + std::fabs(want.out[i]))) << what << " out[" << i << "]";
  }
  for (size_t i = 0; i < want.lse.size(); ++i) {
    if (std::isinf(want.lse[i])) {
      ASSERT_EQ(got.lse[i], want.lse[i]) << what << " lse[" << i << "]";
    } else {
      ASSERT_NEAR(got.lse[i], want.lse[i], 1e-6 * (1 + std::fabs(want.lse[i]))) << what << " lse[" << i << "]";
    }
  }
}

BatchConfig SmallConfig() {
  BatchConfig c;
  c.batch_size = 4;
  c.num_heads = 3;  // odd: exercises row padding
  c.q_len = 3;
  c.kv_len = 70;    // more than two 32-token tiles
  c.lengths = LengthDistribution::kUniform;
  c.seed = 5;
  return c;
}

TEST(ReferenceDecode, MatchesNaiveForEveryFormatAndQMode) {
  for (KvFormat f : {KvFormat::kBf16, KvFormat::kFp8E4m3, KvFormat::kMxfp4}) {
    for (QMode qm : {QMode::kBf16, QMode::kFp8}) {
      for (bool causal : {true, false}) {
        BatchConfig c = SmallConfig();
        c.kv_format = f;
        c.q_mode = qm;
        c.causal = causal;
        c.page_size = 16;
        const Batch batch = GenerateBatch(c);
        const std::string what = absl::StrCat(std::string(KvFormatName(f)), " q=", std::string(QModeName(qm)),
                                               " causal=", causal);
        ExpectClose(RunRef(batch.problem()), Naive(batch.problem()), what);
      }
    }
  }
}

TEST(ReferenceDecode, Fp8QModeChangesTheResult) {
  // Guards the comparison above against a q_mode that is silently ignored.
  BatchConfig c = SmallConfig();
  const Batch a = GenerateBatch(c);
  DecodeProblem p = a.problem();
  const Result bf16 = RunRef(p);
  p.q_mode = QMode::kFp8;
  const Result fp8 = RunRef(p);
  double diff = 0;
  for (size_t i = 0; i < bf16.out.size(); ++i) diff = std::max(diff, double{std::fabs(bf16.out[i] - fp8.out[i])});
  EXPECT_GT(diff, 1e-4);
}

// a8 against bf16 Q on the same fp8 KV: what quantising Q costs, which a8's
// own checks (against a reference that rounds Q the same way) cannot see.
// e4m3 keeps 3 mantissa bits, so each of Q's values moves by up to 2^-4 of
// itself (about 3.6 % rms on normal values); each score then moves by about
// that fraction of its spread (the scores of random normal inputs spread by
// sqrt(576 / 192) = 1.7), and so does the output: 3.3-3.9e-2 measured on
// these shapes, 3.5 times the fp8 paths' bar, and about what fp8 KV itself
// costs against bf16 KV of the same values (2.9-4.5e-2 on such shapes). So
// a8 is a mode with its own reference, not an approximation of a16 within
// the bar; the bound below catches a quantiser that loses more (a scale a
// binade off doubles it).
TEST(ReferenceDecode, Fp8QModeCostsWhatRoundingQToE4m3Predicts) {
  struct Shape {
    int batch, q_len, kv_len, heads;
  };
  for (const Shape s : {Shape{2, 1, 1024, 32}, Shape{1, 4, 8192, 32}, Shape{2, 1, 8192, 16},
                        Shape{1, 4, 1024, 16}, Shape{1, 1, 4096, 128}}) {
    BatchConfig c;
    c.batch_size = s.batch;
    c.q_len = s.q_len;
    c.kv_len = s.kv_len;
    c.num_heads = s.heads;
    c.seed = 11 + s.kv_len + s.heads;
    const Batch batch = GenerateBatch(c);
    DecodeProblem p = batch.problem();
    const Result a16 = RunRef(p);
    p.q_mode = QMode::kFp8;
    const Result a8 = RunRef(p);
    const Comparison cmp = CompareF32(a8.out, a16.out);
    const std::string what =
        absl::StrCat("(", s.batch, ",", s.q_len, ",", s.kv_len, ",", s.heads, ")");
    EXPECT_TRUE(cmp.Passes(5e-2)) << what << ": " << cmp.ToString();
    EXPECT_GT(cmp.rel_l2, 1e-2) << what << ": a8 rounded Q less than e4m3 does";
  }
}

// a8 scales each query row (token and head) on its own: a row multiplied by a
// power of two leaves every other row's output exactly as it was (one scale
// for the whole tensor would re-round them all), and changes its own. A row
// holding an infinity gives NaN there and nowhere else, as in a16.
TEST(ReferenceDecode, Fp8QModeScalesEachRowOnItsOwn) {
  BatchConfig c = SmallConfig();
  c.q_mode = QMode::kFp8;
  const Batch batch = GenerateBatch(c);
  DecodeProblem p = batch.problem();
  const Result base = RunRef(p);
  const size_t rows = p.q.size() / kHeadDimQk;
  constexpr size_t kRow = 4;
  std::vector<uint16_t> q(p.q.begin(), p.q.end());
  for (int d = 0; d < kHeadDimQk; ++d) {
    uint16_t& bits = q[kRow * kHeadDimQk + d];
    bits = FloatToBf16(Bf16ToFloat(bits) * 4096.0f);  // exact: a power of two, in range
  }
  p.q = q;
  const Result scaled = RunRef(p);
  double moved = 0;
  for (size_t row = 0; row < rows; ++row) {
    for (int d = 0; d < kHeadDimV; ++d) {
      const size_t i = row * kHeadDimV + d;
      ASSERT_FALSE(std::isnan(scaled.out[i])) << "row " << row << " dim " << d;
      if (row == kRow) {
        moved = std::max(moved, double{std::fabs(scaled.out[i] - base.out[i])});
      } else {
        ASSERT_EQ(scaled.out[i], base.out[i]) << "row " << row << " dim " << d;
      }
    }
  }
  EXPECT_GT(moved, 1e-3);  // the row's scores are 4096 times as large

  q[kRow * kHeadDimQk + 7] = FloatToBf16(std::numeric_limits<float>::infinity());
  p.q = q;
  const Result with_inf = RunRef(p);
  for (size_t row = 0; row < rows; ++row) {
    for (int d = 0; d < kHeadDimV; ++d) {
      const size_t i = row * kHeadDimV + d;
      if (row == kRow) {
        ASSERT_TRUE(std::isnan(with_inf.out[i])) << "dim " << d;
      } else {
        ASSERT_EQ(with_inf.out[i], scaled.out[i]) << "row " << row << " dim " << d;
      }
    }
  }
}

TEST(ReferenceDecode, CausalRowEqualsTruncatedSequence) {
  BatchConfig c;
  c.batch_size = 1;
  c.num_heads = 2;
  c.q_len = 5;
  c.kv_len = 40;
  c.kv_format = KvFormat::kBf16;
  const Batch batch = GenerateBatch(c);
  const Result full = RunRef(batch.problem());
  for (int t = 0; t < c.q_len; ++t) {
    // Row t alone, non-causal, over the first kv_len - q_len + t + 1 tokens.
    const int visible = c.kv_len - c.q_len + t + 1;
    const std::vector<int32_t> qo = {0, 1}, kvp = {0, visible};
    DecodeProblem p = batch.problem();
    p.causal = false;
    p.qo_indptr = qo;
    p.kv_indptr = kvp;
    p.q = absl::MakeConstSpan(batch.q).subspan(static_cast<size_t>(t) * c.num_heads * kHeadDimQk,
                                               static_cast<size_t>(c.num_heads) * kHeadDimQk);
    const Result row = RunRef(p);
    for (int h = 0; h < c.num_heads; ++h) {
      EXPECT_EQ(row.lse[h], full.lse[t * c.num_heads + h]) << "t=" << t;
      for (int d = 0; d < kHeadDimV; ++d) {
        ASSERT_EQ(row.out[h * kHeadDimV + d], full.out[(t * c.num_heads + h) * kHeadDimV + d]) << "t=" << t;
      }
    }
  }
  // And causal masking does change the early rows.
  DecodeProblem nc = batch.problem();
  nc.causal = false;
  const Result open = RunRef(nc);
  EXPECT_NE(open.lse[0], full.lse[0]);
  EXPECT_EQ(open.lse[(c.q_len - 1) * c.num_heads], full.lse[(c.q_len - 1) * c.num_heads]);
}

TEST(ReferenceDecode, CausalRowsWithNothingVisible) {
  // q_len 4 > kv_len 2: rows 0 and 1 see no token, rows 2 and 3 see 1 and 2.
  BatchConfig c;
  c.batch_size = 1;
  c.num_heads = 2;
  c.q_len = 4;
  c.kv_len = 2;
  const Batch batch = GenerateBatch(c);
  const Result r = RunRef(batch.problem());
  for (int row = 0; row < 4 * 2; ++row) {
    const bool empty = row / 2 < 2;
    EXPECT_EQ(std::isinf(r.lse[row]) && r.lse[row] < 0, empty) << row;
    for (int d = 0; d < kHeadDimV; ++d) {
      if (empty) {
        ASSERT_EQ(r.out[row * kHeadDimV + d], 0.0f);
      }
    }
  }
  ExpectClose(r, Naive(batch.problem()), "q_len > kv_len");
  // Row 2 sees token 0 alone: out is exactly V of token 0, lse = its score.
  const std::vector<double> k0 = NaiveToken(batch.problem(), 0, 0);
  for (int d = 0; d < kHeadDimV; ++d) EXPECT_FLOAT_EQ(r.out[4 * kHeadDimV + d], static_cast<float>(k0[d]));
}

// Lays the flat batch's tokens out in pages of page_size, pages shuffled, the
// rest (page tails and a few spare pages) filled with NaN encodings.
struct PagedCopy {
  std::vector<int32_t> kv_indptr, kv_lens, kv_indices;
  std::vector<uint8_t> kv;
};

PagedCopy Repage(const Batch& flat, int page_size, uint32_t shuffle_seed) {
  const DecodeProblem p = flat.problem();
  const int B = static_cast<int>(p.qo_indptr.size()) - 1;
  const int bpt = KvBytesPerToken(p.kv_format);
  PagedCopy out;
  out.kv_indptr.push_back(0);
  for (int b = 0; b < B; ++b) {
    const int len = p.kv_indptr[b + 1] - p.kv_indptr[b];
    out.kv_lens.push_back(len);
    out.kv_indptr.push_back(out.kv_indptr.back() + (len + page_size - 1) / page_size);
  }
  const int used = out.kv_indptr.back(), num_pages = used + 3;
  std::vector<int32_t> perm(num_pages);
  std::iota(perm.begin(), perm.end(), 0);
  uint32_t x = shuffle_seed;
  for (int i = num_pages - 1; i > 0; --i) {
    x = x * 1664525u + 1013904223u;
    std::swap(perm[i], perm[(x >> 8) % (i + 1)]);
  }
  out.kv_indices.assign(perm.begin(), perm.begin() + used);
  const uint8_t nan_byte = p.kv_format == KvFormat::kFp8E4m3 ? 0x7F : 0xFF;  // bf16 0xFFFF is NaN too
  out.kv.assign(static_cast<size_t>(num_pages) * page_size * bpt, nan_byte);
  for (int b = 0; b < B; ++b) {
    for (int i = 0; i < out.kv_lens[b]; ++i) {
      const int64_t slot = static_cast<int64_t>(out.kv_indices[out.kv_indptr[b] + i / page_size]) * page_size +
                           i % page_size;
      std::memcpy(&out.kv[slot * bpt], &p.kv[(p.kv_indptr[b] + i) * static_cast<size_t>(bpt)], bpt);
    }
  }
  return out;
}

TEST(ReferenceDecode, PagedEqualsFlatForEveryPageSize) {
  for (KvFormat f : {KvFormat::kBf16, KvFormat::kFp8E4m3, KvFormat::kMxfp4}) {
    BatchConfig c = SmallConfig();
    c.kv_format = f;
    c.batch_size = 5;
    c.kv_len = 150;
    c.num_heads = 2;
    c.q_len = 2;
    c.zero_length_fraction = 0.2;
    c.page_size = 0;
    const Batch flat = GenerateBatch(c);
    const Result want = RunRef(flat.problem());
    for (int ps : {1, 16, 32, 64, 128}) {
      const PagedCopy paged = Repage(flat, ps, 99 + ps);
      DecodeProblem p = flat.problem();
      p.page_size = ps;
      p.kv_indptr = paged.kv_indptr;
      p.kv_lens = paged.kv_lens;
      p.kv_indices = paged.kv_indices;
      p.kv = paged.kv;
      const Result got = RunRef(p);
      // Same tokens, same arithmetic: bit-identical, and no NaN from the tails.
      EXPECT_EQ(got.out, want.out) << KvFormatName(f) << " page_size " << ps;
      EXPECT_EQ(std::memcmp(got.lse.data(), want.lse.data(), want.lse.size() * 4), 0)
          << KvFormatName(f) << " page_size " << ps;
    }
  }
}

TEST(ReferenceDecode, GeneratedPagedBatchHoldsTheFlatTokens) {
  BatchConfig c = SmallConfig();
  c.kv_len = 100;
  c.page_size = 0;
  const Result flat = RunRef(GenerateBatch(c).problem());
  for (int ps : {1, 32, 128}) {
    c.page_size = ps;
    const Batch paged = GenerateBatch(c);
    const Result got = RunRef(paged.problem());
    EXPECT_EQ(got.out, flat.out) << ps;
    for (float v : got.out) ASSERT_FALSE(std::isnan(v));
  }
}

TEST(ReferenceDecode, ZeroLengthAndEmptyQuery) {
  // Sequence 1 has kv_len 0 (zeros, -inf); sequence 2 has q_len 0 (no rows).
  BatchConfig c;
  c.batch_size = 3;
  c.num_heads = 2;
  c.q_len = 2;
  c.kv_len = 20;
  c.kv_format = KvFormat::kBf16;
  const Batch batch = GenerateBatch(c);
  std::vector<int32_t> qo = {0, 2, 4, 4};  // drop sequence 2's rows
  std::vector<int32_t> kvp = {0, 20, 20, 40};  // sequence 1: no tokens
  DecodeProblem p = batch.problem();
  p.qo_indptr = qo;
  p.kv_indptr = kvp;
  p.q = absl::MakeConstSpan(batch.q).subspan(0, 4 * 2 * kHeadDimQk);
  const Result r = RunRef(p);
  for (int row = 4; row < 8; ++row) {
    EXPECT_EQ(r.lse[row], -std::numeric_limits<float>::infinity());
    for (int d = 0; d < kHeadDimV; ++d) ASSERT_EQ(r.out[row * kHeadDimV + d], 0.0f);
  }
  ExpectClose(r, Naive(p), "zero-length");
  // The first sequence is unaffected by the others.
  const std::vector<int32_t> qo1 = {0, 2}, kvp1 = {0, 20};
  DecodeProblem one = p;
  one.qo_indptr = qo1;
  one.kv_indptr = kvp1;
  one.q = p.q.subspan(0, 2 * 2 * kHeadDimQk);
  const Result r1 = RunRef(one);
  EXPECT_TRUE(std::equal(r1.out.begin(), r1.out.end(), r.out.begin()));
  // A batch of only empty queries is valid and writes nothing.
  const std::vector<int32_t> none = {0, 0};
  DecodeProblem empty = p;
  empty.qo_indptr = none;
  empty.kv_indptr = kvp1;
  empty.q = {};
  EXPECT_TRUE(ReferenceDecode(empty, {}, {}).ok());
}

TEST(ReferenceDecode, ResultDoesNotDependOnThreadCount) {
  BatchConfig c = SmallConfig();
  c.batch_size = 3;
  c.num_heads = 16;
  const Batch batch = GenerateBatch(c);
  const Result one = RunRef(batch.problem(), 1);
  for (int threads : {2, 3, 7, 0}) {
    const Result many = RunRef(batch.problem(), threads);
    EXPECT_EQ(many.out, one.out) << threads;
    EXPECT_EQ(many.lse, one.lse) << threads;
  }
}

TEST(ReferenceDecode, LseIsOptional) {
  const Batch batch = GenerateBatch(SmallConfig());
  const Result with = RunRef(batch.problem());
  std::vector<float> out(with.out.size());
  ASSERT_TRUE(ReferenceDecode(batch.problem(), absl::MakeSpan(out), {}).ok());
  EXPECT_EQ(out, with.out);
}

// ---- validation ---------------------------------------------------------------

class ValidationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BatchConfig c;
    c.batch_size = 3;
    c.num_heads = 2;
    c.q_len = 2;
    c.kv_len = 40;
    c.page_size = 16;
    batch_ = GenerateBatch(c);
    out_.resize(static_cast<size_t>(batch_.total_q()) * 2 * kHeadDimV);
    lse_.resize(static_cast<size_t>(batch_.total_q()) * 2);
  }
  // Expects kInvalidArgument naming `needle`.
  void ExpectInvalid(const DecodeProblem& p, const std::string& needle) {
    const absl::Status st = ReferenceDecode(p, absl::MakeSpan(out_), absl::MakeSpan(lse_));
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_THAT(std::string(st.message()), HasSubstr(needle));
  }
  DecodeProblem P() const { return batch_.problem(); }

  Batch batch_;
  std::vector<float> out_, lse_;
};

TEST_F(ValidationTest, GoodProblemPasses) {
  EXPECT_TRUE(ValidateProblem(P()).ok());
  EXPECT_TRUE(ReferenceDecode(P(), absl::MakeSpan(out_), absl::MakeSpan(lse_)).ok());
}

TEST_F(ValidationTest, ScalarArguments) {
  DecodeProblem p = P();
  p.num_heads = 0;
  ExpectInvalid(p, "num_heads=0");
  p.num_heads = 129;
  ExpectInvalid(p, "num_heads=129");
  p = P();
  p.sm_scale = 0;
  ExpectInvalid(p, "sm_scale=0");
  p.sm_scale = std::numeric_limits<float>::infinity();
  ExpectInvalid(p, "sm_scale=inf");
  p.sm_scale = std::nanf("");
  ExpectInvalid(p, "sm_scale=nan");
  p = P();
  p.page_size = 8;
  ExpectInvalid(p, "page_size=8");
  p = P();
  p.kv_scale = -1;
  ExpectInvalid(p, "kv_scale=-1");
  p = P();
  p.kv_format = static_cast<KvFormat>(7);
  ExpectInvalid(p, "kv_format=7");
  p = P();
  p.q_mode = static_cast<QMode>(-1);
  ExpectInvalid(p, "q_mode=-1");
  EXPECT_EQ(ReferenceDecode(P(), absl::MakeSpan(out_), absl::MakeSpan(lse_), -2).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ValidationTest, Indptrs) {
  DecodeProblem p = P();
  std::vector<int32_t> qo = batch_.qo_indptr;
  qo[0] = 1;
  p.qo_indptr = qo;
  ExpectInvalid(p, "qo_indptr[0]=1: must be 0");
  std::vector<int32_t> kvp = batch_.kv_indptr;
  kvp[2] = kvp[1] - 1;
  p = P();
  p.kv_indptr = kvp;
  ExpectInvalid(p, absl::StrCat("kv_indptr[2]=", kvp[2], " < kv_indptr[1]=", kvp[1],
                                ": must be non-decreasing"));
  p = P();
  p.kv_indptr = absl::MakeConstSpan(batch_.kv_indptr).subspan(0, 3);
  ExpectInvalid(p, "kv_indptr.size()=3");
  p = P();
  p.qo_indptr = {};
  ExpectInvalid(p, "qo_indptr.size()=0");
  // q_len 9 > 8.
  std::vector<int32_t> long_q = {0, 9, 10, 11};
  std::vector<uint16_t> q(11 * 2 * kHeadDimQk);
  p = P();
  p.qo_indptr = long_q;
  p.q = q;
  ExpectInvalid(p, "q_len must be <= 8");
}

TEST_F(ValidationTest, BufferSizes) {
  DecodeProblem p = P();
  p.q = p.q.subspan(1);
  ExpectInvalid(p, "q.size()=");
  p = P();
  std::vector<float> small(out_.size() - 1);
  absl::Status st = ReferenceDecode(p, absl::MakeSpan(small), absl::MakeSpan(lse_));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("out.size()="));
  st = ReferenceDecode(p, absl::MakeSpan(out_), absl::MakeSpan(lse_).subspan(1));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("lse.size()="));
  p.kv = p.kv.subspan(1);
  ExpectInvalid(p, "kv.size()=");
}

TEST_F(ValidationTest, PagedLayout) {
  DecodeProblem p = P();
  std::vector<int32_t> idx = batch_.kv_indices;
  const int64_t num_pages = batch_.num_kv_slots() / 16;
  idx[1] = static_cast<int32_t>(num_pages);
  p.kv_indices = idx;
  ExpectInvalid(p, absl::StrCat("kv_indices[1]=", num_pages, ": page id must be in [0, ", num_pages, ")"));
  idx[1] = -1;
  ExpectInvalid(p, "kv_indices[1]=-1");
  p = P();
  p.kv_indices = absl::MakeConstSpan(batch_.kv_indices).subspan(1);
  ExpectInvalid(p, "kv_indices.size()=");
  p = P();
  std::vector<int32_t> lens = batch_.kv_lens;
  lens[0] = 3 * 16 + 1;  // 40 tokens sit in 3 pages of 16
  p.kv_lens = lens;
  ExpectInvalid(p, "kv_lens[0]=49: must be in [0, 48]");
  lens[0] = -1;
  ExpectInvalid(p, "kv_lens[0]=-1");
  p = P();
  p.kv_lens = absl::MakeConstSpan(batch_.kv_lens).subspan(1);
  ExpectInvalid(p, "kv_lens.size()=2");
}

TEST_F(ValidationTest, FlatLayout) {
  BatchConfig c = batch_.config;
  c.page_size = 0;
  const Batch flat = GenerateBatch(c);
  DecodeProblem p = flat.problem();
  std::vector<float> out(out_.size()), lse(lse_.size());
  EXPECT_TRUE(ReferenceDecode(p, absl::MakeSpan(out), absl::MakeSpan(lse)).ok());
  p.kv_lens = flat.kv_indptr;
  ExpectInvalid(p, "kv_lens.size()=4: must be empty for the flat layout");
  p = flat.problem();
  p.kv = p.kv.subspan(0, p.kv.size() - KvBytesPerToken(p.kv_format));
  ExpectInvalid(p, absl::StrCat("kv_indptr[3]=120: kv tokens must lie in the kv buffer of 119"));
}

}  // namespace
}  // namespace reference
}  // namespace mlajit
