// Exact scalar decoders (and round-to-nearest-even encoders) of the quantized element types.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace ingot {

/// OCP FP4 E2M1 (f4E2M1FN): bit 3 sign, bits 2..1 exponent (bias 1), bit 0 mantissa; no
/// infinities or NaN. Magnitudes {0, 0.5, 1, 1.5, 2, 3, 4, 6}. Only the low nibble is read.
inline float e2m1ToF32(uint8_t code) {
  static constexpr float kMagnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float m = kMagnitude[code & 7];
  return (code & 8) ? -m : m;
}

/// OCP FP8 E4M3FN (f8E4M3FN): bit 7 sign, bits 6..3 exponent (bias 7), bits 2..0
/// mantissa; subnormals at exponent 0, no infinities, S.1111.111 (0x7F, 0xFF) is NaN,
/// largest finite 448.
inline float e4m3fnToF32(uint8_t code) {
  const uint32_t e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return std::numeric_limits<float>::quiet_NaN();
  const float mag = e == 0 ? std::ldexp(static_cast<float>(m), -9)
                           : std::ldexp(1.0f + static_cast<float>(m) / 8.0f,
                                        static_cast<int>(e) - 7);
  return (code & 0x80) ? -mag : mag;
}

/// OCP MX E8M0 (f8E8M0FNU): an unsigned biased exponent, 2^(e - 127); 0xFF is NaN. 2^-127
/// (e = 0) is an f32 subnormal, still exact.
inline float e8m0ToF32(uint8_t code) {
  if (code == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(code) - 127);
}

/// f32 -> E4M3FN, round to nearest even, saturating at +-448 (OCP "satfinite"); NaN -> 0x7F.
/// For tests and dummy weights.
inline uint8_t f32ToE4m3fn(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint8_t sign = static_cast<uint8_t>((x >> 24) & 0x80);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return 0x7F;
  float a;
  std::memcpy(&a, &ax, 4);
  if (a >= 464.0f) return sign | 0x7E;  // 464 is halfway from 448 to the missing 480
  if (a < 0.015625f) {                  // below 2^-6: subnormal steps of 2^-9 (code 8 = 2^-6)
    return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0f));
  }
  int32_t e = static_cast<int32_t>(ax >> 23) - 127;
  uint32_t mant = ax & 0x7fffffu, r = mant >> 20;
  const uint32_t rem = mant & 0xfffffu, half = 0x80000u;
  if (rem > half || (rem == half && (r & 1u))) ++r;
  if (r == 8) {
    r = 0;
    ++e;
  }
  return sign | static_cast<uint8_t>(((e + 7) << 3) | static_cast<int32_t>(r));
}

/// f32 -> E2M1, round to nearest even (ties go to the even code), saturating at +-6.
inline uint8_t f32ToE2m1(float f) {
  const uint8_t sign = std::signbit(f) ? 8 : 0;
  const float a = std::fabs(f);
  if (std::isnan(f)) return 0;
  uint8_t m;
  if (a <= 0.25f) m = 0;
  else if (a < 0.75f) m = 1;
  else if (a <= 1.25f) m = 2;
  else if (a < 1.75f) m = 3;
  else if (a <= 2.5f) m = 4;
  else if (a < 3.5f) m = 5;
  else if (a <= 5.0f) m = 6;
  else m = 7;
  return sign | m;
}

}  // namespace ingot
