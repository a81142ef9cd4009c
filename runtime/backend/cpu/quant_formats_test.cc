// The E2M1 / E4M3FN / E8M0 decoders exhaustively against float64 definitions, and the encoders.
#include "runtime/backend/cpu/quant_formats.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ingot {
namespace {

/// OCP: sign * 2^(E - bias) * (1 + M / 2^m) for E > 0, sign * 2^(1 - bias) * (M / 2^m) for E = 0.
double minifloat(uint32_t code, int expBits, int mantBits, int bias) {
  const uint32_t m = code & ((1u << mantBits) - 1);
  const uint32_t e = (code >> mantBits) & ((1u << expBits) - 1);
  const bool negative = (code >> (expBits + mantBits)) & 1u;
  const double frac = static_cast<double>(m) / static_cast<double>(1u << mantBits);
  const double mag = e == 0 ? std::ldexp(frac, 1 - bias) : std::ldexp(1.0 + frac, int(e) - bias);
  return negative ? -mag : mag;
}

TEST(QuantFormatsTest, E2m1DecodesEveryNibble) {
  for (uint32_t c = 0; c < 16; ++c) {
    const float got = e2m1ToF32(static_cast<uint8_t>(c));
    EXPECT_EQ(static_cast<double>(got), minifloat(c, 2, 1, 1)) << c;
    EXPECT_EQ(std::signbit(got), c >= 8) << c;
    // Only the low nibble is read.
    EXPECT_EQ(e2m1ToF32(static_cast<uint8_t>(c | 0xa0)), got) << c;
  }
  EXPECT_EQ(e2m1ToF32(0x7), 6.0f);
  EXPECT_EQ(e2m1ToF32(0x1), 0.5f);
  EXPECT_EQ(e2m1ToF32(0xd), -3.0f);
}

TEST(QuantFormatsTest, E4m3fnDecodesEveryByte) {
  for (uint32_t c = 0; c < 256; ++c) {
    const float got = e4m3fnToF32(static_cast<uint8_t>(c));
    if ((c & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(got)) << c;
      continue;
    }
    EXPECT_EQ(static_cast<double>(got), minifloat(c, 4, 3, 7)) << c;
    EXPECT_EQ(std::signbit(got), c >= 128) << c;
  }
  EXPECT_EQ(e4m3fnToF32(0x7e), 448.0f);
  EXPECT_EQ(e4m3fnToF32(0xfe), -448.0f);
  EXPECT_EQ(e4m3fnToF32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3fnToF32(0x08), std::ldexp(1.0f, -6));
  EXPECT_EQ(e4m3fnToF32(0x38), 1.0f);
}

TEST(QuantFormatsTest, E8m0DecodesEveryByte) {
  for (uint32_t c = 0; c < 255; ++c)
    EXPECT_EQ(static_cast<double>(e8m0ToF32(static_cast<uint8_t>(c))),
              std::ldexp(1.0, static_cast<int>(c) - 127))
        << c;
  EXPECT_TRUE(std::isnan(e8m0ToF32(0xff)));
  EXPECT_EQ(e8m0ToF32(127), 1.0f);
  EXPECT_GT(e8m0ToF32(0), 0.0f) << "2^-127 is an f32 subnormal, not zero";
}

TEST(QuantFormatsTest, E4m3fnEncoderRoundsToNearestEvenAndSaturates) {
  for (uint32_t c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;
    const float v = e4m3fnToF32(static_cast<uint8_t>(c));
    EXPECT_EQ(f32ToE4m3fn(v), c) << c;
    // Halfway to the next magnitude rounds to the even code; just above goes up.
    if ((c & 0x7f) < 0x7e) {
      const double next = e4m3fnToF32(static_cast<uint8_t>(c + 1));
      const float mid = static_cast<float>((static_cast<double>(v) + next) / 2);
      const uint32_t even = (c & 1) ? c + 1 : c;
      EXPECT_EQ(f32ToE4m3fn(mid), even) << c;
      EXPECT_EQ(f32ToE4m3fn(std::nextafter(mid, 2 * mid)), c + 1) << c;
    }
  }
  EXPECT_EQ(f32ToE4m3fn(460.0f), 0x7e);
  EXPECT_EQ(f32ToE4m3fn(1e9f), 0x7e);
  EXPECT_EQ(f32ToE4m3fn(-1e9f), 0xfe);
  EXPECT_EQ(f32ToE4m3fn(std::nanf("")) & 0x7f, 0x7f);
}

TEST(QuantFormatsTest, E2m1EncoderRoundsToNearestEvenAndSaturates) {
  for (uint32_t c = 0; c < 16; ++c) EXPECT_EQ(f32ToE2m1(e2m1ToF32(static_cast<uint8_t>(c))), c);
  for (uint32_t c = 0; c < 7; ++c) {
    const double lo = e2m1ToF32(static_cast<uint8_t>(c));
    const double hi = e2m1ToF32(static_cast<uint8_t>(c + 1));
    const float mid = static_cast<float>((lo + hi) / 2);
    EXPECT_EQ(f32ToE2m1(mid), (c & 1) ? c + 1 : c) << c;
    EXPECT_EQ(f32ToE2m1(-mid), ((c & 1) ? c + 1 : c) | 8) << c;
    EXPECT_EQ(f32ToE2m1(std::nextafter(mid, 10.0f)), c + 1) << c;
  }
  EXPECT_EQ(f32ToE2m1(100.0f), 7);
  EXPECT_EQ(f32ToE2m1(-7.0f), 15);
}

}  // namespace
}  // namespace ingot
