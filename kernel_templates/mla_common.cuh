// Device helpers shared by every MLA decode path: portable scalar types, the
// number formats (bf16, fp8 e4m3fn, e2m1, e8m0), KV addressing for flat and
// paged caches, and the row/causal geometry of a work item.
//
// Included by mla_decode.cu.in after it binds the kernel's constexpr parameters
// (NUM_HEADS, KV_FORMAT, PAGE_SIZE, ...). Uses no toolkit headers so that NVRTC
// and hiprtc compile it without include paths.
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_COMMON_CUH_
#define MLAJIT_KERNEL_TEMPLATES_MLA_COMMON_CUH_

#include "mla_f16.h"
#include "mla_params.h"

#if defined(__HIP__) || defined(__HIPCC_RTC__) || defined(__HIP_PLATFORM_AMD__)
#define MLA_HIP 1
#define MLA_INLINE __device__ inline __attribute__((always_inline))
#else
#define MLA_HIP 0
#define MLA_INLINE __device__ __forceinline__
#endif

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

constexpr int HEAD_DIM_QK = 576;
constexpr int HEAD_DIM_V = 512;
constexpr int KV_FORMAT_BF16 = 0;
constexpr int KV_FORMAT_FP8 = 1;
constexpr int KV_FORMAT_MXFP4 = 2;
constexpr int Q_MODE_BF16 = 0;
constexpr int Q_MODE_FP8 = 1;
constexpr int MXFP4_PACKED_BYTES = HEAD_DIM_QK / 2;  // 288
constexpr int MXFP4_TOKEN_BYTES = MXFP4_PACKED_BYTES + HEAD_DIM_QK / 32;  // 306
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;
constexpr float FP8_MAX = 448.0f;

// Ablations, for timing only: each removes one step, so that a timed A/B of
// it against the default (tools/bench/campaign.py, stage ablate:) says what
// the step costs. The results are wrong by design. Off unless compiled in
// through MLAJIT_KERNEL_DEFINES, which then logs a warning.
#ifndef MLA_ABLATE_ROWS_PARTIALS
#define MLA_ABLATE_ROWS_PARTIALS 0  // 64-row paths: split pieces store no partial rows
#endif
#ifndef MLA_ABLATE_MERGE
#define MLA_ABLATE_MERGE 0  // the merge kernel waits for the decode, then stops
#endif
#ifndef MLA_ABLATE_MERGE_WAIT_LAST
// the merge waits for the decode after its work instead of before it: what
// merging each item as soon as its splits are stored could take off at most
#define MLA_ABLATE_MERGE_WAIT_LAST 0
#endif
#ifndef MLA_ABLATE_MATH
// bf16 and fp8 swap-AB tiles and the bf16 64-row schedules: no products and no
// softmax, only each tile's copies, waits and barriers and the item's stores:
// what the call's data flow takes on its own
#define MLA_ABLATE_MATH 0
#endif
#ifndef MLA_ABLATE_PROXY_FENCES
#define MLA_ABLATE_PROXY_FENCES 0  // warpgroup-MMA paths: no generic-to-async proxy fence
#endif
// A probe, for timing only (its results are right): MLA_DECODE_PAD = N puts N
// dependent integer multiply-adds (16 bytes of code each) under a branch the
// decode kernel never takes, so that an A/B says what the launched kernel's
// code size costs a call (tools/bench/RESULTS.md v58, v59 found it for the
// merge kernel; v69: nothing, for the decode). From about 1200, ptxas also
// moves the live code's integer moves off the FMA pipe, which reorders it:
// compare such pads with each other. Not in the warp-specialised fp8 64-row
// kernel, whose products ptxas then serialises.
#ifndef MLA_DECODE_PAD
#define MLA_DECODE_PAD 0
#endif

template <int F>
struct KvTokenBytes {
  static constexpr int value = F == KV_FORMAT_BF16 ? 1152 : F == KV_FORMAT_FP8 ? 576 : 306;
};

MLA_INLINE float NegInf() { return __uint_as_float(0xff800000u); }

// ---- bf16 ------------------------------------------------------------------
MLA_INLINE float Bf16ToFloat(u16 b) { return __uint_as_float(static_cast<u32>(b) << 16); }

// Round to nearest even; NaN stays a quiet NaN.
MLA_INLINE u16 FloatToBf16(float f) {
  u32 u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<u16>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<u16>(u >> 16);
}

MLA_INLINE u32 PackBf16x2(float lo, float hi) {
#if !MLA_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  u32 r;  // one instruction, round to nearest even like FloatToBf16
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return static_cast<u32>(FloatToBf16(lo)) | (static_cast<u32>(FloatToBf16(hi)) << 16);
#endif
}

// ---- fp8 e4m3fn (OCP): bias 7, no infinities, S.1111.111 is NaN, max 448 ------
MLA_INLINE float Fp8E4m3ToFloat(u8 b) {
  // e4m3 placed in an fp16's exponent/mantissa fields is exactly value * 2^-8
  // for normals and subnormals alike; fp16 -> fp32 then restores the scale.
  if ((b & 0x7f) == 0x7f) return __uint_as_float(0x7fc00000u);
  const u32 mag = b & 0x7fu;
  const u32 exp = mag >> 3, man = mag & 7u;
  float v = exp == 0 ? static_cast<float>(man) * (1.0f / 512.0f)
                     : __uint_as_float(((exp + 120u) << 23) | (man << 20));
  return (b & 0x80) ? -v : v;
}

// Round to nearest even with saturation to +-448; NaN -> 0x7f.
MLA_INLINE u8 FloatToFp8E4m3(float f) {
  u32 u = __float_as_uint(f);
  const u8 sign = static_cast<u8>((u >> 24) & 0x80u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return 0x7f;
  float a = __uint_as_float(u);
  if (a >= 464.0f) return sign | 0x7e;  // 464 rounds to 512 > 448: saturate (inf too)
  if (a < 0.015625f) {                  // below 2^-6: subnormal grid of 2^-9
    float q = a * 512.0f;               // exact scaling by a power of two
    // round half to even on an integer grid
    float r = rintf(q);
    return sign | static_cast<u8>(static_cast<u32>(r));  // r == 8 is the smallest normal: code 0x08
  }
  // Normal: keep 3 mantissa bits with round to nearest even.
  u32 exp = (u >> 23) - 127 + 7;
  u32 man = u & 0x7fffffu;
  u32 keep = man >> 20, rest = man & 0xfffffu;
  if (rest > 0x80000u || (rest == 0x80000u && (keep & 1u))) ++keep;
  if (keep == 8) { keep = 0; ++exp; }
  u32 code = (exp << 3) | keep;
  if (code > 0x7e) code = 0x7e;
  return sign | static_cast<u8>(code);
}

// ---- e2m1 and e8m0 (OCP MX) -------------------------------------------------
MLA_INLINE float E2m1ToFloat(u32 nibble) {
  // Magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6: codes >= 2 are normal (1.m * 2^(e-1)).
  const u32 m = nibble & 7u;
  const float v = m == 0 ? 0.0f
                  : m == 1 ? 0.5f
                           : __uint_as_float((((m >> 1) + 126u) << 23) | ((m & 1u) << 22));
  return (nibble & 8u) ? -v : v;
}

MLA_INLINE float E8m0ToFloat(u8 e) {
  if (e == 0xff) return __uint_as_float(0x7fc00000u);
  if (e == 0) return __uint_as_float(0x00400000u);  // 2^-127 is an fp32 subnormal
  return __uint_as_float(static_cast<u32>(e) << 23);
}

// One element d (0..575) of a KV token, dequantised (fp8: the code's value; the
// per-tensor scale is applied by the caller).
template <int F>
MLA_INLINE float LoadKvElement(const u8* token, int d) {
  if (F == KV_FORMAT_BF16) {
    return Bf16ToFloat(reinterpret_cast<const u16*>(token)[d]);
  } else if (F == KV_FORMAT_FP8) {
    return Fp8E4m3ToFloat(token[d]);
  } else {
    const u32 byte = token[d >> 1];
    const u32 nib = (d & 1) ? (byte >> 4) : (byte & 15u);
    return E2m1ToFloat(nib) * E8m0ToFloat(token[MXFP4_PACKED_BYTES + (d >> 5)]);
  }
}

// ---- programmatic dependent launch ------------------------------------------
// Every entry point starts with MlaGridDependencySync() (the merge kernel
// once it has read its first plan records, mla_combine.cuh): when the host
// launched it as a programmatic dependent of the previous kernel on the
// stream, this waits until that kernel has finished and its writes are
// visible (a no-op otherwise, and before sm_90). It then lets its own
// dependents be scheduled early: they wait for it the same way.
MLA_INLINE void MlaGridDependencySync() {
#if !MLA_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// ---- geometry ----------------------------------------------------------------
// Slot of KV position j of a sequence (flat: kv_base + j; paged through the page table).
template <int PS>
MLA_INLINE long long KvSlot(const MlaDecodeParams& p, const MlaSeqInfo& s, int j) {
  if (PS == 0) return static_cast<long long>(s.kv_base) + j;
  constexpr int P = PS > 0 ? PS : 1;  // the flat case returned above
  // A page id of -1 marks a padded slot (see LoadSeq); should one appear inside
  // a live sequence, page 0 is read instead of memory before the cache.
  const int page = max(p.kv_indices[s.kv_base + j / P], 0);
  return static_cast<long long>(page) * P + (j % P);
}
// KvSlot in two steps, for callers that look several pages up before using
// any: the page id of position j (paged layouts), then j on that page.
template <int PS>
MLA_INLINE int KvPage(const MlaDecodeParams& p, const MlaSeqInfo& s, int j) {
  constexpr int P = PS > 0 ? PS : 1;
  return PS == 0 ? 0 : max(p.kv_indices[s.kv_base + j / P], 0);
}
template <int PS>
MLA_INLINE long long KvSlotOnPage(const MlaSeqInfo& s, int page, int j) {
  constexpr int P = PS > 0 ? PS : 1;
  return PS == 0 ? static_cast<long long>(s.kv_base) + j
                 : static_cast<long long>(page) * P + (j % P);
}

// The sequence of a work item (its copy of seqs[item.seq]). In a paged layout
// a sequence whose first page id is negative is a padded slot (engines pad
// captured batches with -1 page ids): it counts as empty, so it reads no KV
// and writes zeros and lse -inf.
MLA_INLINE MlaSeqInfo LoadSeq(const MlaDecodeParams& p, const MlaWorkItem& item) {
  MlaSeqInfo s = item.seq_info;
  if (PAGE_SIZE > 0 && s.kv_len > 0 && p.kv_indices[s.kv_base] < 0) s.kv_len = 0;
  return s;
}

// Number of KV positions visible to query row `row` (q position major, head
// minor) of a sequence: causal row t sees j <= kv_len - q_len + t.
template <int H, bool CAUSAL_MASK>
MLA_INLINE int VisibleKv(const MlaSeqInfo& s, int row) {
  if (row >= s.q_len * H) return 0;
  if (!CAUSAL_MASK) return s.kv_len;
  const int t = row / H;
  const int v = s.kv_len - s.q_len + t + 1;
  return v < 0 ? 0 : (v > s.kv_len ? s.kv_len : v);
}

// a8: the scale of one query row (token and head), from the largest |q| of
// its 576 values (NaN values do not count): the smallest power of two 2^e
// with amax <= 448 * 2^e (e at least -126), 1 for a row of zeros. Each row's
// codes are its values divided by its scale, so no pass over the whole tensor
// precedes the decode. A power of two keeps code times scale exact in bf16
// and f16 (the mma.sync path stores Q so) and division by it exact; the
// largest value lands in (224, 448], as amax / 448 would put it on 448: fp8
// keeps its relative precision, only the subnormal range starts a binade
// higher. (An infinite value makes the scale infinite and the row's scores
// NaN, as it makes them in a16.) src/reference/mla_reference.cc: the same.
MLA_INLINE float QScaleFromAmax(float amax) {
  if (!(amax > 0.0f)) return 1.0f;
  const u32 bits = __float_as_uint(amax);
  const int biased = static_cast<int>(bits >> 23);  // amax >= 0: no sign bit
  if (biased == 0xff) return amax;                  // infinite
  // 448 = 1.75 * 2^8: amax = m * 2^E needs 2^(E - 8) when m <= 1.75, else 2^(E - 7).
  int e = biased - 127 - 8 + ((bits & 0x7fffffu) > 0x600000u ? 1 : 0);
  e = e < -126 ? -126 : e;
  return __uint_as_float(static_cast<u32>(e + 127) << 23);
}
// 1 / the scale: exact, as the scale is a power of two from 2^-126 to 2^120
// (or infinite: 0), so that x * QInverseScale(s) rounds as x / s does (the
// reference divides) for a multiply instead of a division per element.
MLA_INLINE float QInverseScale(float q_scale) { return 1.0f / q_scale; }

// Q element as the products see it: bf16, or (a8) the fp8 code's value;
// inv_scale = QInverseScale(the row's scale).
template <int QM>
MLA_INLINE float QuantiseQ(float x, float inv_scale) {
  if (QM == Q_MODE_BF16) return x;
  return Fp8E4m3ToFloat(FloatToFp8E4m3(x * inv_scale));
}

// QuantiseQ on two elements. sm_89+ converts in hardware: cvt.rn.satfinite
// rounds to nearest even and saturates to +-448 (NaN stays NaN), exactly as
// FloatToFp8E4m3 does, so both give the same values. Besides being fewer
// instructions, it keeps unrolled Q loads small: the software rounding inlined
// per element made NVRTC take 6-10x longer on a8 kernels.
template <int QM>
MLA_INLINE void QuantiseQPair(float& lo, float& hi, float inv_scale) {
  if (QM == Q_MODE_BF16) return;
#if !MLA_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  const float a = lo * inv_scale, b = hi * inv_scale;
  u16 codes;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(codes) : "f"(b), "f"(a));
  asm("{\n.reg .b32 h2;\n.reg .f16 l, h;\n"
      "cvt.rn.f16x2.e4m3x2 h2, %2;\nmov.b32 {l, h}, h2;\n"
      "cvt.f32.f16 %0, l;\ncvt.f32.f16 %1, h;\n}\n"
      : "=f"(lo), "=f"(hi)
      : "h"(codes));
#else
  lo = QuantiseQ<QM>(lo, inv_scale);
  hi = QuantiseQ<QM>(hi, inv_scale);
#endif
}

// ---- split partials -----------------------------------------------------------
// A split piece writes its rows normalised by its own row sums and before
// kv_scale (in the units the products accumulate in); the combine kernel
// merges the pieces by LSE and applies kv_scale (MlaPartialScale). Partials
// are 16 bits, which halves the bytes that the decode's last writes and the
// combine's reads are bound by (tools/bench/RESULTS.md v20, v46). fp8 KV keeps
// them as f16: |o| <= 448 (the largest e4m3 code), far inside f16's range,
// rounded to 11 significant bits. bf16 and MXFP4 values can exceed f16's
// range, so they keep bf16's: 8 significant bits, one more rounding of the
// size the contract already gives P (DESIGN.md rounds P to bf16); on the
// accuracy bar's inputs 1.8-2.0e-3 becomes 1.9-2.4e-3 against 5e-3
// (tools/bench/partial_precision.py). Element e = (slot * BLOCK_M + row) *
// 512 + col of partial_o, 2 bytes each.
constexpr bool MLA_F16_PARTIALS = KV_FORMAT == KV_FORMAT_FP8;  // else bf16

MLA_INLINE u16 FloatToF16(float f) { return MlaF32BitsToF16(__float_as_uint(f)); }
MLA_INLINE float F16ToFloat(u16 h) {
#if !MLA_HIP && defined(__CUDA_ARCH__)
  float f;
  asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(h));
  return f;
#else
  return __uint_as_float(MlaF16ToF32Bits(h));
#endif
}
MLA_INLINE u32 PackF16x2(float lo, float hi) {
#if !MLA_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  u32 r;  // one instruction, the same rounding as FloatToF16
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return static_cast<u32>(FloatToF16(lo)) | (static_cast<u32>(FloatToF16(hi)) << 16);
#endif
}

// What the combine multiplies merged partials by.
MLA_INLINE float MlaPartialScale(const MlaDecodeParams& p) {
  return KV_FORMAT == KV_FORMAT_FP8 ? p.kv_scale : 1.0f;
}
MLA_INLINE u32 PackPartial2(float lo, float hi) {
  return MLA_F16_PARTIALS ? PackF16x2(lo, hi) : PackBf16x2(lo, hi);
}
MLA_INLINE float PartialToFloat(u16 h) {
  return MLA_F16_PARTIALS ? F16ToFloat(h) : Bf16ToFloat(h);
}
MLA_INLINE void StorePartial1(float* partial_o, long long e, float v) {
  reinterpret_cast<u16*>(partial_o)[e] = MLA_F16_PARTIALS ? FloatToF16(v) : FloatToBf16(v);
}
// e even.
MLA_INLINE void StorePartial2(float* partial_o, long long e, float a, float b) {
  *reinterpret_cast<u32*>(reinterpret_cast<u16*>(partial_o) + e) = PackPartial2(a, b);
}
// e a multiple of 4.
MLA_INLINE void StorePartial4(float* partial_o, long long e, float4 v) {
  *reinterpret_cast<uint2*>(reinterpret_cast<u16*>(partial_o) + e) =
      make_uint2(PackPartial2(v.x, v.y), PackPartial2(v.z, v.w));
}
#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_COMMON_CUH_
