// The W8A8 FP8 helper kernels' math on the host (kernels/fp8_w8a8.cuh): the E4M3 encoder
// against the runtime's, and the quantizer's and epilogue's thread loops, run thread by
// thread as a CTA would, against float64 references on fresh random inputs.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test/kernels/quant_gemv_test_data.h"
#include "test/kernels/w8a8_test_data.h"
#include "codegen/cuda/kernels/fp8_w8a8.cuh"
#include "runtime/backend/cpu/quant_formats.h"

namespace ingot::w8a8 {
namespace {

float fromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

TEST(W8a8Encode, MatchesTheRuntimeEncoderOnEveryHighHalfAndRandomLowBits) {
  std::mt19937 rng(std::random_device{}());
  for (uint32_t hi = 0; hi < 0x10000u; ++hi)
    for (uint32_t lo : {0u, 0x8000u, 0xffffu, static_cast<uint32_t>(rng() & 0xffffu)}) {
      const float f = fromBits((hi << 16) | lo);
      ASSERT_EQ(encodeE4m3(f), f32ToE4m3fn(f)) << "f = " << f << " bits " << std::hex
                                                << ((hi << 16) | lo);
    }
  // Every E4M3 value and every midpoint between neighbours (the ties).
  for (unsigned c = 0; c < 0x7e; ++c) {
    const float a = e4m3fnToF32(static_cast<uint8_t>(c)), b = e4m3fnToF32(static_cast<uint8_t>(c + 1));
    for (float f : {a, -a, 0.5f * (a + b), -0.5f * (a + b)})
      ASSERT_EQ(encodeE4m3(f), f32ToE4m3fn(f)) << f;
  }
}

using testing::emulateQuantizeRows;

TEST(W8a8Quantize, RowsMatchAFloat64ReferenceWithinE4m3Rounding) {
  std::mt19937 rng(std::random_device{}());
  for (int K : {1, 3, 16, 100, 576, 1000, 1536}) {
    const int rows = 7;
    const long codesStride = (K + kFp8Align - 1) / kFp8Align * kFp8Align;
    const long xStride = K + 5;
    std::vector<float> x(rows * xStride, std::nanf(""));
    std::lognormal_distribution<float> magnitude(0.0f, 2.0f);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int t = 0; t < rows; ++t) {
      const float rowScaleOf = t == 3 ? 0.0f : magnitude(rng);  // row 3: all zeros
      for (int k = 0; k < K; ++k) {
        // Some outlier columns, as real activations have.
        const float outlier = (rng() % 97 == 0) ? 30.0f : 1.0f;
        x[t * xStride + k] = rowScaleOf * normal(rng) * outlier;
      }
    }
    std::vector<unsigned char> codes(rows * codesStride, 0xAB);  // poison
    std::vector<float> scales(rows, std::nanf(""));
    QuantizeRowsParams p{x.data(), codes.data(), scales.data(), xStride, codesStride, K, rows};
    ASSERT_EQ(checkQuantizeRowsParams(p), nullptr);
    emulateQuantizeRows(p);
    for (int t = 0; t < rows; ++t) {
      double absmax = 0;
      for (int k = 0; k < K; ++k) absmax = std::max(absmax, std::fabs(double(x[t * xStride + k])));
      const double want = absmax > 0 ? absmax / 448.0 : 1.0;
      ASSERT_NEAR(scales[t], want, want * 1e-6) << "K=" << K << " row " << t;
      for (long k = 0; k < codesStride; ++k) {
        const uint8_t c = codes[t * codesStride + k];
        if (k >= K) {
          ASSERT_EQ(c, 0) << "padding column " << k << " of row " << t << ", K=" << K;
          continue;
        }
        ASSERT_NE(c & 0x7f, 0x7f) << "NaN code for a finite input";
        const double v = double(x[t * xStride + k]) / scales[t];
        const double got = e4m3fnToF32(c);
        // Half an E4M3 step at v's magnitude: 2^(e-3)/2 for normals, 2^-10 for subnormals,
        // plus the f32 error of x * (1 / s).
        const double a = std::fabs(v);
        const double halfStep = a < 0.015625 ? std::ldexp(1.0, -10)
                                             : std::ldexp(1.0, std::ilogb(a) - 4);
        ASSERT_LE(std::fabs(got - v), halfStep * (1 + 1e-5) + a * 1e-6)
            << "K=" << K << " row " << t << " col " << k << ": x/s = " << v << ", code " << int(c);
      }
    }
    // The row's absmax element lands on +-448 exactly.
    for (int t = 0; t < rows; ++t) {
      if (t == 3) continue;
      bool hit = false;
      for (int k = 0; k < K; ++k) hit |= (codes[t * codesStride + k] & 0x7f) == 0x7e;
      EXPECT_TRUE(hit) << "no code at 448 in row " << t << ", K=" << K;
    }
  }
}

TEST(W8a8Quantize, NanInARowReachesItsCodes) {
  std::vector<float> x = {1.0f, std::nanf(""), -2.0f, 0.5f};
  std::vector<unsigned char> codes(16, 0xAB);
  float scale = 0;
  QuantizeRowsParams p{x.data(), codes.data(), &scale, 4, 16, 4, 1};
  emulateQuantizeRows(p);
  EXPECT_TRUE(std::isnan(scale) || (codes[1] & 0x7f) == 0x7f) << "a NaN activation vanished";
}

TEST(W8a8Quantize, TinyRowsGetANormalScaleAndNoNanCodes) {
  // absmax below 448 * 2^-126 would make absmax / 448 subnormal: flushed to 0 on the device,
  // so 1 / s = inf and x * inf or 0 * inf. Such rows take the smallest normal scale, and a
  // subnormal activation (which the device flushes) is a signed zero code on both sides.
  static_assert(kMinRowScale == std::numeric_limits<float>::min(), "kMinRowScale is FLT_MIN");
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  const int K = 40, rows = 4;
  const long stride = 48;
  std::vector<float> x(rows * stride, std::nanf(""));
  const float tiny = std::numeric_limits<float>::min();
  for (int k = 0; k < K; ++k) {
    x[0 * stride + k] = unit(rng) * 100.0f * tiny;  // normal and subnormal, absmax < 448 FLT_MIN
    x[1 * stride + k] = unit(rng) * 0.5f * tiny;    // every element subnormal
    x[2 * stride + k] = k % 2 ? unit(rng) * 1e-20f : unit(rng) * 0.25f * tiny;  // mixed
    x[3 * stride + k] = unit(rng) * 447.0f * tiny;  // just below the threshold
  }
  x[0 * stride + 5] = -300.0f * tiny;  // a known absmax, normal
  std::vector<unsigned char> codes(rows * stride, 0xAB);
  std::vector<float> scales(rows, std::nanf(""));
  QuantizeRowsParams p{x.data(), codes.data(), scales.data(), stride, stride, K, rows};
  ASSERT_EQ(checkQuantizeRowsParams(p), nullptr);
  emulateQuantizeRows(p);
  EXPECT_EQ(scales[0], kMinRowScale);
  EXPECT_EQ(scales[1], 1.0f) << "a row of subnormals reads as all zeros";
  EXPECT_EQ(scales[3], kMinRowScale);
  for (int t = 0; t < rows; ++t) {
    ASSERT_TRUE(std::isnormal(scales[t])) << "row " << t << " scale " << scales[t];
    ASSERT_TRUE(std::isnormal(rowInverse(scales[t]))) << "row " << t;
    for (int k = 0; k < stride; ++k) {
      const unsigned c = codes[t * stride + k];
      if (k >= K) {
        ASSERT_EQ(c, 0u) << "padding column " << k << " of row " << t;
        continue;
      }
      const float v = x[t * stride + k];
      ASSERT_NE(c & 0x7fu, 0x7fu) << "NaN code for finite " << v << " in row " << t;
      if (std::fpclassify(v) == FP_SUBNORMAL) {
        ASSERT_EQ(c, std::signbit(v) ? 0x80u : 0u) << "subnormal " << v << " in row " << t;
        continue;
      }
      // A normal element: x * (1 / s), each correctly rounded, to E4M3 (at s = 2^-126 the
      // product x * 2^126 is exact).
      const float inv = 1.0f / scales[t];
      const float q = static_cast<float>(double(v) * double(inv));
      ASSERT_EQ(c, f32ToE4m3fn(q)) << "row " << t << " col " << k << ": x = " << v;
    }
  }
  // The absmax element of row 0 lands on 300 / 1 = 300's code: scale 2^-126 keeps it exact.
  EXPECT_EQ(codes[5], f32ToE4m3fn(-300.0f));
}

TEST(W8a8Quantize, BadParamsAreNamed) {
  float x[4] = {}, s = 0;
  unsigned char c[16] = {};
  QuantizeRowsParams p{x, c, &s, 4, 8, 4, 1};
  ASSERT_NE(checkQuantizeRowsParams(p), nullptr);
  EXPECT_NE(std::string(checkQuantizeRowsParams(p)).find("codes_stride"), std::string::npos);
  p.codes_stride = 16;
  p.x_stride = 2;
  EXPECT_NE(std::string(checkQuantizeRowsParams(p)).find("x_stride"), std::string::npos);
}

TEST(W8a8Epilogue, MatchesAFloat64Reference) {
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (bool channel : {true, false})
    for (bool withBias : {true, false}) {
      const int rows = 9, N = 37;
      const long accStride = 48, yStride = 40;
      std::vector<float> acc(rows * accStride), rs(rows), cs(N), bias(N);
      for (float &v : acc) v = 100.0f * normal(rng);
      for (float &v : rs) v = std::fabs(normal(rng)) * 0.01f;
      for (float &v : cs) v = std::fabs(normal(rng)) * 0.002f;
      for (float &v : bias) v = normal(rng);
      std::vector<float> y(rows * yStride, std::nanf(""));
      const float g = channel ? 1.0f : 0.75f;
      ScaleEpilogueParams p{acc.data(), rs.data(), channel ? cs.data() : nullptr,
                            withBias ? bias.data() : nullptr, y.data(), accStride, yStride, N,
                            rows, g};
      const long count = long(rows) * N;
      const unsigned grid = epilogueGridSize(count);
      // Every (CTA, thread) of the grid-stride loop, as the kernel walks them.
      for (unsigned b = 0; b < grid; ++b)
        for (int tid = 0; tid < kW8a8Threads; ++tid)
          for (long i = long(b) * kW8a8Threads + tid; i < count; i += long(grid) * kW8a8Threads)
            epilogueElement(p, i);
      for (int t = 0; t < rows; ++t)
        for (int n = 0; n < yStride; ++n) {
          if (n >= N) {
            EXPECT_TRUE(std::isnan(y[t * yStride + n])) << "wrote past N";
            continue;
          }
          const double want = double(acc[t * accStride + n]) * rs[t] * (channel ? cs[n] : 1.0) * g +
                              (withBias ? bias[n] : 0.0);
          ASSERT_NEAR(y[t * yStride + n], want, 1e-5 * std::fabs(want) + 1e-6)
              << "t=" << t << " n=" << n;
        }
    }
}

TEST(W8a8Linear, StaysWithinTheActivationRoundingOfTheWeightOnlyCpuReference) {
  // W8A8 differs from the CPU's weight-only fp8 linear only by each activation's E4M3
  // rounding: at most half a step, 2^-4 |x| (normal) or 2^-10 s (subnormal), per term.
  std::mt19937 rng(std::random_device{}());
  const int64_t T = 6, N = 40, K = 200, xStride = K + 3, yStride = N + 2;
  const quantgemv::testing::RandomQuantWeight w = quantgemv::testing::randomQuantWeight(
      rng, QuantFormat::kFp8, GroupScaleType::kF32, N, K, K, /*perChannel=*/true, 0);
  const std::vector<float> x = quantgemv::testing::randomActivations(rng, T, K, xStride);
  std::vector<float> bias(N);
  for (float &b : bias) b = std::normal_distribution<float>(0.0f, 1.0f)(rng);
  const std::vector<double> y =
      testing::emulateW8a8Linear(w.m, x, xStride, T, bias.data(), yStride);
  const std::vector<float> ref =
      quantgemv::testing::cpuQuantLinear(w.m, x, xStride, T, bias.data(), yStride);
  double err2 = 0, ref2 = 0;
  for (int64_t t = 0; t < T; ++t) {
    double absmax = 0;
    for (int64_t k = 0; k < K; ++k) absmax = std::max(absmax, std::fabs(double(x[t * xStride + k])));
    const double s = absmax / 448.0;
    for (int64_t n = 0; n < N; ++n) {
      double bound = 0;
      for (int64_t k = 0; k < K; ++k)
        bound += w.wabs[n * K + k] * (std::fabs(x[t * xStride + k]) / 16.0 + s / 1024.0);
      const double d = y[t * yStride + n] - ref[t * yStride + n];
      ASSERT_LE(std::fabs(d), bound * 1.001 + 1e-4) << "t=" << t << " n=" << n;
      err2 += d * d;
      ref2 += double(ref[t * yStride + n]) * ref[t * yStride + n];
    }
  }
  // Random-sign rounding errors: about 2^-4 / sqrt(3) / sqrt(K)-ish of the output; far
  // below the worst-case bound. Printed for docs/quantization.md.
  const double rel = std::sqrt(err2 / ref2);
  std::printf("[ w8a8 ] relative RMS error vs weight-only fp8 on N(0,1) activations: %.4f\n", rel);
  EXPECT_LT(rel, 0.05);
}

}  // namespace
}  // namespace ingot::w8a8
