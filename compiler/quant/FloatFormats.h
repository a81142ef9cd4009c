//===- FloatFormats.h - OCP 8-bit and 4-bit float encodings -----*- C++ -*-===//
//
// Scalar conversions between f32 and the narrow float formats quantized weights are stored
// in: FP8 E4M3FN (weights and NVFP4 block scales), FP4 E2M1 (NVFP4/MXFP4 weights) and
// E8M0 (MXFP4 block scales), as the OCP 8-bit floating point and Microscaling (MX)
// specifications define them. Encoders round to nearest, ties to even, and saturate to the
// largest finite value. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cmath>
#include <cstdint>

namespace ingot::quant {

/// Largest finite E4M3FN magnitude: S.1111.110 = 1.75 * 2^8.
inline constexpr float kE4M3Max = 448.0f;
/// Largest E2M1 magnitude: S.11.1 = 1.5 * 2^2. Its magnitudes are {0, 0.5, 1, 1.5, 2, 3, 4, 6}.
inline constexpr float kE2M1Max = 6.0f;
/// Exponent of the largest E2M1 magnitude (OCP MX: emax of FP4 E2M1 is 2).
inline constexpr int kE2M1MaxExponent = 2;
/// E8M0 holds 2^(bits - 127) for bits 0..254; 0xFF is NaN.
inline constexpr int kE8M0Bias = 127;
inline constexpr int kE8M0MinExponent = -127;
inline constexpr int kE8M0MaxExponent = 127;

/// f32 -> E4M3FN bits (1 sign, 4 exponent bits with bias 7, 3 mantissa bits, subnormals,
/// no infinities). Rounds to nearest even; magnitudes above 448 (infinities included)
/// saturate to 448; NaN becomes S.1111.111.
uint8_t floatToE4M3(float value);
/// E4M3FN bits -> f32 (exact).
float e4m3ToFloat(uint8_t bits);

/// f32 -> E2M1 bits in the low nibble (bit 3 = sign, 2 exponent bits with bias 1, 1
/// mantissa bit). Rounds to nearest even; magnitudes above 6 saturate to 6. E2M1 has no
/// NaN: NaN encodes as +0. Inline: FP4 encoders call it once per weight.
inline uint8_t floatToE2M1(float value) {
  // Count the midpoints between consecutive magnitudes {0, 0.5, 1, 1.5, 2, 3, 4, 6} below
  // |value|; at a midpoint round up only from an odd code (ties to even). NaN compares
  // false everywhere.
  const float m = std::fabs(value);
  const int code = (m > 0.25f) + (m >= 0.75f) + (m > 1.25f) + (m >= 1.75f) + (m > 2.5f) +
                   (m >= 3.5f) + (m > 5.0f);
  const bool negative = std::signbit(value) && !std::isnan(value);
  return static_cast<uint8_t>(code | (negative ? 0x8 : 0));
}
/// E2M1 bits (low nibble) -> f32 (exact).
inline float e2m1ToFloat(uint8_t bits) {
  static constexpr float kValues[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                        -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  return kValues[bits & 0xF];
}

/// Power-of-two exponent -> E8M0 bits, clamped to [kE8M0MinExponent, kE8M0MaxExponent].
uint8_t exponentToE8M0(int exponent);
/// E8M0 bits -> 2^(bits - 127) (exact; 0xFF is NaN).
float e8m0ToFloat(uint8_t bits);

/// floor(log2(|value|)) of a finite nonzero value, exact (subnormals included).
int floorLog2(float value);

} // namespace ingot::quant
