// IEEE binary16 (f16) <-> binary32 on bit patterns, rounding to nearest even:
// the split partials of fp8 KV (mla_common.cuh). Plain C++ (mla_params.h
// only), so that tests/unit/f16_partials_test.cc checks it on the CPU against the
// compiler's own conversions; CUDA kernels on sm_80+ convert pairs with
// cvt.rn.f16x2.f32 instead, which rounds the same way.
#ifndef MLAJIT_KERNEL_TEMPLATES_MLA_F16_H_
#define MLAJIT_KERNEL_TEMPLATES_MLA_F16_H_

#include "mla_params.h"  // MLA_HOST_DEVICE

// binary32 bits -> binary16 bits: NaN stays a (quiet) NaN, values from 65520
// up become infinity, values below 2^-14 land on the subnormal grid of 2^-24.
MLA_HOST_DEVICE inline unsigned short MlaF32BitsToF16(unsigned u) {
  const unsigned sign = (u >> 16) & 0x8000u;
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return static_cast<unsigned short>(sign | 0x7e00u);
  if (u >= 0x477ff000u) return static_cast<unsigned short>(sign | 0x7c00u);
  if (u < 0x38800000u) {
    // |x| < 2^-14: x = m * 2^(exp - 150) with the implicit bit in m, and the
    // result counts units of 2^-24: m shifted right by 126 - exp (>= 14).
    const unsigned exp = u >> 23;
    const unsigned shift = 126u - exp;
    if (exp == 0 || shift > 24) return static_cast<unsigned short>(sign);  // below 2^-25
    const unsigned m = (u & 0x7fffffu) | 0x800000u;
    unsigned r = m >> shift;
    const unsigned rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (r & 1u))) ++r;  // 0x400 is the smallest normal
    return static_cast<unsigned short>(sign | r);
  }
  u += 0xfffu + ((u >> 13) & 1u);  // round the 13 dropped bits to nearest even
  return static_cast<unsigned short>(sign | ((u >> 13) - (112u << 10)));
}

// binary16 bits -> binary32 bits (exact).
MLA_HOST_DEVICE inline unsigned MlaF16ToF32Bits(unsigned short h) {
  const unsigned sign = static_cast<unsigned>(h & 0x8000u) << 16;
  const unsigned exp = (h >> 10) & 0x1fu;
  unsigned man = h & 0x3ffu;
  if (exp == 0x1fu) return sign | 0x7f800000u | (man << 13);
  if (exp != 0) return sign | ((exp + 112u) << 23) | (man << 13);
  if (man == 0) return sign;
  unsigned shifts = 0;  // a subnormal: normalise
  while ((man & 0x400u) == 0) {
    man <<= 1;
    ++shifts;
  }
  return sign | ((113u - shifts) << 23) | ((man & 0x3ffu) << 13);
}

#endif  // MLAJIT_KERNEL_TEMPLATES_MLA_F16_H_
