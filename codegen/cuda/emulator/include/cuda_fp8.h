// Stand-in for the CUDA toolkit's cuda_fp8.h in SIMT-emulated device code: the E4M3/E5M2 conversions.
#pragma once

// __nv_cvt_float_to_fp8 rounds to nearest even (cvt.rn.satfinite.e4m3x2.f32 and friends):
// with __NV_SATFINITE a finite value beyond the largest code (and an infinity) saturates to
// it, without it such a value becomes NaN (E4M3, which has no infinity) or infinity (E5M2);
// a NaN becomes S.1111.111 (E4M3) or a quiet NaN (E5M2). Every code keeps the input's sign,
// as the toolkit's own cuda_fp8.hpp conversion does.

#include <cuda_fp16.h>

typedef unsigned char __nv_fp8_storage_t;
enum __nv_saturation_t { __NV_NOSAT = 0, __NV_SATFINITE = 1 };
enum __nv_fp8_interpretation_t { __NV_E4M3 = 0, __NV_E5M2 = 1 };

namespace ingot {
namespace simt {

/// f32 -> an FP8 code with `mbits` mantissa bits and exponent bias `bias`, round to nearest
/// even; `maxCode` is the largest finite magnitude's code.
inline unsigned char floatToFp8(float f, int mbits, int bias, unsigned maxCode, bool saturate,
                                unsigned char nanCode, unsigned char infCode) {
  unsigned x;
  memcpy(&x, &f, 4);
  const unsigned char sign = static_cast<unsigned char>((x >> 24) & 0x80u);
  const unsigned ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return static_cast<unsigned char>(sign | nanCode);
  // The code's value grid: normal codes at exponent e >= 1 - bias are (1 + m / 2^mbits) * 2^e;
  // below, steps of 2^(1 - bias - mbits).
  const int e = static_cast<int>(ax >> 23) - 127;
  unsigned q;
  if (e >= 1 - bias) {
    const unsigned units = ((static_cast<unsigned>(e + bias)) << 23) | (ax & 0x7fffffu);
    const int shift = 23 - mbits;
    q = units >> shift;
    const unsigned rem = units & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
  } else {
    // m * 2^(e' - 150) in steps of 2^(1 - bias - mbits): shift = (1 - bias - mbits) - (e' - 150).
    const int biased = static_cast<int>(ax >> 23);
    const int shift = 151 - bias - mbits - biased;
    if (shift > 25) return sign;
    const unsigned m = biased == 0 ? (ax & 0x7fffffu) : ((ax & 0x7fffffu) | 0x800000u);
    q = m >> shift;
    const unsigned rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
  }
  if (ax == 0x7f800000u || q > maxCode)
    return saturate ? static_cast<unsigned char>(sign | maxCode)
                    : static_cast<unsigned char>(sign | infCode);
  return static_cast<unsigned char>(sign | q);
}

}  // namespace simt
}  // namespace ingot

inline __nv_fp8_storage_t __nv_cvt_float_to_fp8(float x, __nv_saturation_t saturate,
                                                __nv_fp8_interpretation_t kind) {
  if (kind == __NV_E4M3)
    return ::ingot::simt::floatToFp8(x, 3, 7, 0x7eu, saturate == __NV_SATFINITE, 0x7f, 0x7f);
  return ::ingot::simt::floatToFp8(x, 2, 15, 0x7bu, saturate == __NV_SATFINITE, 0x7e, 0x7c);
}

/// FP8 code -> __half_raw (exact for both kinds).
inline __half_raw __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t code, __nv_fp8_interpretation_t kind) {
  const unsigned short sign = static_cast<unsigned short>((code & 0x80u) << 8);
  if (kind == __NV_E5M2) return __half_raw{static_cast<unsigned short>(code << 8)};
  const unsigned c = code & 0x7fu;
  if (c == 0x7fu) return __half_raw{static_cast<unsigned short>(sign | 0x7fffu)};
  const unsigned e = c >> 3, m = c & 7u;
  if (e == 0) {  // subnormal m * 2^-9: exact as an f16 (normal for m >= 1: 2^-9 >= 2^-14)
    const float v = static_cast<float>(m) * 0.001953125f;
    return __half_raw{static_cast<unsigned short>(sign | ::ingot::simt::floatToHalfBitsRn(v))};
  }
  return __half_raw{static_cast<unsigned short>(sign | ((e + 8u) << 10) | (m << 7))};
}
