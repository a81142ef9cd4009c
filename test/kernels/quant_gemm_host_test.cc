// The quantized GEMM's tile staging on the host (kernels/quant_gemm.cuh): every thread's
// dequantize-into-shared-memory step against the CPU backend's weights for every format,
// the activation tiles, and the whole tiled product (a scalar chain for the MMAs) against
// the CPU backend's QuantKernels, on fresh random inputs with poisoned outputs.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test/kernels/quant_gemm_test_data.h"

namespace ingot::quantgemm {
namespace {

using quantgemv::testing::RandomQuantWeight;
using testing::withFormat;

using Case = quantgemv::testing::FormatCase;

const std::vector<Case> &cases() {
  static const std::vector<Case> c = quantgemv::testing::formatCases({32, 16, 64, 16, 128, 32});
  return c;
}

/// K for a case: a multiple of its block that, with blocks of 16 (and fp8), leaves the last
/// K step half full; at least two K steps.
int64_t kFor(const Case &c) {
  if (c.block == 16 || c.format == QuantFormat::kFp8) return 208;  // 6.5 steps of 32
  return c.block >= 64 ? 256 : 224;
}

/// The CPU backend's dequantized weights w[n, k] (global and row scales left out, as the
/// GEMM's tiles hold them): its scalar QuantKernels applied to the K unit vectors.
std::vector<float> cpuWeights(QuantMatrix m) {
  m.global_scale = 1.0f;
  m.channel_scales = nullptr;
  const int64_t K = m.K, N = m.N;
  std::vector<float> eye(K * K, 0.0f);
  for (int64_t k = 0; k < K; ++k) eye[k * K + k] = 1.0f;
  const std::vector<float> y = quantgemv::testing::cpuQuantLinear(m, eye, K, K, nullptr, N);
  std::vector<float> w(N * K);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) w[n * K + k] = y[k * N + n];
  return w;
}

TEST(QuantGemmTiles, DequantizedWeightTilesAreTheCpuWeightsInBf16ForEveryFormat) {
  std::random_device rd;
  for (const Case &c : cases()) {
    const uint32_t seed = rd();
    const int64_t N = 200, K = kFor(c);  // N: a full and a partial tile of 128
    SCOPED_TRACE(std::string(c.name) + " K=" + std::to_string(K) + " seed " +
                 std::to_string(seed));
    std::mt19937 rng(seed);
    const RandomQuantWeight w = quantgemv::testing::randomQuantWeight(
        rng, c.format, c.scaleType, N, K, c.block, true, 8);  // codes only 8-byte aligned
    const std::vector<float> ref = cpuWeights(w.m);
    const QuantGemvParams p =
        quantgemv::testing::gemvParams(w.m, nullptr, K, nullptr, nullptr, N, 1);
    const bool int4 = c.format == QuantFormat::kInt4Min || c.format == QuantFormat::kInt4Zero;
    withFormat(static_cast<Format>(c.format), static_cast<ScaleType>(c.scaleType),
               [&](auto ft, auto st) {
      constexpr Format F = decltype(ft)::value;
      const int shift = F == Format::kFp8 ? 0 : quantgemv::log2Exact(p.block);
      for (int n0 = 0; n0 < N; n0 += kGemmTileN)
        for (int k0 = 0; k0 < K; k0 += kGemmTileK) {
          std::vector<unsigned short> tile(kGemmTileBElems, 0xffff);  // poison
          for (int tid = 0; tid < kGemmThreads; ++tid) {
            unsigned codes[4];
            loadWeightStage<F>(p, n0, k0, tid, codes);
            storeWeightStage<F, decltype(st)::value>(p, n0, k0, tid, shift, codes, tile.data());
          }
          for (int r = 0; r < kGemmTileN; ++r)
            for (int col = 0; col < kGemmLd; ++col) {
              const unsigned short got = tile[r * kGemmLd + col];
              const int64_t n = n0 + r, k = k0 + col;
              if (col >= kGemmTileK) {
                ASSERT_EQ(got, 0xffff) << "padding written at row " << r << " col " << col;
              } else if (n >= N || k >= K) {
                ASSERT_EQ(got, 0) << "w[" << n << ", " << k << "] past the matrix is not zero";
              } else {
                const float want = ref[n * K + k];
                if (int4) {
                  // The CPU's s q + m and the kernel's fma may differ by an f32 rounding of
                  // the terms (|s q| + |m| = wabs), then bf16 rounds (half a step, 2^-9).
                  const double tol = std::ldexp(std::fabs(want), -8) +
                                     std::ldexp(w.wabs[n * K + k], -22);
                  ASSERT_LE(std::fabs(double(bf16ToF32(got)) - want), tol)
                      << "w[" << n << ", " << k << "] = " << bf16ToF32(got) << ", CPU " << want;
                } else {
                  // fp8, nvfp4 and mxfp4 values are exact in bf16 (a -0 code reads as the
                  // CPU's +0 sum, so values, not bits, are compared).
                  ASSERT_EQ(bf16ToF32(got), bf16ToF32(f32ToBf16(want)))
                      << "w[" << n << ", " << k << "] = " << bf16ToF32(got) << ", CPU " << want;
                  ASSERT_EQ(bf16ToF32(got), want)
                      << "not exact in bf16: w[" << n << ", " << k << "]";
                }
              }
            }
        }
    });
  }
}

TEST(QuantGemmTiles, ActivationTilesAreTheInputsRoundedToBf16) {
  std::random_device rd;
  const uint32_t seed = rd();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const int64_t T = 70, K = 208, xStride = K + 4;  // a partial token tile and K step
  const std::vector<float> x = quantgemv::testing::randomActivations(rng, T, K, xStride);
  QuantGemvParams p{};
  p.x = x.data();
  p.x_stride = xStride;
  p.T = static_cast<int>(T);
  p.K = static_cast<int>(K);
  for (int t0 = 0; t0 < T; t0 += kGemmTileT)
    for (int k0 = 0; k0 < K; k0 += kGemmTileK) {
      std::vector<unsigned short> tile(kGemmTileAElems, 0xffff);
      for (int tid = 0; tid < kGemmThreads; ++tid) {
        float v[8];
        loadActStage(p, t0, k0, tid, v);
        storeActStage(tid, v, tile.data());
      }
      for (int r = 0; r < kGemmTileT; ++r)
        for (int col = 0; col < kGemmLd; ++col) {
          const int64_t t = t0 + r, k = k0 + col;
          const unsigned short got = tile[r * kGemmLd + col];
          if (col >= kGemmTileK) ASSERT_EQ(got, 0xffff) << "padding written";
          else if (t >= T || k >= K) ASSERT_EQ(got, 0) << "x[" << t << ", " << k << "]";
          else ASSERT_EQ(got, f32ToBf16(x[t * xStride + k])) << "x[" << t << ", " << k << "]";
        }
    }
}

TEST(QuantGemmTiles, Bf16RoundingMatchesTheRuntimeForEdgeValues) {
  std::mt19937 rng(12345);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    const uint32_t b = i < 4 ? (0x3f808000u + i) : bits(rng);  // ties first
    float f;
    std::memcpy(&f, &b, 4);
    const unsigned short got = floatToBf16Bits(f), want = f32ToBf16(f);
    if (std::isnan(f)) ASSERT_TRUE(std::isnan(bf16ToF32(got))) << b;
    else ASSERT_EQ(got, want) << std::hex << b;
  }
}

/// The emulated grid against the CPU QuantKernels (bf16 bound) and the bf16 reference
/// (f32 accumulation bound); y poisoned, padding columns must stay so.
void checkGemm(const Case &c, int64_t N, int64_t K, int64_t T, bool bias, bool perChannel,
               uint32_t seed) {
  SCOPED_TRACE(std::string(c.name) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
               " T=" + std::to_string(T) + " seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const RandomQuantWeight w = quantgemv::testing::randomQuantWeight(
      rng, c.format, c.scaleType, N, K, c.block, perChannel, 0);
  const int64_t xStride = K + 4, yStride = N + 3;
  const std::vector<float> x = quantgemv::testing::randomActivations(rng, T, K, xStride);
  std::vector<float> biasV(N);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float &b : biasV) b = normal(rng);
  std::vector<float> y(T * yStride, std::numeric_limits<float>::quiet_NaN());
  const QuantGemvParams p = quantgemv::testing::gemvParams(
      w.m, x.data(), xStride, bias ? biasV.data() : nullptr, y.data(), yStride, T);
  const Format f = static_cast<Format>(c.format);
  const ScaleType s = static_cast<ScaleType>(c.scaleType);
  const char *err = checkQuantGemmParams(p, f);
  ASSERT_EQ(err, nullptr) << err;
  testing::emulateGemm(p, f, s);
  const std::vector<float> cpu = quantgemv::testing::cpuQuantLinear(
      w.m, x, xStride, T, bias ? biasV.data() : nullptr, yStride);
  std::vector<double> mag;
  const std::vector<double> ref = testing::bf16Reference(p, testing::bf16Weights(p, f, s), &mag);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t n = 0; n < N; ++n) {
      const float got = y[t * yStride + n];
      ASSERT_LE(std::fabs(got - ref[t * N + n]), 1e-5 * mag[t * N + n] + 1e-6)
          << "y[" << t << ", " << n << "] = " << got << ", bf16 reference " << ref[t * N + n];
      ASSERT_LE(std::fabs(double(got) - cpu[t * yStride + n]),
                testing::cpuTolerance(w, x, xStride, t, n))
          << "y[" << t << ", " << n << "] = " << got << ", CPU " << cpu[t * yStride + n];
    }
    for (int64_t n = N; n < yStride; ++n) ASSERT_TRUE(std::isnan(y[t * yStride + n])) << t;
  }
}

TEST(QuantGemmEmulation, EveryFormatMatchesTheCpuKernelsWithPartialTiles) {
  std::random_device rd;
  for (const Case &c : cases()) checkGemm(c, 150, kFor(c), 70, true, true, rd());
}

TEST(QuantGemmEmulation, PerTensorFp8AndNoBiasAndASingleTile) {
  std::random_device rd;
  checkGemm(cases()[6], 33, 64, 5, false, false, rd());
  checkGemm(cases()[0], 128, 64, 64, false, false, rd());
}

TEST(QuantGemmShape, Fp8WithKEightModSixteenIsGemvOnlyAndTheRestIsTheGemvsRule) {
  // K = 120: the GEMV reads 8-byte chunks; a GEMM stage's 16 codes at column 112 would
  // read 8 bytes of the next row.
  EXPECT_EQ(quantgemv::checkQuantGemvShape(Format::kFp8, 120, 120), nullptr);
  const char *gemm = checkQuantGemmShape(Format::kFp8, 120, 120);
  ASSERT_NE(gemm, nullptr);
  EXPECT_NE(std::string(gemm).find("multiple of 16"), std::string::npos) << gemm;
  EXPECT_EQ(checkQuantGemmShape(Format::kFp8, 128, 128), nullptr);
  // What the GEMV refuses the GEMM refuses with the GEMV's reason.
  EXPECT_STREQ(checkQuantGemmShape(Format::kFp8, 100, 100),
               quantgemv::checkQuantGemvShape(Format::kFp8, 100, 100));
  EXPECT_NE(checkQuantGemmShape(Format::kNvfp4, 64, 32), nullptr);
  EXPECT_EQ(checkQuantGemmShape(Format::kMxfp4, 64, 32), nullptr);
}

}  // namespace
}  // namespace ingot::quantgemm
