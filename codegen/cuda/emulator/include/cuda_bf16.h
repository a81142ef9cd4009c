// Stand-in for the CUDA toolkit's cuda_bf16.h in SIMT-emulated device code: __nv_bfloat16 and its conversions.
#pragma once

// Bit-exact with the GPU: bf16 -> f32 is exact; f32 -> bf16 rounds to nearest even
// (cvt.rn.bf16.f32), overflowing to infinity, and a NaN becomes the canonical NaN 0x7fff.

#include <cuda_fp16.h>

struct __nv_bfloat16_raw {
  unsigned short x;
};
struct __nv_bfloat162_raw {
  unsigned short x, y;
};

namespace ingot {
namespace simt {

inline unsigned short floatToBf16BitsRn(float f) {
  unsigned x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
  return static_cast<unsigned short>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
inline unsigned short floatToBf16BitsRz(float f) {
  unsigned x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
  return static_cast<unsigned short>(x >> 16);
}
inline float bf16BitsToFloat(unsigned short b) {
  const unsigned x = static_cast<unsigned>(b) << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

}  // namespace simt
}  // namespace ingot

struct __nv_bfloat16 {
  unsigned short __x;
  __nv_bfloat16() = default;
  __nv_bfloat16(const __nv_bfloat16_raw &r) : __x(r.x) {}
  __nv_bfloat16 &operator=(const __nv_bfloat16_raw &r) {
    __x = r.x;
    return *this;
  }
  operator __nv_bfloat16_raw() const { return __nv_bfloat16_raw{__x}; }
  __nv_bfloat16(float f) : __x(::ingot::simt::floatToBf16BitsRn(f)) {}
  operator float() const { return ::ingot::simt::bf16BitsToFloat(__x); }
};
struct __attribute__((aligned(4))) __nv_bfloat162 {
  __nv_bfloat16 x, y;
  __nv_bfloat162() = default;
  __nv_bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) : x(a), y(b) {}
};
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;

inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  return __nv_bfloat16_raw{::ingot::simt::floatToBf16BitsRn(f)};
}
inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
inline __nv_bfloat16 __float2bfloat16_rz(float f) {
  return __nv_bfloat16_raw{::ingot::simt::floatToBf16BitsRz(f)};
}
inline float __bfloat162float(__nv_bfloat16 b) { return ::ingot::simt::bf16BitsToFloat(b.__x); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.__x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short x) { return __nv_bfloat16_raw{x}; }
inline short __bfloat16_as_short(__nv_bfloat16 b) { return static_cast<short>(b.__x); }
inline __nv_bfloat16 __short_as_bfloat16(short x) {
  return __nv_bfloat16_raw{static_cast<unsigned short>(x)};
}
/// .x = lo (the low half of the 32-bit word), .y = hi.
inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) {
  return __nv_bfloat162(__float2bfloat16_rn(lo), __float2bfloat16_rn(hi));
}
inline __nv_bfloat162 __float22bfloat162_rn(float2 v) { return __floats2bfloat162_rn(v.x, v.y); }
inline float2 __bfloat1622float2(__nv_bfloat162 v) {
  return float2{__bfloat162float(v.x), __bfloat162float(v.y)};
}
inline float __low2float(__nv_bfloat162 v) { return __bfloat162float(v.x); }
inline float __high2float(__nv_bfloat162 v) { return __bfloat162float(v.y); }
inline __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 v) { return __nv_bfloat162(v, v); }
inline __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __float2bfloat16_rn(__bfloat162float(a) + __bfloat162float(b));
}
inline __nv_bfloat16 __hmul(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __float2bfloat16_rn(__bfloat162float(a) * __bfloat162float(b));
}
inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {
  return __float2bfloat16_rn(fmaf(__bfloat162float(a), __bfloat162float(b), __bfloat162float(c)));
}
