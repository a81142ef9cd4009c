// The shared E4M3FN codec of the CUDA kernels (kernels/e4m3.cuh) on the host: decode and
// encode against the CPU's reference (runtime/backend/cpu/quant_formats.h) on every code,
// every f32 high half with fresh random low halves, and every tie; and the three kernel
// headers' public names for it (kv_fp8.cuh, quant_gemv.cuh, fp8_w8a8.cuh) as the same codec.
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "codegen/cuda/kernels/e4m3.cuh"
#include "codegen/cuda/kernels/fp8_w8a8.cuh"
#include "codegen/cuda/kernels/kv_fp8.cuh"
#include "codegen/cuda/kernels/quant_gemv.cuh"
#include "runtime/backend/cpu/quant_formats.h"

namespace ingot::e4m3 {
namespace {

uint32_t bitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
float fromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

TEST(E4m3Codec, BitCastsRoundTripEveryHighHalf) {
  std::mt19937 rng(std::random_device{}());
  for (uint32_t hi = 0; hi < 0x10000u; ++hi) {
    const uint32_t bits = (hi << 16) | (rng() & 0xffffu);
    ASSERT_EQ(floatToBits(bitsToFloat(bits)), bits) << std::hex << bits;
    ASSERT_EQ(bitsOf(bitsToFloat(bits)), bits) << std::hex << bits;
  }
}

TEST(E4m3Codec, DecodeIsTheReferenceOnEveryCodeAndNaNCodesReadAs480) {
  for (unsigned c = 0; c < 256; ++c) {
    const float got = decode(c);
    if ((c & 0x7fu) == 0x7fu) {
      EXPECT_EQ(got, (c & 0x80u) ? -480.0f : 480.0f) << "NaN code " << c;
    } else {
      EXPECT_EQ(bitsOf(got), bitsOf(e4m3fnToF32(static_cast<uint8_t>(c)))) << "code " << c;
    }
    // Only the low 8 bits are the code.
    EXPECT_EQ(bitsOf(decode(c | 0x5a00u)), bitsOf(got)) << "code " << c;
  }
}

TEST(E4m3Codec, EncodeIsTheReferenceOnEveryHighHalfAndRandomLowHalves) {
  std::mt19937 rng(std::random_device{}());
  for (uint32_t hi = 0; hi < 0x10000u; ++hi)
    for (uint32_t lo : {0u, 0x8000u, 0xffffu, static_cast<uint32_t>(rng() & 0xffffu),
                        static_cast<uint32_t>(rng() & 0xffffu)}) {
      const uint32_t bits = (hi << 16) | lo;
      const float f = fromBits(bits);
      ASSERT_EQ(encode(f), f32ToE4m3fn(f)) << "f32 bits 0x" << std::hex << bits;
    }
}

TEST(E4m3Codec, EncodeRoundsTiesToEvenAndSaturates) {
  // Every finite code encodes to itself, and every midpoint between neighbouring codes to
  // the even neighbour; one f32 ulp either side of a midpoint goes to the nearer one. Past
  // 448 (the 448..480 tie included) everything saturates.
  for (unsigned c = 0; c < 0x7eu; ++c)
    for (unsigned sign : {0u, 0x80u}) {
      const float a = decode(c | sign), b = decode((c + 1) | sign);
      ASSERT_EQ(encode(a), c | sign) << "code " << c;
      const float mid = 0.5f * (a + b);  // exact: neighbours differ in one mantissa ulp
      const unsigned even = (c & 1u) ? c + 1 : c;
      ASSERT_EQ(encode(mid), even | sign) << "tie after code " << c;
      ASSERT_EQ(encode(mid), f32ToE4m3fn(mid)) << "tie after code " << c;
      const float toA = fromBits(bitsOf(mid) - 1), toB = fromBits(bitsOf(mid) + 1);
      ASSERT_EQ(encode(toA), c | sign) << "below the tie after code " << c;
      ASSERT_EQ(encode(toB), (c + 1) | sign) << "above the tie after code " << c;
    }
  const float inf = std::numeric_limits<float>::infinity();
  for (float f : {448.0f, 463.99997f, 464.0f, 480.0f, 1e30f, inf})
    for (float s : {1.0f, -1.0f}) EXPECT_EQ(encode(s * f), s > 0 ? 0x7eu : 0xfeu) << s * f;
  EXPECT_EQ(encode(std::numeric_limits<float>::quiet_NaN()), 0x7fu);
  EXPECT_EQ(encode(-std::numeric_limits<float>::quiet_NaN()), 0x7fu);
  // f32 subnormals and everything below 2^-10 (half the smallest code) are signed zeros.
  for (float f : {std::numeric_limits<float>::denorm_min(), 1e-39f, 0x1p-10f, 0.0f}) {
    EXPECT_EQ(encode(f), 0x00u) << f;
    EXPECT_EQ(encode(-f), 0x80u) << f;
  }
}

TEST(E4m3Codec, KernelHeadersUseThisCodec) {
  std::mt19937 rng(std::random_device{}());
  for (unsigned c = 0; c < 256; ++c) {
    EXPECT_EQ(bitsOf(kvfp8::kvFp8Value(c)), bitsOf(decode(c))) << c;
    EXPECT_EQ(bitsOf(quantgemv::e4m3WeightValue(c)), bitsOf(decode(c))) << c;
    // The nvfp4 block-scale decoder differs on purpose: its NaN codes are NaN.
    const float scale = quantgemv::e4m3ScaleValue(c);
    if ((c & 0x7fu) == 0x7fu)
      EXPECT_NE(scale, scale) << c;
    else
      EXPECT_EQ(bitsOf(scale), bitsOf(decode(c))) << c;
  }
  for (int i = 0; i < 1 << 20; ++i) {
    const float f = fromBits(static_cast<uint32_t>(rng()));
    ASSERT_EQ(kvfp8::kvFp8Code(f), encode(f)) << f;
    ASSERT_EQ(w8a8::encodeE4m3(f), encode(f)) << f;
  }
}

}  // namespace
}  // namespace ingot::e4m3
