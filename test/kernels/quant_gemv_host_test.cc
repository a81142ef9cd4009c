// The quantized GEMV kernels' math on the host (kernels/quant_gemv.cuh): the decoders against
// the runtime's exact ones, and the kernel's per-lane loop plus its warp butterfly, emulated
// lane by lane, against the CPU backend's scalar QuantKernels on fresh random weights.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test/kernels/quant_gemv_test_data.h"
#include "codegen/cuda/kernels/quant_gemv.cuh"

namespace ingot::quantgemv {
namespace {

using testing::RandomQuantWeight;

uint32_t bitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

/// Same value, or both NaN.
void expectSameFloat(float got, float want, const std::string &what) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what << ": " << got;
  } else {
    EXPECT_EQ(bitsOf(got), bitsOf(want)) << what << ": " << got << " vs " << want;
  }
}

TEST(QuantGemvDecode, E2m1MatchesTheRuntimeDecoderForEveryCode) {
  for (unsigned c = 0; c < 16; ++c)
    expectSameFloat(e2m1Value(c), e2m1ToF32(static_cast<uint8_t>(c)), "e2m1 " + std::to_string(c));
}

TEST(QuantGemvDecode, E4m3WeightsMatchTheRuntimeAndReadNaNCodesAs480) {
  for (unsigned c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) {
      EXPECT_EQ(e4m3WeightValue(c), (c & 0x80) ? -480.0f : 480.0f) << c;
      continue;
    }
    expectSameFloat(e4m3WeightValue(c), e4m3fnToF32(static_cast<uint8_t>(c)),
                    "e4m3 " + std::to_string(c));
  }
}

TEST(QuantGemvDecode, E4m3AndE8m0ScalesMatchTheRuntimeNaNIncluded) {
  for (unsigned c = 0; c < 256; ++c) {
    expectSameFloat(e4m3ScaleValue(c), e4m3fnToF32(static_cast<uint8_t>(c)),
                    "e4m3 scale " + std::to_string(c));
    expectSameFloat(e8m0Value(c), e8m0ToF32(static_cast<uint8_t>(c)), "e8m0 " + std::to_string(c));
  }
}

TEST(QuantGemvDecode, HalfAndBf16MatchTheRuntimeForEveryBitPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto b = static_cast<uint16_t>(h);
    const float f = halfToFloat(b), want = f16ToF32(b);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(f)) << h;
    } else {
      ASSERT_EQ(bitsOf(f), bitsOf(want)) << "f16 " << h;
    }
    ASSERT_EQ(bitsOf(bf16ToFloat(b)), bitsOf(ingot::bf16ToF32(b))) << "bf16 " << h;
  }
}

/// Lane `lane` of the 32-lane butterfly (__shfl_xor_sync 16, 8, 4, 2, 1) on the host.
float butterfly(std::vector<float> v) {
  for (int o = 16; o > 0; o >>= 1) {
    std::vector<float> next(32);
    for (int l = 0; l < 32; ++l) next[l] = v[l] + v[l ^ o];
    v = next;
  }
  return v[0];
}

template <Format F, ScaleType S, int MT, int NR, int CB>
void emulateTile(const QuantGemvParams &p, int n0, int t0) {
  std::vector<std::vector<float>> lanes(MT * NR, std::vector<float>(32));
  for (int lane = 0; lane < 32; ++lane) {
    float acc[MT][NR];
    laneRowDot<F, S, MT, NR, CB>(p, n0, t0, lane, acc);
    for (int i = 0; i < MT; ++i)
      for (int r = 0; r < NR; ++r) lanes[i * NR + r][lane] = acc[i][r];
  }
  for (int r = 0; r < NR; ++r) {
    const int n = n0 + r;
    if (n >= p.N) continue;
    for (int i = 0; i < MT; ++i)
      if (t0 + i < p.T)
        p.y[static_cast<long>(t0 + i) * p.y_stride + n] =
            finishOutput(butterfly(lanes[i * NR + r]), rowScale(p, n), p.bias, n);
  }
}

/// What the quantGemv kernel computes, warp by warp, in the kernel's order.
template <Format F, ScaleType S>
void emulateKernel(const QuantGemvParams &p) {
  constexpr int NR = kQuantRowsPerWarp;
  const bool wide = sixteenByteChunks(p, F == Format::kFp8);
  for (int n0 = 0; n0 < p.N; n0 += NR) {
    if (p.T == 1) {
      wide ? emulateTile<F, S, 1, NR, 16>(p, n0, 0) : emulateTile<F, S, 1, NR, 8>(p, n0, 0);
      continue;
    }
    for (int n = n0; n < n0 + NR && n < p.N; ++n)
      for (int t0 = 0; t0 < p.T; t0 += kQuantTileT)
        wide ? emulateTile<F, S, kQuantTileT, 1, 16>(p, n, t0)
             : emulateTile<F, S, kQuantTileT, 1, 8>(p, n, t0);
  }
}

void emulate(const QuantGemvParams &p, Format f, ScaleType s) {
  switch (f) {
    case Format::kInt4Min:
      if (s == ScaleType::kF16) return emulateKernel<Format::kInt4Min, ScaleType::kF16>(p);
      if (s == ScaleType::kBF16) return emulateKernel<Format::kInt4Min, ScaleType::kBF16>(p);
      return emulateKernel<Format::kInt4Min, ScaleType::kF32>(p);
    case Format::kInt4Zero:
      if (s == ScaleType::kF16) return emulateKernel<Format::kInt4Zero, ScaleType::kF16>(p);
      if (s == ScaleType::kBF16) return emulateKernel<Format::kInt4Zero, ScaleType::kBF16>(p);
      return emulateKernel<Format::kInt4Zero, ScaleType::kF32>(p);
    case Format::kFp8: return emulateKernel<Format::kFp8, ScaleType::kF16>(p);
    case Format::kNvfp4: return emulateKernel<Format::kNvfp4, ScaleType::kF16>(p);
    case Format::kMxfp4: return emulateKernel<Format::kMxfp4, ScaleType::kF16>(p);
  }
}

using Case = testing::FormatCase;

const std::vector<Case> &cases() {
  static const std::vector<Case> c = testing::formatCases({32, 64, 16, 128, 16, 32});
  return c;
}

/// Runs the emulated kernel and the CPU reference on fresh random inputs; outputs poisoned.
void checkAgainstCpu(const Case &c, int64_t N, int64_t K, int64_t T, bool bias, bool perChannel,
                     int codeOffset, uint32_t seed) {
  SCOPED_TRACE(std::string(c.name) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
               " T=" + std::to_string(T) + " codes+" + std::to_string(codeOffset) +
               " seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const RandomQuantWeight w =
      testing::randomQuantWeight(rng, c.format, c.scaleType, N, K, c.block, perChannel, codeOffset);
  const int64_t xStride = K + 4, yStride = N + 3;
  // x rows 16-byte aligned, as the kernel requires.
  std::vector<float> xStorage = testing::randomActivations(rng, T, K, xStride);
  std::vector<float> biasV(N);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float &b : biasV) b = normal(rng);
  const float *biasP = bias ? biasV.data() : nullptr;
  std::vector<float> y(T * yStride, std::numeric_limits<float>::quiet_NaN());
  const QuantGemvParams p =
      testing::gemvParams(w.m, xStorage.data(), xStride, biasP, y.data(), yStride, T);
  const Format f = static_cast<Format>(c.format);
  const char *err = checkQuantGemvParams(p, f);
  ASSERT_EQ(err, nullptr) << err;
  emulate(p, f, static_cast<ScaleType>(c.scaleType));
  const std::vector<float> ref = testing::cpuQuantLinear(w.m, xStorage, xStride, T, biasP, yStride);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      const float got = y[t * yStride + n], want = ref[t * yStride + n];
      const double tol = testing::outputTolerance(w, xStorage, xStride, t, n);
      ASSERT_LE(std::fabs(double(got) - want), tol)
          << "y[" << t << ", " << n << "] = " << got << ", CPU " << want;
    }
  // Untouched padding columns stay poisoned: the kernel writes only y[t, 0..N).
  for (int64_t t = 0; t < T; ++t) EXPECT_TRUE(std::isnan(y[t * yStride + N])) << t;
}

TEST(QuantGemvEmulation, EveryFormatMatchesTheCpuKernelsForDecodeBatches) {
  std::random_device rd;
  for (const Case &c : cases())
    for (int64_t T : {1, 3, 8}) {
      // fp8: per-channel scales, and a per-tensor one for T = 3.
      const int64_t K = c.format == QuantFormat::kFp8 ? 400 : 512;
      checkAgainstCpu(c, 37, K, T, T != 3, T != 3, 0, rd());
    }
}

TEST(QuantGemvEmulation, EightByteChunksWhenARowIsNotWholeSixteenBytes) {
  // K = 272 (blocks of 16, fp8): a 4-bit row is 136 bytes. Codes that are only 8-byte
  // aligned take the same path with whole 16-byte rows.
  std::random_device rd;
  for (const Case &c : cases()) {
    if (c.block == 16 || c.format == QuantFormat::kFp8) {
      checkAgainstCpu(c, 11, 272, 1, false, false, 0, rd());
      checkAgainstCpu(c, 11, 272, 5, true, true, 8, rd());
    } else {
      checkAgainstCpu(c, 9, 4 * c.block, 2, true, true, 8, rd());
    }
  }
}

TEST(QuantGemvEmulation, Fp8WithKEightModSixteenReadsEightByteChunks) {
  // K = 120 and 200: whole 8-byte rows, not 16; the activation rows stay float4-aligned.
  std::random_device rd;
  const Case &fp8 = cases()[6];
  ASSERT_EQ(fp8.format, QuantFormat::kFp8);
  for (int64_t K : {120, 200}) {
    checkAgainstCpu(fp8, 13, K, 1, true, true, 0, rd());
    checkAgainstCpu(fp8, 13, K, 6, false, false, 8, rd());
  }
}

TEST(QuantGemvEmulation, LargerBatchesLoopOverTokenTiles) {
  std::random_device rd;
  for (const Case &c : {cases()[0], cases()[6], cases()[7]})
    checkAgainstCpu(c, 13, 256, 19, true, false, 0, rd());
}

TEST(QuantGemvEmulation, ATokensRowIsBitwiseTheSameAloneOrBatched) {
  // Each token's sum runs the same per-lane fma chain and butterfly whatever T and the tile.
  std::random_device rd;
  for (const Case &c : cases()) {
    const uint32_t seed = rd();
    SCOPED_TRACE(std::string(c.name) + " seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    const int64_t N = 21, K = 256, T = 6;
    const RandomQuantWeight w =
        testing::randomQuantWeight(rng, c.format, c.scaleType, N, K, c.block, true, 0);
    const std::vector<float> x = testing::randomActivations(rng, T, K, K);
    std::vector<float> batched(T * N, std::numeric_limits<float>::quiet_NaN());
    const Format f = static_cast<Format>(c.format);
    const ScaleType s = static_cast<ScaleType>(c.scaleType);
    emulate(testing::gemvParams(w.m, x.data(), K, nullptr, batched.data(), N, T), f, s);
    for (int64_t t = 0; t < T; ++t) {
      std::vector<float> alone(N, std::numeric_limits<float>::quiet_NaN());
      emulate(testing::gemvParams(w.m, x.data() + t * K, K, nullptr, alone.data(), N, 1), f, s);
      for (int64_t n = 0; n < N; ++n)
        ASSERT_EQ(bitsOf(alone[n]), bitsOf(batched[t * N + n])) << "t " << t << " n " << n;
    }
  }
}

TEST(QuantGemvEmulation, MultiRowLanesSumEachRowAsTheSingleRowLoopDoes) {
  // laneRowDot over NR rows at once (a row past N repeating row N - 1) gives each row the
  // very sums of the one-row loop: kQuantRowsPerWarp may change without changing results.
  std::random_device rd;
  const uint32_t seed = rd();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const int64_t N = 5, K = 512;
  const RandomQuantWeight w = testing::randomQuantWeight(rng, QuantFormat::kNvfp4,
                                                         GroupScaleType::kF16, N, K, 16, true, 0);
  const std::vector<float> x = testing::randomActivations(rng, 3, K, K);
  std::vector<float> y(3 * N);
  const QuantGemvParams p = testing::gemvParams(w.m, x.data(), K, nullptr, y.data(), N, 3);
  for (int lane = 0; lane < 32; ++lane)
    for (int n0 : {0, 3}) {  // rows 3, 4 and a repeat of 4
      float multi[2][3];
      laneRowDot<Format::kNvfp4, ScaleType::kF16, 2, 3, 16>(p, n0, 1, lane, multi);
      for (int r = 0; r < 3; ++r) {
        const int n = n0 + r < N ? n0 + r : static_cast<int>(N) - 1;
        float one[2][1];
        laneRowDot<Format::kNvfp4, ScaleType::kF16, 2, 1, 16>(p, n, 1, lane, one);
        for (int i = 0; i < 2; ++i)
          ASSERT_EQ(bitsOf(multi[i][r]), bitsOf(one[i][0])) << "lane " << lane << " row " << n;
      }
    }
}

TEST(QuantGemvParamsCheck, RejectsBadShapesNamingTheProblem) {
  float x[64] __attribute__((aligned(16))) = {}, y[8] = {};
  uint8_t codes[64] __attribute__((aligned(16))) = {};
  uint16_t scales[8] = {}, zeros[8] = {};
  QuantGemvParams p{};
  p.codes = codes, p.scales = scales, p.zeros = zeros, p.x = x, p.y = y;
  p.N = 1, p.K = 32, p.T = 1, p.block = 16, p.x_stride = 32, p.y_stride = 1;
  EXPECT_EQ(checkQuantGemvParams(p, Format::kInt4Zero), nullptr);
  QuantGemvParams bad = p;
  bad.K = 24;
  EXPECT_STREQ(checkQuantGemvParams(bad, Format::kInt4Zero), "quant gemv: K must be a multiple of 16");
  bad.block = bad.K = 20;  // fp8: 8-byte chunks need K a multiple of 8
  EXPECT_NE(std::string(checkQuantGemvParams(bad, Format::kFp8)).find("multiple of 8"),
            std::string::npos);
  bad.block = bad.K = 24;
  EXPECT_EQ(checkQuantGemvParams(bad, Format::kFp8), nullptr);
  bad = p;
  bad.block = 24;
  EXPECT_NE(std::string(checkQuantGemvParams(bad, Format::kInt4Min)).find("power of two"),
            std::string::npos);
  bad = p;
  bad.block = 32;
  EXPECT_NE(std::string(checkQuantGemvParams(bad, Format::kNvfp4)).find("nvfp4 blocks are 16"),
            std::string::npos);
  bad = p;
  bad.zeros = nullptr;
  EXPECT_NE(std::string(checkQuantGemvParams(bad, Format::kInt4Min)).find("zeros"),
            std::string::npos);
  bad = p;
  bad.x = x + 1;
  EXPECT_NE(std::string(checkQuantGemvParams(bad, Format::kInt4Min)).find("16-byte aligned"),
            std::string::npos);
  bad = p;
  bad.block = 16;
  EXPECT_NE(std::string(checkQuantGemvParams(bad, Format::kFp8)).find("block must be K"),
            std::string::npos);
  bad = p;
  bad.T = 0;
  EXPECT_NE(std::string(checkQuantGemvParams(bad, Format::kMxfp4)).find("positive"),
            std::string::npos);
}

}  // namespace
}  // namespace ingot::quantgemv
