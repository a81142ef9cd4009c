// Stand-in for the CUDA toolkit's cuda_fp16.h in SIMT-emulated device code: __half and its conversions.
#pragma once

// Conversions are bit-exact with the GPU's cvt instructions: f16 -> f32 is exact, f32 -> f16
// rounds to nearest even with subnormal results and saturation to infinity, and a NaN
// becomes the canonical NaN 0x7fff (what cvt.rn.f16.f32 returns).

struct __half_raw {
  unsigned short x;
};
struct __half2_raw {
  unsigned short x, y;
};

namespace ingot {
namespace simt {

inline float halfBitsToFloat(unsigned short h) {
  const unsigned sign = static_cast<unsigned>(h & 0x8000u) << 16;
  const unsigned exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  unsigned bits;
  if (exp == 0x1fu) {
    bits = sign | 0x7f800000u | (mant << 13);  // infinity or NaN (payload kept)
  } else if (exp != 0u) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0u) {
    bits = sign;
  } else {  // subnormal: mant * 2^-24, exact in f32
    const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    unsigned m;
    memcpy(&m, &v, 4);
    bits = sign | m;
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

inline unsigned short floatToHalfBitsRn(float f) {
  unsigned x;
  memcpy(&x, &f, 4);
  const unsigned short sign = static_cast<unsigned short>((x >> 16) & 0x8000u);
  const unsigned ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return 0x7fffu;                    // NaN
  if (ax >= 0x477ff000u) return sign | 0x7c00u;            // rounds to >= 65536: infinity
  if (ax >= 0x38800000u) {                                 // normal f16 (>= 2^-14)
    const unsigned units = ax - (112u << 23);              // exponent re-biased
    unsigned q = units >> 13;
    const unsigned rem = units & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) ++q;
    return sign | static_cast<unsigned short>(q);
  }
  // Subnormal or zero: |f| = m * 2^(e - 150), in steps of 2^-24.
  const int e = static_cast<int>(ax >> 23);
  if (e < 102) return sign;  // below 2^-25: rounds to zero
  const unsigned m = (ax & 0x7fffffu) | 0x800000u;
  const int shift = 126 - e;  // 14..24
  unsigned q = m >> shift;
  const unsigned rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return sign | static_cast<unsigned short>(q);
}

}  // namespace simt
}  // namespace ingot

struct __half {
  unsigned short __x;
  __half() = default;
  __half(const __half_raw &r) : __x(r.x) {}
  __half &operator=(const __half_raw &r) {
    __x = r.x;
    return *this;
  }
  operator __half_raw() const { return __half_raw{__x}; }
  __half(float f) : __x(::ingot::simt::floatToHalfBitsRn(f)) {}
  operator float() const { return ::ingot::simt::halfBitsToFloat(__x); }
};
struct __attribute__((aligned(4))) __half2 {
  __half x, y;
};
typedef __half half;
typedef __half2 half2;

inline float __half2float(__half h) { return ::ingot::simt::halfBitsToFloat(h.__x); }
inline __half __float2half(float f) { return __half_raw{::ingot::simt::floatToHalfBitsRn(f)}; }
inline __half __float2half_rn(float f) { return __float2half(f); }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half __ushort_as_half(unsigned short x) { return __half_raw{x}; }
inline short __half_as_short(__half h) { return static_cast<short>(h.__x); }
inline __half __short_as_half(short x) { return __half_raw{static_cast<unsigned short>(x)}; }
inline __half2 __floats2half2_rn(float lo, float hi) { return __half2{__float2half(lo), __float2half(hi)}; }
inline float __low2float(__half2 v) { return __half2float(v.x); }
inline float __high2float(__half2 v) { return __half2float(v.y); }
