// CPU reference MLA decode; see mla_reference.h.
//
// Work is split into tasks (sequence b, group of heads); a task owns all q rows
// of its heads, so each KV tile it decodes (to double, scales applied) serves
// every one of them. Softmax runs tile by tile with a running max in double,
// which is the exact two-pass softmax up to double rounding, and needs no
// kv_len-sized score buffer for 128k-token sequences. Results are written to
// disjoint slices of out/lse, so they do not depend on the thread count.
#include "src/reference/mla_reference.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/reference/formats.h"

namespace mlajit {
namespace reference {
namespace {

constexpr int kTileTokens = 32;   // KV tokens decoded per step (147 KB of doubles)
constexpr int kMaxTaskRows = 64;  // q rows per task: bounds the q/acc scratch

absl::Status Invalid(const std::string& msg) { return absl::InvalidArgumentError(msg); }

// a8: the scale of one query row of 576 values, as the kernels take it
// (QScaleFromAmax, kernel_templates/mla_common.cuh): with amax the largest
// |q| (NaN left out), the smallest power of two 2^e, e >= -126, with amax <=
// 448 * 2^e; 1 for a row of zeros. Unlike the KV quantiser
// (QuantizeFp8PerTensor) an infinite value counts (an infinite scale), so that
// the row's scores are NaN, as they are in a16.
float QRowScale(const uint16_t* row) {
  float amax = 0.0f;
  for (int d = 0; d < kHeadDimQk; ++d) {
    const float v = Bf16ToFloat(row[d]);
    if (!std::isnan(v)) amax = std::max(amax, std::fabs(v));
  }
  if (amax == 0.0f || std::isinf(amax)) return amax == 0.0f ? 1.0f : amax;
  int exp2 = 0;
  const float m = std::frexp(amax, &exp2);  // amax = m * 2^exp2, m in [0.5, 1)
  // 448 = 0.875 * 2^9: 2^(exp2 - 9) holds amax when m <= 0.875, else 2^(exp2 - 8).
  const int e = std::max(exp2 - 9 + (m > 0.875f ? 1 : 0), -126);
  return std::ldexp(1.0f, e);
}

// 4 doubles; GCC/Clang lower it to whatever vector width the target has, so the
// products below vectorise without -ffast-math reassociation.
typedef double V4d __attribute__((vector_size(32)));

inline V4d Load4(const double* p) {
  V4d v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void Store4(double* p, V4d v) { std::memcpy(p, &v, sizeof(v)); }
inline double Sum4(V4d v) { return (v[0] + v[1]) + (v[2] + v[3]); }

// s[0..3] = <q0,k0>, <q0,k1>, <q1,k0>, <q1,k1> over 576 dims.
inline void Dot2x2(const double* q0, const double* q1, const double* k0, const double* k1,
                   double* s00, double* s01, double* s10, double* s11) {
  V4d a00 = {0, 0, 0, 0}, a01 = a00, a10 = a00, a11 = a00;
  for (int d = 0; d < kHeadDimQk; d += 4) {
    const V4d x0 = Load4(q0 + d), x1 = Load4(q1 + d);
    const V4d y0 = Load4(k0 + d), y1 = Load4(k1 + d);
    a00 += x0 * y0;
    a01 += x0 * y1;
    a10 += x1 * y0;
    a11 += x1 * y1;
  }
  *s00 = Sum4(a00);
  *s01 = Sum4(a01);
  *s10 = Sum4(a10);
  *s11 = Sum4(a11);
}

// acc[0..512) += sum_{i<n} p[i] * v[i][0..512), n <= 4.
inline void Axpy4(double* acc, const double* p, const double* const* v, int n) {
  if (n == 4) {
    const double p0 = p[0], p1 = p[1], p2 = p[2], p3 = p[3];
    for (int d = 0; d < kHeadDimV; d += 4) {
      V4d a = Load4(acc + d);
      a += p0 * Load4(v[0] + d) + p1 * Load4(v[1] + d) + p2 * Load4(v[2] + d) +
           p3 * Load4(v[3] + d);
      Store4(acc + d, a);
    }
    return;
  }
  for (int i = 0; i < n; ++i) {
    const double pi = p[i];
    for (int d = 0; d < kHeadDimV; d += 4) Store4(acc + d, Load4(acc + d) + pi * Load4(v[i] + d));
  }
}

// Lookup tables for dequantising one token to double with the tensor scale applied.
struct KvDecoder {
  KvFormat format;
  double fp8[256];      // code -> value * kv_scale
  double e2m1[256][2];  // packed byte -> (low, high) element values
  double e8m0[256];

  explicit KvDecoder(const DecodeProblem& p) : format(p.kv_format) {
    for (int c = 0; c < 256; ++c) {
      fp8[c] = static_cast<double>(Fp8E4m3ToFloat(static_cast<uint8_t>(c))) * p.kv_scale;
      e2m1[c][0] = E2m1ToFloat(static_cast<uint8_t>(c & 0xF));
      e2m1[c][1] = E2m1ToFloat(static_cast<uint8_t>(c >> 4));
      // e8m0 in double: 2^-127..2^127 times 6 stays finite, unlike in float.
      e8m0[c] = c == 0xFF ? std::numeric_limits<double>::quiet_NaN() : std::ldexp(1.0, c - 127);
    }
  }

  void Decode(const uint8_t* src, double* dst) const {
    switch (format) {
      case KvFormat::kFp8E4m3:
        for (int d = 0; d < kHeadDimQk; ++d) dst[d] = fp8[src[d]];
        break;
      case KvFormat::kBf16:
        for (int d = 0; d < kHeadDimQk; ++d) {
          uint16_t bits;
          std::memcpy(&bits, src + 2 * d, 2);
          dst[d] = Bf16ToFloat(bits);
        }
        break;
      case KvFormat::kMxfp4:
        for (int blk = 0; blk < kMxfp4ScaleBytes; ++blk) {
          const double scale = e8m0[src[kMxfp4PackedBytes + blk]];
          const uint8_t* packed = src + blk * (kMxBlock / 2);
          double* out = dst + blk * kMxBlock;
          for (int i = 0; i < kMxBlock / 2; ++i) {
            out[2 * i] = e2m1[packed[i]][0] * scale;
            out[2 * i + 1] = e2m1[packed[i]][1] * scale;
          }
        }
        break;
    }
  }
};

struct Task {
  int b;
  int h0, h1;  // heads [h0, h1)
};

// Per-thread scratch, sized once for the largest task.
struct Scratch {
  std::vector<double> q;       // [rows_pad, 576]
  std::vector<double> k;       // [kTileTokens, 576]
  std::vector<double> s;       // [rows_pad, kTileTokens]
  std::vector<double> acc;     // [rows, 512]
  std::vector<double> m, l;    // [rows]
  std::vector<int64_t> nvis;   // [rows] visible tokens
};

class Runner {
 public:
  Runner(const DecodeProblem& p, absl::Span<float> out, absl::Span<float> lse)
      : p_(p), out_(out), lse_(lse), dec_(p) {}

  void Run(const Task& t, Scratch& sc) const {
    const DecodeProblem& p = p_;
    const int H = p.num_heads;
    const int q0 = p.qo_indptr[t.b];
    const int q_len = p.qo_indptr[t.b + 1] - q0;
    const int nh = t.h1 - t.h0;
    const int rows = q_len * nh;
    const int rows_pad = (rows + 1) & ~1;
    const int64_t kv_len = KvLen(p, t.b);
    const double sm_scale = p.sm_scale;

    // Row r = (t_row, head): q rows in double, fp8 Q mode rounded through fp8.
    int64_t n_max = 0;
    for (int r = 0; r < rows_pad; ++r) {
      double* dst = &sc.q[static_cast<size_t>(r) * kHeadDimQk];
      if (r >= rows) {
        std::fill(dst, dst + kHeadDimQk, 0.0);
        continue;
      }
      const int tr = r / nh, h = t.h0 + r % nh;
      const uint16_t* src = &p.q[(static_cast<size_t>(q0 + tr) * H + h) * kHeadDimQk];
      const float q_scale = p.q_mode == QMode::kFp8 ? QRowScale(src) : 1.0f;
      for (int d = 0; d < kHeadDimQk; ++d) {
        const float x = Bf16ToFloat(src[d]);
        dst[d] = p.q_mode == QMode::kFp8
                     ? static_cast<double>(Fp8E4m3ToFloat(FloatToFp8E4m3(x / q_scale))) * q_scale
                     : x;
      }
      const int64_t n = p.causal ? std::clamp<int64_t>(kv_len - q_len + tr + 1, 0, kv_len) : kv_len;
      sc.nvis[r] = n;
      n_max = std::max(n_max, n);
      sc.m[r] = -std::numeric_limits<double>::infinity();
      sc.l[r] = 0.0;
      std::fill(&sc.acc[static_cast<size_t>(r) * kHeadDimV],
                &sc.acc[static_cast<size_t>(r + 1) * kHeadDimV], 0.0);
    }

    for (int64_t j0 = 0; j0 < n_max; j0 += kTileTokens) {
      const int jt = static_cast<int>(std::min<int64_t>(kTileTokens, n_max - j0));
      const int jt_pad = (jt + 1) & ~1;
      for (int j = 0; j < jt; ++j) {
        dec_.Decode(TokenBytes(t.b, j0 + j), &sc.k[static_cast<size_t>(j) * kHeadDimQk]);
      }
      // A padding token of zeros keeps the 2x2 kernel free of remainders; its
      // score is never read.
      if (jt_pad != jt) {
        std::fill(&sc.k[static_cast<size_t>(jt) * kHeadDimQk],
                  &sc.k[static_cast<size_t>(jt + 1) * kHeadDimQk], 0.0);
      }
      for (int r = 0; r < rows_pad; r += 2) {
        const double* qa = &sc.q[static_cast<size_t>(r) * kHeadDimQk];
        const double* qb = qa + kHeadDimQk;
        double* sa = &sc.s[static_cast<size_t>(r) * kTileTokens];
        double* sb = sa + kTileTokens;
        for (int j = 0; j < jt_pad; j += 2) {
          const double* ka = &sc.k[static_cast<size_t>(j) * kHeadDimQk];
          Dot2x2(qa, qb, ka, ka + kHeadDimQk, &sa[j], &sa[j + 1], &sb[j], &sb[j + 1]);
        }
      }
      for (int r = 0; r < rows; ++r) {
        const int nv = static_cast<int>(std::clamp<int64_t>(sc.nvis[r] - j0, 0, jt));
        if (nv == 0) continue;
        double* s = &sc.s[static_cast<size_t>(r) * kTileTokens];
        double tmax = -std::numeric_limits<double>::infinity();
        for (int j = 0; j < nv; ++j) {
          s[j] *= sm_scale;
          tmax = std::max(tmax, s[j]);
        }
        double* acc = &sc.acc[static_cast<size_t>(r) * kHeadDimV];
        const double m_new = std::max(sc.m[r], tmax);
        if (m_new > sc.m[r] && sc.m[r] != -std::numeric_limits<double>::infinity()) {
          const double c = std::exp(sc.m[r] - m_new);
          sc.l[r] *= c;
          for (int d = 0; d < kHeadDimV; ++d) acc[d] *= c;
        }
        sc.m[r] = m_new;
        double lsum = 0.0;
        for (int j = 0; j < nv; ++j) {
          s[j] = std::exp(s[j] - m_new);  // s now holds p
          lsum += s[j];
        }
        sc.l[r] += lsum;
        for (int j = 0; j < nv; j += 4) {
          const double* v[4];
          const int n = std::min(4, nv - j);
          for (int i = 0; i < n; ++i) v[i] = &sc.k[static_cast<size_t>(j + i) * kHeadDimQk];
          Axpy4(acc, s + j, v, n);
        }
      }
    }

    for (int r = 0; r < rows; ++r) {
      const int tr = r / nh, h = t.h0 + r % nh;
      const size_t row = static_cast<size_t>(q0 + tr) * H + h;
      float* o = &out_[row * kHeadDimV];
      const double* acc = &sc.acc[static_cast<size_t>(r) * kHeadDimV];
      if (sc.nvis[r] == 0) {
        std::fill(o, o + kHeadDimV, 0.0f);
        if (!lse_.empty()) lse_[row] = -std::numeric_limits<float>::infinity();
        continue;
      }
      const double inv = 1.0 / sc.l[r];
      for (int d = 0; d < kHeadDimV; ++d) o[d] = static_cast<float>(acc[d] * inv);
      if (!lse_.empty()) lse_[row] = static_cast<float>(sc.m[r] + std::log(sc.l[r]));
    }
  }

 private:
  const uint8_t* TokenBytes(int b, int64_t i) const {
    int64_t slot;
    if (p_.page_size == 0) {
      slot = p_.kv_indptr[b] + i;
    } else {
      const int64_t page = p_.kv_indices[p_.kv_indptr[b] + i / p_.page_size];
      slot = page * p_.page_size + i % p_.page_size;
    }
    return &p_.kv[static_cast<size_t>(slot) * KvBytesPerToken(p_.kv_format)];
  }

  const DecodeProblem& p_;
  absl::Span<float> out_, lse_;
  KvDecoder dec_;
};

}  // namespace

int NumSequences(const DecodeProblem& p) {
  return p.qo_indptr.empty() ? 0 : static_cast<int>(p.qo_indptr.size()) - 1;
}

int64_t KvLen(const DecodeProblem& p, int b) {
  if (p.page_size == 0) return static_cast<int64_t>(p.kv_indptr[b + 1]) - p.kv_indptr[b];
  if (!p.kv_lens.empty()) return p.kv_lens[b];
  return (static_cast<int64_t>(p.kv_indptr[b + 1]) - p.kv_indptr[b]) * p.page_size;
}

absl::Status ValidateProblem(const DecodeProblem& p, int64_t out_size, int64_t lse_size) {
  if (p.num_heads < 1 || p.num_heads > kMaxHeads) {
    return Invalid(absl::StrCat("num_heads=", p.num_heads, ": must be in [1, ", kMaxHeads, "]"));
  }
  if (!IsValidKvFormat(static_cast<int32_t>(p.kv_format))) {
    return Invalid(absl::StrCat("kv_format=", static_cast<int32_t>(p.kv_format),
                                ": must be 0 (bf16), 1 (fp8_e4m3) or 2 (mxfp4)"));
  }
  if (!IsValidQMode(static_cast<int32_t>(p.q_mode))) {
    return Invalid(absl::StrCat("q_mode=", static_cast<int32_t>(p.q_mode),
                                ": must be 0 (bf16) or 1 (fp8)"));
  }
  if (!(p.sm_scale > 0) || !std::isfinite(p.sm_scale)) {
    return Invalid(absl::StrCat("sm_scale=", p.sm_scale, ": must be finite and > 0"));
  }
  if (!IsValidPageSize(p.page_size)) {
    return Invalid(absl::StrCat("page_size=", p.page_size,
                                ": must be 0 (flat) or one of 1, 16, 32, 64, 128"));
  }
  if (p.kv_format == KvFormat::kFp8E4m3 && (!(p.kv_scale > 0) || !std::isfinite(p.kv_scale))) {
    return Invalid(absl::StrCat("kv_scale=", p.kv_scale, ": must be finite and > 0 for fp8 KV"));
  }
  if (p.qo_indptr.empty()) {
    return Invalid("qo_indptr.size()=0: must hold B+1 >= 1 entries");
  }
  const int B = NumSequences(p);
  if (p.kv_indptr.size() != p.qo_indptr.size()) {
    return Invalid(absl::StrCat("kv_indptr.size()=", p.kv_indptr.size(),
                                ": must equal qo_indptr.size()=", p.qo_indptr.size(), " (B+1)"));
  }
  for (const auto& [name, ptr] : {std::pair<const char*, absl::Span<const int32_t>>{"qo_indptr", p.qo_indptr},
                                  {"kv_indptr", p.kv_indptr}}) {
    if (ptr[0] != 0) return Invalid(absl::StrCat(name, "[0]=", ptr[0], ": must be 0"));
    for (int b = 0; b < B; ++b) {
      if (ptr[b + 1] < ptr[b]) {
        return Invalid(absl::StrCat(name, "[", b + 1, "]=", ptr[b + 1], " < ", name, "[", b,
                                    "]=", ptr[b], ": must be non-decreasing"));
      }
    }
  }
  for (int b = 0; b < B; ++b) {
    const int q_len = p.qo_indptr[b + 1] - p.qo_indptr[b];
    if (q_len > kMaxQLen) {
      return Invalid(absl::StrCat("qo_indptr[", b + 1, "]-qo_indptr[", b, "]=", q_len,
                                  ": q_len must be <= ", kMaxQLen));
    }
  }
  const int64_t total_q = p.qo_indptr[B];
  const int64_t rows = total_q * p.num_heads;
  if (static_cast<int64_t>(p.q.size()) != rows * kHeadDimQk) {
    return Invalid(absl::StrCat("q.size()=", p.q.size(), ": must be total_q*num_heads*576=",
                                total_q, "*", p.num_heads, "*576=", rows * kHeadDimQk));
  }
  if (out_size >= 0 && out_size != rows * kHeadDimV) {
    return Invalid(absl::StrCat("out.size()=", out_size, ": must be total_q*num_heads*512=",
                                rows * kHeadDimV));
  }
  if (lse_size > 0 && lse_size != rows) {
    return Invalid(absl::StrCat("lse.size()=", lse_size,
                                ": must be 0 or total_q*num_heads=", rows));
  }
  const int bytes_per_token = KvBytesPerToken(p.kv_format);
  if (p.kv.size() % bytes_per_token != 0) {
    return Invalid(absl::StrCat("kv.size()=", p.kv.size(), ": must be a multiple of ",
                                bytes_per_token, " bytes per ", std::string(KvFormatName(p.kv_format)),
                                " token"));
  }
  const int64_t num_slots = static_cast<int64_t>(p.kv.size()) / bytes_per_token;
  const int64_t kv_end = p.kv_indptr[B];
  if (p.page_size == 0) {
    if (!p.kv_lens.empty()) {
      return Invalid(absl::StrCat("kv_lens.size()=", p.kv_lens.size(),
                                  ": must be empty for the flat layout (page_size=0)"));
    }
    if (!p.kv_indices.empty()) {
      return Invalid(absl::StrCat("kv_indices.size()=", p.kv_indices.size(),
                                  ": must be empty for the flat layout (page_size=0)"));
    }
    if (kv_end > num_slots) {
      return Invalid(absl::StrCat("kv_indptr[", B, "]=", kv_end,
                                  ": kv tokens must lie in the kv buffer of ", num_slots,
                                  " tokens"));
    }
    return absl::OkStatus();
  }
  if (static_cast<int64_t>(p.kv_indices.size()) < kv_end) {
    return Invalid(absl::StrCat("kv_indices.size()=", p.kv_indices.size(), ": must be >= kv_indptr[",
                                B, "]=", kv_end));
  }
  const int64_t num_pages = num_slots / p.page_size;
  for (int64_t i = 0; i < kv_end; ++i) {
    const int32_t page = p.kv_indices[i];
    if (page < 0 || page >= num_pages) {
      return Invalid(absl::StrCat("kv_indices[", i, "]=", page, ": page id must be in [0, ",
                                  num_pages, ") (kv holds ", num_slots, " slots of page_size ",
                                  p.page_size, ")"));
    }
  }
  if (!p.kv_lens.empty()) {
    if (static_cast<int>(p.kv_lens.size()) != B) {
      return Invalid(absl::StrCat("kv_lens.size()=", p.kv_lens.size(), ": must be 0 or B=", B));
    }
    for (int b = 0; b < B; ++b) {
      const int64_t cap = (static_cast<int64_t>(p.kv_indptr[b + 1]) - p.kv_indptr[b]) * p.page_size;
      if (p.kv_lens[b] < 0 || p.kv_lens[b] > cap) {
        return Invalid(absl::StrCat("kv_lens[", b, "]=", p.kv_lens[b], ": must be in [0, ", cap,
                                    "] (", cap / p.page_size, " pages of ", p.page_size, ")"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ReferenceDecode(const DecodeProblem& p, absl::Span<float> out, absl::Span<float> lse,
                             int num_threads) {
  if (num_threads < 0) {
    return Invalid(absl::StrCat("num_threads=", num_threads, ": must be >= 0 (0 = all cores)"));
  }
  if (auto st = ValidateProblem(p, static_cast<int64_t>(out.size()), static_cast<int64_t>(lse.size()));
      !st.ok()) {
    return st;
  }
  const int B = NumSequences(p);
  // Head groups: enough tasks to keep every thread busy on small batches, but a
  // whole sequence's heads per task when possible so a KV tile is decoded once.
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const int threads = num_threads == 0 ? static_cast<int>(hw) : num_threads;
  int active = 0, max_q_len = 0;
  for (int b = 0; b < B; ++b) {
    const int q_len = p.qo_indptr[b + 1] - p.qo_indptr[b];
    if (q_len > 0) ++active;
    max_q_len = std::max(max_q_len, q_len);
  }
  if (active == 0) return absl::OkStatus();
  const int want_groups = (2 * threads + active - 1) / active;
  int group_heads = (p.num_heads + want_groups - 1) / want_groups;
  group_heads = std::min(group_heads, std::max(1, kMaxTaskRows / max_q_len));
  group_heads = std::clamp(group_heads, 1, p.num_heads);

  std::vector<Task> tasks;
  for (int b = 0; b < B; ++b) {
    if (p.qo_indptr[b + 1] == p.qo_indptr[b]) continue;
    for (int h = 0; h < p.num_heads; h += group_heads) {
      tasks.push_back({b, h, std::min(p.num_heads, h + group_heads)});
    }
  }
  // Long sequences first, so that a skewed batch does not end on one straggler.
  std::stable_sort(tasks.begin(), tasks.end(),
                   [&](const Task& a, const Task& b) { return KvLen(p, a.b) > KvLen(p, b.b); });

  Runner runner(p, out, lse);
  const int rows_cap = max_q_len * group_heads + 1;
  std::atomic<size_t> next{0};
  auto worker = [&] {
    Scratch sc;
    sc.q.resize(static_cast<size_t>(rows_cap) * kHeadDimQk);
    sc.k.resize(static_cast<size_t>(kTileTokens) * kHeadDimQk);
    sc.s.resize(static_cast<size_t>(rows_cap) * kTileTokens);
    sc.acc.resize(static_cast<size_t>(rows_cap) * kHeadDimV);
    sc.m.resize(rows_cap);
    sc.l.resize(rows_cap);
    sc.nvis.resize(rows_cap);
    for (size_t i; (i = next.fetch_add(1)) < tasks.size();) runner.Run(tasks[i], sc);
  };
  const int n_threads = std::min<int>(threads, static_cast<int>(tasks.size()));
  std::vector<std::thread> pool;
  for (int i = 1; i < n_threads; ++i) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
  return absl::OkStatus();
}

}  // namespace reference
}  // namespace mlajit
