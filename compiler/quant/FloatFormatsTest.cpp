//===- FloatFormatsTest.cpp - E4M3 / E2M1 / E8M0 rounding and saturation --===//
#include "compiler/quant/FloatFormats.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include <gtest/gtest.h>

namespace ingot::quant {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

/// The code a correct encoder picks for `x` among `codes` finite codes decoded by `decode`:
/// the nearest value, ties to the code with an even last bit, saturating at the largest
/// magnitude. Written by brute force over every code, independently of the encoder.
template <typename Decode>
uint8_t nearestCode(float x, int codes, uint8_t signBit, Decode decode, float max) {
  float a = std::min(std::fabs(x), max);
  int best = -1;
  double bestDistance = 0;
  for (int c = 0; c < codes; ++c) {
    if (c & signBit)
      continue; // magnitudes only; the sign is copied
    float v = decode(static_cast<uint8_t>(c));
    if (std::isnan(v))
      continue;
    double d = std::fabs(static_cast<double>(v) - a);
    if (best < 0 || d < bestDistance || (d == bestDistance && (c & 1) == 0)) {
      best = c;
      bestDistance = d;
    }
  }
  return static_cast<uint8_t>(best | (std::signbit(x) ? signBit : 0));
}

TEST(FloatFormatsTest, E4M3EveryFiniteCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F)
      continue; // NaN
    float v = e4m3ToFloat(static_cast<uint8_t>(c));
    EXPECT_EQ(floatToE4M3(v), c) << "code " << c << " value " << v;
  }
}

TEST(FloatFormatsTest, E4M3KnownValues) {
  EXPECT_EQ(e4m3ToFloat(0x7E), 448.0f);            // S.1111.110: largest finite
  EXPECT_EQ(e4m3ToFloat(0x38), 1.0f);              // exponent field 7 = bias
  EXPECT_EQ(e4m3ToFloat(0x08), std::ldexp(1.0f, -6)); // smallest normal
  EXPECT_EQ(e4m3ToFloat(0x01), std::ldexp(1.0f, -9)); // smallest subnormal
  EXPECT_EQ(e4m3ToFloat(0x07), 7 * std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3ToFloat(0xBA), -1.25f);
  EXPECT_TRUE(std::isnan(e4m3ToFloat(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3ToFloat(0xFF)));
  EXPECT_EQ(floatToE4M3(-0.0f), 0x80);
}

TEST(FloatFormatsTest, E4M3RoundsTiesToEven) {
  EXPECT_EQ(floatToE4M3(1.0625f), 0x38);                       // 1 | 1.125: even is 1.0
  EXPECT_EQ(floatToE4M3(1.1875f), 0x3A);                       // 1.125 | 1.25: even is 1.25
  EXPECT_EQ(floatToE4M3(std::nextafter(1.0625f, 2.0f)), 0x39); // just above the tie
  EXPECT_EQ(floatToE4M3(std::ldexp(1.0f, -10)), 0x00);         // half the smallest subnormal
  EXPECT_EQ(floatToE4M3(3 * std::ldexp(1.0f, -10)), 0x02);     // 1.5 subnormal units -> 2
  EXPECT_EQ(floatToE4M3(15 * std::ldexp(1.0f, -10)), 0x08);    // 7.5 units carries to 2^-6
  EXPECT_EQ(floatToE4M3(248.0f), 0x78);                        // 240 | 256: even is 256
}

TEST(FloatFormatsTest, E4M3Saturates) {
  EXPECT_EQ(floatToE4M3(464.0f), 0x7E); // halfway to 480 (not representable)
  EXPECT_EQ(floatToE4M3(1e6f), 0x7E);
  EXPECT_EQ(floatToE4M3(kInf), 0x7E);
  EXPECT_EQ(floatToE4M3(-kInf), 0xFE);
  EXPECT_EQ(floatToE4M3(-500.0f), 0xFE);
  EXPECT_EQ(floatToE4M3(kNaN) & 0x7F, 0x7F);
  EXPECT_EQ(floatToE4M3(std::numeric_limits<float>::denorm_min()), 0x00);
}

TEST(FloatFormatsTest, E4M3MatchesBruteForceNearest) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> exponent(-12.0f, 10.0f);
  for (int i = 0; i < 20000; ++i) {
    float x = std::exp2(exponent(rng)) * (rng() & 1 ? -1.0f : 1.0f);
    ASSERT_EQ(floatToE4M3(x), nearestCode(x, 256, 0x80, e4m3ToFloat, kE4M3Max)) << x;
  }
}

TEST(FloatFormatsTest, E2M1EveryCodeRoundTrips) {
  const float magnitudes[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int c = 0; c < 16; ++c) {
    float v = e2m1ToFloat(static_cast<uint8_t>(c));
    EXPECT_EQ(std::fabs(v), magnitudes[c & 7]) << c;
    EXPECT_EQ(std::signbit(v), (c & 8) != 0) << c;
    EXPECT_EQ(floatToE2M1(v), c) << c;
  }
}

TEST(FloatFormatsTest, E2M1RoundsTiesToEvenAndSaturates) {
  EXPECT_EQ(floatToE2M1(0.25f), 0x0); // 0 | 0.5
  EXPECT_EQ(floatToE2M1(0.75f), 0x2); // 0.5 | 1: code 2 is even
  EXPECT_EQ(floatToE2M1(1.25f), 0x2); // 1 | 1.5
  EXPECT_EQ(floatToE2M1(1.75f), 0x4); // 1.5 | 2
  EXPECT_EQ(floatToE2M1(2.5f), 0x4);  // 2 | 3
  EXPECT_EQ(floatToE2M1(3.5f), 0x6);  // 3 | 4
  EXPECT_EQ(floatToE2M1(5.0f), 0x6);  // 4 | 6
  EXPECT_EQ(floatToE2M1(5.01f), 0x7);
  EXPECT_EQ(floatToE2M1(-5.0f), 0xE);
  EXPECT_EQ(floatToE2M1(7.0f), 0x7);
  EXPECT_EQ(floatToE2M1(1e30f), 0x7);
  EXPECT_EQ(floatToE2M1(-kInf), 0xF);
  EXPECT_EQ(floatToE2M1(-0.1f), 0x8);
  EXPECT_EQ(floatToE2M1(kNaN), 0x0);
}

TEST(FloatFormatsTest, E2M1MatchesBruteForceNearest) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> value(-8.0f, 8.0f);
  for (int i = 0; i < 20000; ++i) {
    float x = value(rng);
    ASSERT_EQ(floatToE2M1(x), nearestCode(x, 16, 0x8, e2m1ToFloat, kE2M1Max)) << x;
  }
}

TEST(FloatFormatsTest, E8M0IsAClampedBiasedExponent) {
  EXPECT_EQ(exponentToE8M0(0), 127);
  EXPECT_EQ(exponentToE8M0(-3), 124);
  EXPECT_EQ(exponentToE8M0(127), 254);
  EXPECT_EQ(exponentToE8M0(500), 254);  // the largest finite: 0xFF is NaN
  EXPECT_EQ(exponentToE8M0(-127), 0);
  EXPECT_EQ(exponentToE8M0(-500), 0);
  EXPECT_EQ(e8m0ToFloat(127), 1.0f);
  EXPECT_EQ(e8m0ToFloat(0), std::ldexp(1.0f, -127));
  EXPECT_EQ(e8m0ToFloat(254), std::ldexp(1.0f, 127));
  EXPECT_TRUE(std::isnan(e8m0ToFloat(0xFF)));
  for (int e = -127; e <= 127; ++e)
    EXPECT_EQ(floorLog2(e8m0ToFloat(exponentToE8M0(e))), e);
}

TEST(FloatFormatsTest, FloorLog2IsExact) {
  EXPECT_EQ(floorLog2(1.0f), 0);
  EXPECT_EQ(floorLog2(std::nextafter(2.0f, 0.0f)), 0);
  EXPECT_EQ(floorLog2(2.0f), 1);
  EXPECT_EQ(floorLog2(-0.75f), -1);
  EXPECT_EQ(floorLog2(std::numeric_limits<float>::denorm_min()), -149);
}

} // namespace
} // namespace ingot::quant
