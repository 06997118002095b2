// Deterministic batch generator; see batch_generator.h.
//
// Every random value is a pure function of (seed, stream, index): a counter-based
// draw (SplitMix64 of the counter) fed to Box-Muller. That makes generation
// trivially parallel with results independent of the thread count, and lets the
// fp8 path find the tensor's amax in a cheap first pass before encoding.
#include "src/reference/batch_generator.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <numeric>
#include <thread>

#include "src/reference/formats.h"

namespace mlajit {
namespace reference {
namespace reference_internal {

uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

// Uniform in (0, 1) from the high 32 bits: never 0, so the log is finite.
inline double HighUniform(uint64_t bits) {
  return (static_cast<double>(static_cast<int64_t>(bits >> 32)) + 0.5) * 0x1p-32;
}

// -2 ln(u) for u in (0, 1). Own polynomial rather than std::log: libm results
// differ by an ulp between implementations, and this must not. Operations are
// plain IEEE double arithmetic in a fixed order; error ~1e-13, far below the
// float the result is rounded to.
inline double MinusTwoLog(double u) {
  uint64_t bits;
  std::memcpy(&bits, &u, sizeof(bits));
  int e = static_cast<int>((bits >> 52) & 0x7FF) - 1023;
  const uint64_t mant_bits = (bits & 0xFFFFFFFFFFFFFull) | 0x3FF0000000000000ull;
  double m;  // u = m * 2^e, m in [sqrt(1/2), sqrt(2))
  std::memcpy(&m, &mant_bits, sizeof(m));
  const bool high = m > 1.4142135623730951;
  m = high ? m * 0.5 : m;
  e += high;
  // ln m = 2 atanh(t), t = (m - 1) / (m + 1), |t| < 0.172.
  const double t = (m - 1.0) / (m + 1.0), t2 = t * t;
  double p = 1.0 / 13;
  p = p * t2 + 1.0 / 11;
  p = p * t2 + 1.0 / 9;
  p = p * t2 + 1.0 / 7;
  p = p * t2 + 1.0 / 5;
  p = p * t2 + 1.0 / 3;
  p = p * t2 + 1.0;
  return -2.0 * (2.0 * t * p + e * 0.6931471805599453);
}

// cos and sin of 2 pi (ubits + 0.5) / 2^32, by the same reasoning as
// MinusTwoLog: reduce exactly to the nearest quarter turn k, evaluate Taylor
// polynomials on [-pi/4, pi/4] (error < 1e-11), rotate by k quarter turns.
// Branch-free: the quadrant is random, and mispredictions would dominate.
inline void CosSin2Pi(uint32_t ubits, double* c, double* s) {
  const uint32_t k = ((ubits >> 29) + 1) >> 1;  // 0..4; 4 wraps to 0
  const double f = (static_cast<double>(static_cast<int64_t>(ubits)) + 0.5 - k * 0x1p30) * 0x1p-32;
  const double x = 6.283185307179586 * f, x2 = x * x;
  double sp = -1.0 / 39916800;
  sp = sp * x2 + 1.0 / 362880;
  sp = sp * x2 - 1.0 / 5040;
  sp = sp * x2 + 1.0 / 120;
  sp = sp * x2 - 1.0 / 6;
  sp = sp * x2 + 1.0;
  const double sn = x * sp;
  double cs = 1.0 / 479001600;
  cs = cs * x2 - 1.0 / 3628800;
  cs = cs * x2 + 1.0 / 40320;
  cs = cs * x2 - 1.0 / 720;
  cs = cs * x2 + 1.0 / 24;
  cs = cs * x2 - 0.5;
  cs = cs * x2 + 1.0;
  const bool odd = (k & 1) != 0;  // (c, s) -> (-s, c) per quarter turn
  const double a = odd ? sn : cs, b = odd ? cs : sn;
  *c = ((k + 1) & 2) ? -a : a;
  *s = (k & 2) ? -b : b;
}

}  // namespace

// Box-Muller on one 64-bit draw: radius from the high half, angle from the low.
void NormalPair(uint64_t bits, float* a, float* b) {
  const double r = std::sqrt(MinusTwoLog(HighUniform(bits)));
  double c, s;
  CosSin2Pi(static_cast<uint32_t>(bits), &c, &s);
  *a = static_cast<float>(r * c);
  *b = static_cast<float>(r * s);
}

uint64_t Draw(uint64_t key, uint64_t counter) { return Mix64(key + (counter + 1) * kGolden); }

float NormalAt(uint64_t key, uint64_t index) {
  float a, b;
  NormalPair(Draw(key, index / 2), &a, &b);
  return index % 2 == 0 ? a : b;
}

}  // namespace reference_internal

namespace {

using reference_internal::Draw;
using reference_internal::Mix64;
using reference_internal::NormalPair;

// Stream keys: one per kind of value, derived from the seed.
uint64_t StreamKey(uint64_t seed, uint64_t stream) { return Mix64(Mix64(seed) ^ (stream * 0xD6E8FEB86659FD93ull)); }
constexpr uint64_t kStreamLayout = 1, kStreamQ = 2, kStreamKv = 3;

// Sequential generator for the layout (lengths, page permutation).
class LayoutRng {
 public:
  explicit LayoutRng(uint64_t key) : key_(key) {}
  uint64_t Next() { return Draw(key_, counter_++); }
  // Uniform in [0, n), n >= 1 (multiply-shift: no division, bias < n / 2^64).
  uint64_t Below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }

 private:
  uint64_t key_;
  uint64_t counter_ = 0;
};

// Runs fn(begin, end) over [0, n) in contiguous chunks on up to all cores.
template <typename Fn>
void ParallelChunks(int64_t n, int64_t min_chunk, Fn fn) {
  const int64_t hw = std::max(1u, std::thread::hardware_concurrency());
  const int64_t parts = std::clamp<int64_t>(n / std::max<int64_t>(1, min_chunk), 1, hw);
  if (parts <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  for (int64_t i = 1; i < parts; ++i) pool.emplace_back(fn, n * i / parts, n * (i + 1) / parts);
  fn(int64_t{0}, n / parts);
  for (auto& t : pool) t.join();
}

BatchConfig Sanitize(BatchConfig c) {
  c.batch_size = std::max(0, c.batch_size);
  c.num_heads = std::clamp(c.num_heads, 1, kMaxHeads);
  c.q_len = std::clamp(c.q_len, 0, kMaxQLen);
  c.kv_len = std::max(0, c.kv_len);
  if (!(c.zero_length_fraction >= 0)) c.zero_length_fraction = 0;
  c.zero_length_fraction = std::min(1.0, c.zero_length_fraction);
  if (!IsValidPageSize(c.page_size)) c.page_size = c.page_size <= 0 ? 0 : 128;
  if (!IsValidKvFormat(static_cast<int32_t>(c.kv_format))) c.kv_format = KvFormat::kFp8E4m3;
  if (!IsValidQMode(static_cast<int32_t>(c.q_mode))) c.q_mode = QMode::kBf16;
  return c;
}

std::vector<int32_t> SequenceLengths(const BatchConfig& c, LayoutRng& rng) {
  const int B = c.batch_size;
  std::vector<int32_t> lens(B, c.kv_len);
  if (c.kv_len > 0 && c.lengths == LengthDistribution::kUniform) {
    for (auto& l : lens) l = 1 + static_cast<int32_t>(rng.Below(c.kv_len));
  } else if (c.kv_len > 0 && c.lengths == LengthDistribution::kSkewed && B > 0) {
    const int32_t short_max = std::max(1, c.kv_len / 16);
    for (auto& l : lens) l = 1 + static_cast<int32_t>(rng.Below(short_max));
    lens[rng.Below(B)] = c.kv_len;
  }
  const int zeros = static_cast<int>(std::lround(c.zero_length_fraction * B));
  if (zeros > 0) {
    // Partial Fisher-Yates: the first `zeros` entries are a random subset.
    std::vector<int> idx(B);
    std::iota(idx.begin(), idx.end(), 0);
    for (int i = 0; i < zeros; ++i) {
      std::swap(idx[i], idx[i + rng.Below(B - i)]);
      lens[idx[i]] = 0;
    }
  }
  return lens;
}

void FillNan(KvFormat f, uint8_t* dst, size_t bytes) {
  if (f == KvFormat::kBf16) {
    const uint8_t nan[2] = {0xC0, 0x7F};  // 0x7FC0 little-endian
    for (size_t i = 0; i + 1 < bytes; i += 2) std::memcpy(dst + i, nan, 2);
  } else {
    // fp8: 0x7F is NaN. MXFP4: scale 0xFF is NaN (and packed 0xFF = -6, -6).
    std::memset(dst, f == KvFormat::kFp8E4m3 ? 0x7F : 0xFF, bytes);
  }
}

}  // namespace

int64_t Batch::num_kv_slots() const {
  return static_cast<int64_t>(kv.size()) / KvBytesPerToken(config.kv_format);
}

int64_t Batch::kv_len(int b) const {
  if (config.page_size != 0) return kv_lens[b];
  return static_cast<int64_t>(kv_indptr[b + 1]) - kv_indptr[b];
}

DecodeProblem Batch::problem() const {
  DecodeProblem p;
  p.num_heads = config.num_heads;
  p.kv_format = config.kv_format;
  p.q_mode = config.q_mode;
  p.causal = config.causal;
  p.sm_scale = sm_scale;
  p.page_size = config.page_size;
  p.qo_indptr = qo_indptr;
  p.kv_indptr = kv_indptr;
  p.kv_lens = kv_lens;
  p.kv_indices = kv_indices;
  p.q = q;
  p.kv = kv;
  p.kv_scale = kv_scale;
  return p;
}

namespace {

// The indptrs (and, paged, kv_lens) of sequences of these lengths.
BatchLayout LayoutOf(const BatchConfig& c, const std::vector<int32_t>& lens) {
  const int B = c.batch_size;
  BatchLayout l;
  l.qo_indptr.resize(B + 1, 0);
  l.kv_indptr.resize(B + 1, 0);
  for (int b = 0; b < B; ++b) {
    l.qo_indptr[b + 1] = l.qo_indptr[b] + c.q_len;
    l.kv_indptr[b + 1] =
        l.kv_indptr[b] + (c.page_size == 0 ? lens[b] : (lens[b] + c.page_size - 1) / c.page_size);
  }
  if (c.page_size != 0) l.kv_lens = lens;
  return l;
}

}  // namespace

BatchLayout GenerateLayout(const BatchConfig& config) {
  const BatchConfig c = Sanitize(config);
  LayoutRng rng(StreamKey(c.seed, kStreamLayout));
  return LayoutOf(c, SequenceLengths(c, rng));
}

Batch GenerateBatch(const BatchConfig& config) {
  Batch batch;
  const BatchConfig c = Sanitize(config);
  batch.config = c;
  batch.sm_scale = static_cast<float>(1.0 / std::sqrt(192.0));
  const int B = c.batch_size;
  // The layout stream draws the lengths, then (paged) the page permutation.
  LayoutRng rng(StreamKey(c.seed, kStreamLayout));
  const std::vector<int32_t> lens = SequenceLengths(c, rng);
  BatchLayout layout = LayoutOf(c, lens);
  batch.qo_indptr = std::move(layout.qo_indptr);
  batch.kv_indptr = std::move(layout.kv_indptr);
  batch.kv_lens = std::move(layout.kv_lens);

  // Logical token g of the concatenated sequences -> its slot.
  std::vector<int64_t> token_start(B + 1, 0);
  for (int b = 0; b < B; ++b) token_start[b + 1] = token_start[b] + lens[b];
  const int64_t total_tokens = token_start[B];
  int64_t num_slots = total_tokens;
  if (c.page_size != 0) {
    const int ps = c.page_size;
    const int32_t used_pages = batch.kv_indptr[B];
    // Spare pages that no sequence references: NaN-filled, never to be read.
    const int32_t num_pages = used_pages + used_pages / 8 + 1;
    std::vector<int32_t> perm(num_pages);
    std::iota(perm.begin(), perm.end(), 0);
    if (c.shuffle_pages) {
      for (int32_t i = num_pages - 1; i > 0; --i) std::swap(perm[i], perm[rng.Below(i + 1)]);
    }
    batch.kv_indices.assign(perm.begin(), perm.begin() + used_pages);
    num_slots = static_cast<int64_t>(num_pages) * ps;
  }
  const int bytes_per_token = KvBytesPerToken(c.kv_format);
  batch.kv.resize(static_cast<size_t>(num_slots) * bytes_per_token);
  if (c.page_size != 0) FillNan(c.kv_format, batch.kv.data(), batch.kv.size());

  auto slot_of = [&](int b, int64_t i) -> int64_t {
    if (c.page_size == 0) return token_start[b] + i;
    return static_cast<int64_t>(batch.kv_indices[batch.kv_indptr[b] + i / c.page_size]) * c.page_size +
           i % c.page_size;
  };
  // Sequence of logical token g (token_start is sorted).
  auto seq_of = [&](int64_t g) {
    return static_cast<int>(std::upper_bound(token_start.begin(), token_start.end(), g) -
                            token_start.begin()) - 1;
  };

  const uint64_t kv_key = StreamKey(c.seed, kStreamKv);
  constexpr int64_t kPairsPerToken = kHeadDimQk / 2;
  if (c.kv_format == KvFormat::kFp8E4m3) {
    // amax pass: |x| <= r for both values of a pair, so only draws with
    // r > amax, i.e. u1 < exp(-amax^2 / 2), need the full Box-Muller. The
    // margin covers libm rounding; the pair itself decides.
    std::vector<float> part_amax(std::max(1u, std::thread::hardware_concurrency()) + 1, 0.0f);
    std::atomic<int> part{0};
    ParallelChunks(total_tokens * kPairsPerToken, 1 << 16, [&](int64_t begin, int64_t end) {
      float amax = 0.0f;
      double threshold = 1.0;
      for (int64_t i = begin; i < end; ++i) {
        const uint64_t bits = Draw(kv_key, i);
        if (reference_internal::HighUniform(bits) >= threshold) continue;
        float a, b;
        NormalPair(bits, &a, &b);
        const float m = std::max(std::fabs(a), std::fabs(b));
        if (m > amax) {
          amax = m;
          threshold = std::exp(-0.5 * static_cast<double>(amax) * amax * (1.0 - 1e-6));
        }
      }
      part_amax[part.fetch_add(1)] = amax;
    });
    batch.kv_scale = Fp8ScaleForAmax(*std::max_element(part_amax.begin(), part_amax.end()));
  }

  const float kv_scale = batch.kv_scale;
  ParallelChunks(total_tokens, 256, [&](int64_t begin, int64_t end) {
    float values[kHeadDimQk];
    int b = begin < end ? seq_of(begin) : 0;
    for (int64_t g = begin; g < end; ++g) {
      while (g >= token_start[b + 1]) ++b;
      for (int64_t k = 0; k < kPairsPerToken; ++k) {
        NormalPair(Draw(kv_key, g * kPairsPerToken + k), &values[2 * k], &values[2 * k + 1]);
      }
      uint8_t* dst = &batch.kv[static_cast<size_t>(slot_of(b, g - token_start[b])) * bytes_per_token];
      switch (c.kv_format) {
        case KvFormat::kFp8E4m3:
          for (int d = 0; d < kHeadDimQk; ++d) dst[d] = FloatToFp8E4m3(values[d] / kv_scale);
          break;
        case KvFormat::kBf16:
          for (int d = 0; d < kHeadDimQk; ++d) {
            const uint16_t bits = FloatToBf16(values[d]);
            std::memcpy(dst + 2 * d, &bits, 2);
          }
          break;
        case KvFormat::kMxfp4:
          EncodeMxfp4Token(values, dst);
          break;
      }
    }
  });

  const uint64_t q_key = StreamKey(c.seed, kStreamQ);
  const int64_t q_elems = static_cast<int64_t>(batch.total_q()) * c.num_heads * kHeadDimQk;
  batch.q.resize(q_elems);
  ParallelChunks(q_elems / 2, 1 << 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float a, b;
      NormalPair(Draw(q_key, i), &a, &b);
      batch.q[2 * i] = FloatToBf16(a);
      batch.q[2 * i + 1] = FloatToBf16(b);
    }
  });
  return batch;
}

}  // namespace reference
}  // namespace mlajit
