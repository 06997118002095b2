// Number formats of the MLA decode path, bit-exact on the CPU: fp8 e4m3fn (OCP
// FP8), e8m0 and e2m1 (OCP MX, as MXFP4), bf16. Decoders are constexpr lookup
// tables so that the reference's inner loops stay cheap; encoders round to
// nearest even and saturate, as the quantisers on the GPU side do.
//
//   float x = Fp8E4m3ToFloat(0x38);                 // 1.0f
//   uint8_t c = FloatToFp8E4m3(1000.0f);            // 0x7E (448, saturated)
//   std::vector<uint8_t> codes(v.size());
//   float scale = QuantizeFp8PerTensor(v, absl::MakeSpan(codes));  // amax / 448
//   uint8_t token[kMxfp4TokenBytes];
//   EncodeMxfp4Token(values576, token);             // 288 packed + 18 scale bytes
#ifndef MLAJIT_SRC_REFERENCE_FORMATS_H_
#define MLAJIT_SRC_REFERENCE_FORMATS_H_

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "absl/types/span.h"
#include "src/base/mla_types.h"

namespace mlajit {
namespace reference {

inline constexpr float kFp8E4m3Max = 448.0f;
inline constexpr float kE2m1Max = 6.0f;
inline constexpr int kE2m1Emax = 2;  // exponent of the largest e2m1 value (6 = 1.5 * 2^2)
inline constexpr int kMxfp4TokenBytes = kMxfp4PackedBytes + kMxfp4ScaleBytes;  // 306

// ---- bit casts --------------------------------------------------------------

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// ---- bf16 -------------------------------------------------------------------

inline float Bf16ToFloat(uint16_t bits) { return BitsToFloat(static_cast<uint32_t>(bits) << 16); }

// Round to nearest even; NaN stays NaN (made quiet, sign kept), overflow rounds
// to +-inf as IEEE requires.
inline uint16_t FloatToBf16(float f) {
  uint32_t u = FloatBits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// ---- fp8 e4m3fn (OCP FP8) ----------------------------------------------------
// 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities; S.1111.111 is NaN;
// largest finite 448 = 1.75 * 2^8; smallest subnormal 2^-9.

namespace reference_internal {

constexpr float Pow2(int e) {
  float v = 1.0f;
  for (; e > 0; --e) v *= 2.0f;
  for (; e < 0; ++e) v *= 0.5f;
  return v;
}

struct Fp8Table {
  float v[256] = {};
  constexpr Fp8Table() {
    for (int c = 0; c < 256; ++c) {
      const int e = (c >> 3) & 0xF;
      const int m = c & 0x7;
      float mag = 0.0f;
      if (e == 0xF && m == 0x7) {
        mag = std::numeric_limits<float>::quiet_NaN();
      } else if (e == 0) {
        mag = static_cast<float>(m) * Pow2(-9);  // (m / 8) * 2^(1 - 7)
      } else {
        mag = static_cast<float>(8 + m) * Pow2(e - 10);  // (1 + m / 8) * 2^(e - 7)
      }
      v[c] = (c & 0x80) ? -mag : mag;
    }
  }
};

struct E8m0Table {
  float v[256] = {};
  constexpr E8m0Table() {
    for (int c = 0; c < 255; ++c) v[c] = Pow2(c - 127);
    v[255] = std::numeric_limits<float>::quiet_NaN();
  }
};

}  // namespace reference_internal

inline constexpr reference_internal::Fp8Table kFp8E4m3Table{};
inline constexpr reference_internal::E8m0Table kE8m0Table{};

constexpr float Fp8E4m3ToFloat(uint8_t code) { return kFp8E4m3Table.v[code]; }

// Round to nearest even, saturating: |x| >= 448 (including +-inf) gives +-448.
// NaN gives 0x7F with the sign of the input (0x7F or 0xFF).
inline uint8_t FloatToFp8E4m3(float x) {
  const uint32_t u = FloatBits(x);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | 0x7F;
  if (a >= 0x43E00000u) return sign | 0x7E;  // 448.0f
  if (a < 0x3C800000u) {                      // below 2^-6: the subnormal grid, step 2^-9
    // The sum is exact up to the final rounding, which is RNE (the default
    // rounding mode); a code of 8 is exactly the smallest normal, 0x08.
    const float scaled = BitsToFloat(a) * 512.0f + 8388608.0f;  // + 2^23
    return sign | static_cast<uint8_t>(FloatBits(scaled) - 0x4B000000u);
  }
  // Normal: keep 3 of 23 mantissa bits with RNE; a mantissa carry moves into
  // the exponent field, which is the right result. Rebias 127 -> 7.
  const uint32_t r = (a + 0x7FFFFu + ((a >> 20) & 1u)) >> 20;
  return sign | static_cast<uint8_t>(r - ((127u - 7u) << 3));
}

// Per-tensor quantiser as sglang's scaled_fp8_quant: scale = amax / 448 over the
// finite values (1 when amax is 0), codes[i] = FloatToFp8E4m3(x[i] / scale).
// Returns the scale; real value = Fp8E4m3ToFloat(code) * scale.
// codes.size() must equal x.size().
float QuantizeFp8PerTensor(absl::Span<const float> x, absl::Span<uint8_t> codes);
// The scale QuantizeFp8PerTensor would pick for this amax.
inline float Fp8ScaleForAmax(float amax) { return amax > 0 ? amax / kFp8E4m3Max : 1.0f; }

// ---- e8m0 (OCP MX shared scale) -------------------------------------------------

// 2^(code - 127); 0xFF is NaN.
constexpr float E8m0ToFloat(uint8_t code) { return kE8m0Table.v[code]; }

// ---- e2m1 (OCP MX element, 4 bits) -------------------------------------------
// 1 sign bit (bit 3), magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6; no NaN, no inf.

inline constexpr float kE2m1Magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

constexpr float E2m1ToFloat(uint8_t nibble) {
  return (nibble & 0x8) ? -kE2m1Magnitudes[nibble & 0x7] : kE2m1Magnitudes[nibble & 0x7];
}

// Round to nearest even (ties go to the code with an even mantissa bit),
// saturating to +-6. NaN encodes as +0: e2m1 has no NaN; the MXFP4 block
// quantiser marks such a block through its scale instead.
inline uint8_t FloatToE2m1(float x) {
  if (std::isnan(x)) return 0;
  const uint8_t sign = static_cast<uint8_t>((FloatBits(x) >> 28) & 0x8u);
  const float a = std::fabs(x);
  // Count the decision points below a; ">" at a tie rounds down, ">=" up, which
  // picks the even code at every midpoint (0.25->0, 0.75->1, 1.25->1, 1.75->2,
  // 2.5->2, 3.5->4, 5->4). Branch-free: the quantiser runs on every element.
  const int m = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) +
                (a >= 3.5f) + (a > 5.0f);
  return sign | static_cast<uint8_t>(m);
}

// Two e2m1 codes per byte, element 2i in the low nibble, 2i+1 in the high one.
inline uint8_t PackE2m1(uint8_t even, uint8_t odd) {
  return static_cast<uint8_t>((even & 0xF) | ((odd & 0xF) << 4));
}
inline uint8_t UnpackE2m1(uint8_t byte, int which) {
  return which == 0 ? (byte & 0xF) : (byte >> 4);
}

// ---- MXFP4 (OCP MX, block 32) -----------------------------------------------

// Quantises one block of 32 values: shared exponent X = floor(log2(amax)) - 2,
// clamped to the e8m0 range [-127, 127] (amax 0 gives -127), element codes =
// FloatToE2m1(x / 2^X) (saturating to +-6). Any NaN in the block makes the scale
// 0xFF (NaN), as the spec prescribes. Returns the e8m0 scale byte; writes 32
// codes (one per byte, low nibble) to `codes`.
uint8_t QuantizeMxfp4Block(const float* x, uint8_t* codes);

// One KV token of 576 values -> 306 bytes: 288 packed bytes (low nibble = even
// element) followed by 18 e8m0 scales.
void EncodeMxfp4Token(const float* values, uint8_t* token);
// 306 bytes -> 576 floats (code value * 2^(scale - 127)); NaN scales give NaN.
void DecodeMxfp4Token(const uint8_t* token, float* values);

}  // namespace reference
}  // namespace mlajit

#endif  // MLAJIT_SRC_REFERENCE_FORMATS_H_
