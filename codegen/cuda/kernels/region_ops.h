// Scalar semantics of region bytecode ops for generated attention variants (host and device).
#pragma once

// Each helper is the exact counterpart of one case of the CPU evaluator
// (core/region/region_evaluator.cc): integer values are held canonically (the low W bits,
// zero-extended, in a u32 or u64 container) and every result wraps to its width; poison and
// traps follow schemas/region_bytecode.h, made total: a poison-producing op returns 0 (the
// evaluator's register value) and sets its poison flag, a trapping op returns 0 and sets an
// error bit. Float add/sub/mul/div/sqrt use the round-to-nearest intrinsics on the device, so
// NVRTC's --use_fast_math cannot contract or approximate them; transcendental functions use
// the device library and may differ from the host's libm by a few ulp (see
// docs/attention-variants.md, "CUDA").

#include "core/kernels/region_operands.h"

#if !defined(__CUDACC_RTC__)
#include <cmath>
#include <cstring>
#endif

namespace ingot {
namespace rgn {

/// The low W bits set (W in 1..64).
template <int W>
INGOT_HD constexpr u64 lowBits() {
  return W >= 64 ? ~0ull : ((1ull << (W & 63)) - 1);
}
/// The canonical W-bit value `v` read as signed.
template <int W>
INGOT_HD i64 sext(u64 v) {
  return W >= 64 ? static_cast<i64>(v)
                 : static_cast<i64>(v << ((64 - W) & 63)) >> ((64 - W) & 63);
}
/// Smallest signed W-bit value, as i64.
template <int W>
INGOT_HD constexpr i64 signedMin() {
  return W >= 64 ? static_cast<i64>(1ull << 63) : -static_cast<i64>(1ull << ((W - 1) & 63));
}

INGOT_HD u32 floatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  u32 b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
#endif
}
INGOT_HD float bitsFloat(u32 b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  float f;
  std::memcpy(&f, &b, sizeof(f));
  return f;
#endif
}
/// NaN test on the bits: unaffected by fast-math or finite-math assumptions.
INGOT_HD bool isNan(float f) { return (floatBits(f) & 0x7fffffffu) > 0x7f800000u; }
INGOT_HD bool signBit(float f) { return (floatBits(f) >> 31) != 0; }

// ---- integer ops (operands canonical W-bit values) ----
template <int W> INGOT_HD u64 addi(u64 x, u64 y) { return (x + y) & lowBits<W>(); }
template <int W> INGOT_HD u64 subi(u64 x, u64 y) { return (x - y) & lowBits<W>(); }
template <int W> INGOT_HD u64 muli(u64 x, u64 y) { return (x * y) & lowBits<W>(); }
/// Signed division (kDivSI) and remainder (kRemSI): trap on a zero divisor and INT_MIN / -1.
template <int W>
INGOT_HD u64 divsi(u64 x, u64 y, u32& err, bool rem) {
  const i64 a = sext<W>(x), b = sext<W>(y);
  if (b == 0 || (a == signedMin<W>() && b == -1)) {
    err |= kRegionErrorDivision;
    return 0;
  }
  return static_cast<u64>(rem ? a % b : a / b) & lowBits<W>();
}
template <int W>
INGOT_HD u64 divui(u64 x, u64 y, u32& err, bool rem) {
  if (y == 0) {
    err |= kRegionErrorDivision;
    return 0;
  }
  return rem ? x % y : x / y;
}
/// Shifts: an amount >= W is poison (value 0).
template <int W>
INGOT_HD u64 shli(u64 x, u64 y, bool& poison) {
  if (y >= static_cast<u64>(W)) return poison = true, 0;
  return (x << y) & lowBits<W>();
}
template <int W>
INGOT_HD u64 shrui(u64 x, u64 y, bool& poison) {
  if (y >= static_cast<u64>(W)) return poison = true, 0;
  return x >> y;
}
template <int W>
INGOT_HD u64 shrsi(u64 x, u64 y, bool& poison) {
  if (y >= static_cast<u64>(W)) return poison = true, 0;
  return static_cast<u64>(sext<W>(x) >> y) & lowBits<W>();
}
template <int W> INGOT_HD u64 maxsi(u64 x, u64 y) { return sext<W>(x) >= sext<W>(y) ? x : y; }
template <int W> INGOT_HD u64 minsi(u64 x, u64 y) { return sext<W>(x) <= sext<W>(y) ? x : y; }
INGOT_HD u64 maxui(u64 x, u64 y) { return x >= y ? x : y; }
INGOT_HD u64 minui(u64 x, u64 y) { return x <= y ? x : y; }
/// math.absi: abs(INT_MIN) wraps to INT_MIN.
template <int W>
INGOT_HD u64 absi(u64 x) {
  return (sext<W>(x) < 0 ? 0ull - x : x) & lowBits<W>();
}

// ---- casts ----
/// Sign-extends a canonical SW-bit value and truncates to DW bits (index_cast, extsi).
template <int SW, int DW>
INGOT_HD u64 sextTo(u64 x) {
  return static_cast<u64>(sext<SW>(x)) & lowBits<DW>();
}
/// Zero-extends or truncates to DW bits (index_castui, extui, trunci).
template <int DW>
INGOT_HD u64 zextTo(u64 x) {
  return x & lowBits<DW>();
}
template <int SW>
INGOT_HD float sitofp(u64 x) {
  return static_cast<float>(sext<SW>(x));
}
INGOT_HD float uitofp(u64 x) { return static_cast<float>(x); }
/// fptosi / fptoui toward zero; NaN or a value outside the W-bit range is poison (value 0).
/// The range bounds are powers of two, exact in f32, as is the truncated value.
template <int W, bool Signed>
INGOT_HD u64 fptoi(float f, bool& poison) {
  if (isNan(f)) return poison = true, 0;
#if defined(__CUDA_ARCH__)
  const float t = truncf(f);
#else
  const float t = std::trunc(f);
#endif
  const float lo = Signed ? -static_cast<float>(1ull << ((W - 1) & 63)) : 0.0f;
  // 2^W as f32 (2^64 when W = 64: built as 2 * 2^63).
  const float hi = Signed ? static_cast<float>(1ull << ((W - 1) & 63))
                          : 2.0f * static_cast<float>(1ull << ((W - 1) & 63));
  if (!(t >= lo && t < hi)) return poison = true, 0;
  return Signed ? static_cast<u64>(static_cast<i64>(t)) & lowBits<W>()
                : static_cast<u64>(t) & lowBits<W>();
}

// ---- float ops ----
INGOT_HD float addf(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
INGOT_HD float subf(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
INGOT_HD float mulf(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
INGOT_HD float divf(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
INGOT_HD float sqrtf_(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}
INGOT_HD float rsqrtf_(float a) { return divf(1.0f, sqrtf_(a)); }
INGOT_HD float negf(float a) { return bitsFloat(floatBits(a) ^ 0x80000000u); }
INGOT_HD float absf(float a) { return bitsFloat(floatBits(a) & 0x7fffffffu); }
INGOT_HD float quietNan() { return bitsFloat(0x7fc00000u); }
/// IEEE maximum/minimum (NaN if either is NaN) and maximumNumber/minimumNumber (the other
/// operand if one is NaN); both order -0 below +0.
INGOT_HD float maxOrdered(float a, float b) {
  if (a == b) return signBit(a) ? b : a;
  return a > b ? a : b;
}
INGOT_HD float minOrdered(float a, float b) {
  if (a == b) return signBit(a) ? a : b;
  return a < b ? a : b;
}
INGOT_HD float maximumf(float a, float b) {
  return isNan(a) || isNan(b) ? quietNan() : maxOrdered(a, b);
}
INGOT_HD float minimumf(float a, float b) {
  return isNan(a) || isNan(b) ? quietNan() : minOrdered(a, b);
}
INGOT_HD float maxnumf(float a, float b) {
  return isNan(a) ? b : isNan(b) ? a : maxOrdered(a, b);
}
INGOT_HD float minnumf(float a, float b) {
  return isNan(a) ? b : isNan(b) ? a : minOrdered(a, b);
}
INGOT_HD float copysignf_(float a, float b) {
  return bitsFloat((floatBits(a) & 0x7fffffffu) | (floatBits(b) & 0x80000000u));
}
#if defined(__CUDA_ARCH__)
INGOT_HD float powf_(float a, float b) { return powf(a, b); }
INGOT_HD float expf_(float a) { return expf(a); }
INGOT_HD float exp2f_(float a) { return exp2f(a); }
INGOT_HD float logf_(float a) { return logf(a); }
INGOT_HD float log2f_(float a) { return log2f(a); }
INGOT_HD float tanhf_(float a) { return tanhf(a); }
INGOT_HD float floorf_(float a) { return floorf(a); }
INGOT_HD float ceilf_(float a) { return ceilf(a); }
#else
INGOT_HD float powf_(float a, float b) { return std::pow(a, b); }
INGOT_HD float expf_(float a) { return std::exp(a); }
INGOT_HD float exp2f_(float a) { return std::exp2(a); }
INGOT_HD float logf_(float a) { return std::log(a); }
INGOT_HD float log2f_(float a) { return std::log2(a); }
INGOT_HD float tanhf_(float a) { return std::tanh(a); }
INGOT_HD float floorf_(float a) { return std::floor(a); }
INGOT_HD float ceilf_(float a) { return std::ceil(a); }
#endif
/// arith.cmpf: `o*` predicates are false and `u*` true when either operand is NaN. P is the
/// arith/bytecode predicate number.
template <int P>
INGOT_HD bool cmpf(float a, float b) {
  const bool u = isNan(a) || isNan(b);
  switch (P) {
    case 0: return false;
    case 1: return !u && a == b;
    case 2: return !u && a > b;
    case 3: return !u && a >= b;
    case 4: return !u && a < b;
    case 5: return !u && a <= b;
    case 6: return !u && a != b;
    case 7: return !u;
    case 8: return u || a == b;
    case 9: return u || a > b;
    case 10: return u || a >= b;
    case 11: return u || a < b;
    case 12: return u || a <= b;
    case 13: return u || a != b;
    case 14: return u;
    default: return true;
  }
}

// ---- extra operands ----
/// Row-major offset of `index` (R canonical index values) in operand `n`, or an error bit and
/// offset 0 when an index is outside [0, extent).
template <int R>
INGOT_HD u64 elementOffset(const RegionOperands& ops, int n, const u64* index, u32& err) {
  u64 offset = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int d = 0; d < R; ++d) {
    const i64 i = static_cast<i64>(index[d]);
    const i64 extent = ops.operand[n].shape[d];
    if (i < 0 || i >= extent) {
      err |= kRegionErrorOutOfRange;
      return 0;
    }
    offset = offset * static_cast<u64>(extent) + static_cast<u64>(i);
  }
  return offset;
}
/// region_load of an element of W bits (1 = i1 stored as a byte, 8/16/32/64) as its canonical
/// value; an out-of-range index reads nothing and yields 0.
template <int W, int R>
INGOT_HD u64 loadInt(const RegionOperands& ops, int n, const u64* index, u32& err) {
  const u32 before = err;
  const u64 offset = elementOffset<R>(ops, n, index, err);
  if (err != before) return 0;
  const void* base = ops.operand[n].data;
  if (W == 1) return static_cast<const unsigned char*>(base)[offset] != 0;
  if (W == 8) return static_cast<const unsigned char*>(base)[offset];
  if (W == 16) return static_cast<const unsigned short*>(base)[offset];
  if (W == 32) return static_cast<const u32*>(base)[offset];
  return static_cast<const u64*>(base)[offset];
}
template <int R>
INGOT_HD float loadF32(const RegionOperands& ops, int n, const u64* index, u32& err) {
  const u32 before = err;
  const u64 offset = elementOffset<R>(ops, n, index, err);
  if (err != before) return 0.0f;
  return static_cast<const float*>(ops.operand[n].data)[offset];
}

/// Reports the trap bits of one evaluation (no-op for 0 or a null error word).
INGOT_HD void report(const RegionOperands& ops, u32 err) {
  if (err == 0 || ops.error == nullptr) return;
#if defined(__CUDA_ARCH__)
  atomicOr(ops.error, err);
#else
  *ops.error |= err;
#endif
}

}  // namespace rgn
}  // namespace ingot
