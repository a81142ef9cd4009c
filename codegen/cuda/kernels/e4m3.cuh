// FP8 E4M3FN codec shared by the CUDA kernel headers, and the correctly rounded f32 ops they share.
#pragma once

// One codec for every kernel that reads or writes E4M3FN bytes (kv_fp8.cuh's KV cache,
// quant_gemv.cuh's fp8 weights and nvfp4 block scales, fp8_w8a8.cuh's activations), so
// they cannot drift apart. Both directions are integer arithmetic on the f32 bits: no
// float rounding mode, contraction or flush-to-zero (the kernels build with
// --use_fast_math) can change a result, and the host tests run this very code.
//
// E4M3FN (OCP FP8, MLIR f8E4M3FN): bit 7 sign, bits 6..3 exponent (bias 7), bits 2..0
// mantissa; exponent 0 is subnormal (m * 2^-9); no infinities; S.1111.111 is NaN; the
// largest finite value is 448. The reference is runtime/backend/cpu/quant_formats.h
// (e4m3fnToF32, f32ToE4m3fn); test/kernels/e4m3_host_test.cc checks this header against it.
//
// The kernel sources concatenate the embedded headers for NVRTC (the
// `#include "codegen/..."` lines are dropped there), so this header must be listed before
// its users wherever a translation unit is assembled.

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define INGOT_E4M3_HD __host__ __device__ __forceinline__
#else
#include <cstring>
#define INGOT_E4M3_HD inline
#endif

namespace ingot {
namespace e4m3 {

/// The f32 whose bits are `bits`.
INGOT_E4M3_HD float bitsToFloat(unsigned bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
#endif
}

/// The bits of f32 `f`.
INGOT_E4M3_HD unsigned floatToBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  unsigned bits;
  std::memcpy(&bits, &f, 4);
  return bits;
#endif
}

/// Code `code` (low 8 bits) as f32, exactly. The NaN codes 0x7F / 0xFF read as +-480 (the
/// exponent/mantissa arithmetic carried through), as the CPU's vector kernels read them;
/// a caller that must see NaN there checks for it (quant_gemv.cuh, e4m3ScaleValue).
INGOT_E4M3_HD float decode(unsigned code) {
  const unsigned c = code & 0x7fu;
  // A normal code's exponent/mantissa field shifted into an f32's is the value times
  // 2^-120: re-biasing by 120 makes it exact. Subnormals are m * 2^-9.
  const float mag = (c & 0x78u) ? bitsToFloat((c << 20) + (120u << 23))
                                : static_cast<float>(c) * 0.001953125f;
  return (code & 0x80u) ? -mag : mag;
}

/// f32 -> code: round to nearest even, saturating at +-448 (OCP "satfinite", what
/// __nv_cvt_float_to_fp8(.., __NV_SATFINITE, __NV_E4M3) and cuBLASLt's FP8 outputs do; an
/// infinity too); NaN -> 0x7F. An f32 subnormal encodes to a signed zero (it is below
/// 2^-10, half the smallest subnormal code), as a flush-to-zero device would read it.
INGOT_E4M3_HD unsigned encode(float f) {
  const unsigned x = floatToBits(f);
  const unsigned sign = (x >> 24) & 0x80u;
  const unsigned ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return 0x7fu;         // NaN
  if (ax >= 0x43e00000u) return sign | 0x7eu;  // >= 448 (and inf): the largest finite
  // The code is `units` >> `shift`, rounded to nearest even on the dropped bits.
  unsigned units;
  int shift;
  if (ax >= 0x3c800000u) {
    // 2^-6 <= |f| < 448: re-biasing the f32 exponent by 120 lines its exponent/mantissa
    // field up with the code's, 20 mantissa bits below; a carry out of the mantissa
    // bumps the exponent, as it should.
    units = ax - (120u << 23);
    shift = 20;
  } else {
    // Below 2^-6, subnormal steps of 2^-9: |f| = m * 2^(e - 150) (m with its implicit
    // bit) is m >> (141 - e) steps. Below 2^-10 (e < 117) that rounds to 0; else the
    // shift is 21..24 (q == 8 after rounding is 2^-6, the smallest normal: the same code).
    const int e = static_cast<int>(ax >> 23);
    if (e < 117) return sign;
    units = (ax & 0x7fffffu) | 0x800000u;
    shift = 141 - e;
  }
  unsigned q = units >> shift;
  const unsigned rem = units & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  // Below 448 the rounding reaches at most 448 itself (0x7E); the clamp is defensive.
  return sign | (q > 0x7eu ? 0x7eu : q);
}

}  // namespace e4m3

/// f32 operations rounded once, to nearest, on host and device alike: the kernels build
/// with --use_fast_math, which would otherwise approximate divisions and reciprocals and
/// contract products into FMAs differently from the host code the tests run.
namespace rn {

/// a * b, never contracted into an FMA.
INGOT_E4M3_HD float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
/// a * b + c with one rounding.
INGOT_E4M3_HD float fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return __builtin_fmaf(a, b, c);
#endif
}
/// a / b.
INGOT_E4M3_HD float div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
/// 1 / x.
INGOT_E4M3_HD float rcp(float x) {
#if defined(__CUDA_ARCH__)
  return __frcp_rn(x);
#else
  return 1.0f / x;
#endif
}

}  // namespace rn
}  // namespace ingot
