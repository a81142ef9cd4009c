//===- FloatFormats.cpp - OCP 8-bit and 4-bit float encodings -------------===//
#include "compiler/quant/FloatFormats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace ingot::quant {
namespace {

/// E4M3's smallest normal exponent (1 - bias 7) and its subnormal step 2^-9.
constexpr int kE4M3MinExponent = -6;
constexpr float kE4M3SubnormalStepInverse = 512.0f; // 2^9

uint32_t bitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return bits;
}

/// |value| (finite, not NaN) -> E4M3 exponent and mantissa fields, RNE, saturating.
uint8_t e4m3Magnitude(float magnitude) {
  if (!(magnitude < kE4M3Max))
    return 0x7E;
  if (magnitude < std::ldexp(1.0f, kE4M3MinExponent)) // subnormal: multiples of 2^-9
    return static_cast<uint8_t>(std::nearbyint(magnitude * kE4M3SubnormalStepInverse));
  // Normal: round the f32 mantissa to 3 bits, ties to even, in the bit pattern (a carry
  // moves into the exponent, as it should), then rebias the exponent from 127 to 7.
  uint32_t bits = bitsOf(magnitude);
  bits += (1u << 19) - 1 + ((bits >> 20) & 1);
  uint32_t fields = (bits >> 20) - ((127 - 7) << 3);
  return static_cast<uint8_t>(std::min<uint32_t>(fields, 0x7E));
}

float decodeFields(uint8_t fields, int mantissaBits, int bias) {
  int exponentField = fields >> mantissaBits;
  int mantissa = fields & ((1 << mantissaBits) - 1);
  if (exponentField == 0)
    return std::ldexp(static_cast<float>(mantissa), 1 - bias - mantissaBits);
  return std::ldexp(static_cast<float>((1 << mantissaBits) | mantissa),
                    exponentField - bias - mantissaBits);
}

} // namespace

int floorLog2(float value) {
  int exponent;
  std::frexp(value, &exponent); // |value| = m * 2^exponent, m in [0.5, 1)
  return exponent - 1;
}

uint8_t floatToE4M3(float value) {
  uint8_t sign = std::signbit(value) ? 0x80 : 0;
  if (std::isnan(value))
    return sign | 0x7F;
  return sign | e4m3Magnitude(std::fabs(value));
}

float e4m3ToFloat(uint8_t bits) {
  float sign = bits & 0x80 ? -1.0f : 1.0f;
  if ((bits & 0x7F) == 0x7F)
    return std::numeric_limits<float>::quiet_NaN();
  return sign * decodeFields(bits & 0x7F, 3, 7);
}

uint8_t exponentToE8M0(int exponent) {
  return static_cast<uint8_t>(std::clamp(exponent, kE8M0MinExponent, kE8M0MaxExponent) +
                              kE8M0Bias);
}

float e8m0ToFloat(uint8_t bits) {
  if (bits == 0xFF)
    return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(bits) - kE8M0Bias);
}

} // namespace ingot::quant
