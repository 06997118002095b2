// Number formats; see formats.h.
#include "src/reference/formats.h"

#include <algorithm>
#include <cmath>

namespace mlajit {
namespace reference {

float QuantizeFp8PerTensor(absl::Span<const float> x, absl::Span<uint8_t> codes) {
  float amax = 0.0f;
  for (float v : x) {
    // Only finite values set the scale: an inf would make every other value 0,
    // and it saturates to +-448 below anyway.
    if (std::isfinite(v)) amax = std::max(amax, std::fabs(v));
  }
  const float scale = Fp8ScaleForAmax(amax);
  const size_t n = std::min(x.size(), codes.size());
  for (size_t i = 0; i < n; ++i) codes[i] = FloatToFp8E4m3(x[i] / scale);
  return scale;
}

uint8_t QuantizeMxfp4Block(const float* x, uint8_t* codes) {
  float amax = 0.0f;
  bool has_nan = false;
  for (int i = 0; i < kMxBlock; ++i) {
    if (std::isnan(x[i])) has_nan = true;
    amax = std::max(amax, std::fabs(x[i]));
  }
  // floor(log2(amax)) is exact through ilogb, subnormals included; an infinite
  // amax clamps to the top of the scale range and its elements saturate.
  int shared = -127;
  if (amax > 0.0f) shared = std::isinf(amax) ? 127 : std::ilogb(amax) - kE2m1Emax;
  shared = std::clamp(shared, -127, 127);
  // x / 2^shared is exact in double for every shared exponent (in float,
  // 2^-127 would be subnormal); |x / 2^shared| < 8, and e2m1 saturates at 6.
  const double inv = std::ldexp(1.0, -shared);
  for (int i = 0; i < kMxBlock; ++i) codes[i] = FloatToE2m1(static_cast<float>(x[i] * inv));
  return has_nan ? 0xFF : static_cast<uint8_t>(shared + 127);
}

void EncodeMxfp4Token(const float* values, uint8_t* token) {
  uint8_t codes[kMxBlock];
  for (int b = 0; b < kMxfp4ScaleBytes; ++b) {
    token[kMxfp4PackedBytes + b] = QuantizeMxfp4Block(values + b * kMxBlock, codes);
    uint8_t* packed = token + b * (kMxBlock / 2);
    for (int i = 0; i < kMxBlock / 2; ++i) packed[i] = PackE2m1(codes[2 * i], codes[2 * i + 1]);
  }
}

void DecodeMxfp4Token(const uint8_t* token, float* values) {
  for (int b = 0; b < kMxfp4ScaleBytes; ++b) {
    const float scale = E8m0ToFloat(token[kMxfp4PackedBytes + b]);
    const uint8_t* packed = token + b * (kMxBlock / 2);
    float* out = values + b * kMxBlock;
    for (int i = 0; i < kMxBlock / 2; ++i) {
      out[2 * i] = E2m1ToFloat(UnpackE2m1(packed[i], 0)) * scale;
      out[2 * i + 1] = E2m1ToFloat(UnpackE2m1(packed[i], 1)) * scale;
    }
  }
}

}  // namespace reference
}  // namespace mlajit
