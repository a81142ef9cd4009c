// Quantized linear kernels of every SimdLevel this CPU has against float64 references
// computed from each format's definition, and their batch invariance.
#include "runtime/backend/cpu/quant_linear.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "runtime/backend/cpu/half_float.h"
#include "runtime/backend/cpu/quant_formats.h"

namespace ingot {
namespace {

std::vector<SimdLevel> supportedLevels() {
  std::vector<SimdLevel> levels;
  for (int l = 0; l <= static_cast<int>(detectSimdLevel()); ++l)
    levels.push_back(static_cast<SimdLevel>(l));
  return levels;
}

const float kPoison = std::numeric_limits<float>::quiet_NaN();

const char* formatName(QuantFormat f) {
  switch (f) {
    case QuantFormat::kInt4Min: return "int4-min";
    case QuantFormat::kInt4Zero: return "int4-zero";
    case QuantFormat::kFp8: return "fp8";
    case QuantFormat::kNvfp4: return "nvfp4";
    case QuantFormat::kMxfp4: return "mxfp4";
  }
  return "?";
}

/// A random quantized matrix with its storage, its exact weights and the magnitudes of the
/// terms an f32 evaluation sums (for the error bound).
struct TestMatrix {
  QuantMatrix m;
  std::vector<uint8_t> codes, scales, zeros;
  std::vector<float> channel;
  std::vector<double> w;     // [N, K] from the definition
  std::vector<double> wabs;  // [N, K] |terms| per unit x
};

void putGroupValue(std::vector<uint8_t>& out, GroupScaleType type, int64_t i, float v) {
  if (type == GroupScaleType::kF32) {
    std::memcpy(&out[4 * i], &v, 4);
    return;
  }
  const uint16_t h = type == GroupScaleType::kF16 ? f32ToF16(v) : f32ToBf16(v);
  std::memcpy(&out[2 * i], &h, 2);
}

double groupValue(const std::vector<uint8_t>& in, GroupScaleType type, int64_t i) {
  if (type == GroupScaleType::kF32) {
    float f;
    std::memcpy(&f, &in[4 * i], 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, &in[2 * i], 2);
  return type == GroupScaleType::kF16 ? f16ToF32(h) : bf16ToF32(h);
}

TestMatrix randomMatrix(QuantFormat f, int64_t N, int64_t K, int64_t block, GroupScaleType st,
                        bool perTensor, std::mt19937& rng) {
  TestMatrix t;
  QuantMatrix& m = t.m;
  m.format = f;
  m.N = N;
  m.K = K;
  m.block = f == QuantFormat::kFp8 ? K : block;
  m.scale_type = st;
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  t.codes.resize(N * m.rowBytes());
  for (uint8_t& c : t.codes) {
    c = static_cast<uint8_t>(byte(rng));
    if (f == QuantFormat::kFp8 && (c & 0x7f) == 0x7f) c ^= 1;  // no NaN weights
  }
  const int64_t groups = m.groups();
  const int64_t valueBytes = st == GroupScaleType::kF32 ? 4 : 2;
  switch (f) {
    case QuantFormat::kInt4Min:
    case QuantFormat::kInt4Zero:
      t.scales.resize(N * groups * valueBytes);
      t.zeros.resize(N * groups * valueBytes);
      for (int64_t i = 0; i < N * groups; ++i) {
        putGroupValue(t.scales, st, i, 0.1f * unit(rng));
        putGroupValue(t.zeros, st, i,
                      f == QuantFormat::kInt4Min ? unit(rng) : 7.5f + 8.0f * unit(rng));
      }
      break;
    case QuantFormat::kFp8:
      if (perTensor) {
        m.global_scale = 0.01f * (1.5f + unit(rng));
      } else {
        t.channel.resize(N);
        for (float& s : t.channel) s = 0.01f * unit(rng);
        m.channel_scales = t.channel.data();
      }
      break;
    case QuantFormat::kNvfp4:
      t.scales.resize(N * groups);
      for (uint8_t& s : t.scales) {
        s = static_cast<uint8_t>(byte(rng) & 0x7f);  // positive, as quantizers write them
        if (s == 0x7f) s = 0x7e;
      }
      m.global_scale = 0.01f * (1.5f + unit(rng));
      break;
    case QuantFormat::kMxfp4:
      t.scales.resize(N * groups);
      for (uint8_t& s : t.scales) s = static_cast<uint8_t>(100 + byte(rng) % 40);
      break;
  }
  m.codes = t.codes.data();
  m.scales = t.scales.empty() ? nullptr : t.scales.data();
  m.zeros = t.zeros.empty() ? nullptr : t.zeros.data();

  t.w.resize(N * K);
  t.wabs.resize(N * K);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const uint8_t* row = t.codes.data() + n * m.rowBytes();
      const uint8_t nib = (k & 1) ? row[k / 2] >> 4 : row[k / 2] & 15;
      const int64_t gi = n * groups + k / m.block;
      double w = 0, wabs = 0;
      switch (f) {
        case QuantFormat::kInt4Min: {
          const double s = groupValue(t.scales, st, gi), mn = groupValue(t.zeros, st, gi);
          w = s * nib + mn;
          wabs = std::abs(s) * nib + std::abs(mn);
          break;
        }
        case QuantFormat::kInt4Zero: {
          const double s = groupValue(t.scales, st, gi), z = groupValue(t.zeros, st, gi);
          w = s * (nib - z);
          wabs = std::abs(s) * (nib + std::abs(z));
          break;
        }
        case QuantFormat::kFp8:
          w = static_cast<double>(e4m3fnToF32(row[k])) * (perTensor ? 1.0 : t.channel[n]) *
              m.global_scale;
          break;
        case QuantFormat::kNvfp4:
          w = static_cast<double>(e2m1ToF32(nib)) * e4m3fnToF32(t.scales[gi]) * m.global_scale;
          break;
        case QuantFormat::kMxfp4:
          w = static_cast<double>(e2m1ToF32(nib)) * e8m0ToF32(t.scales[gi]);
          break;
      }
      t.w[n * K + k] = w;
      t.wabs[n * K + k] = wabs > 0 ? wabs : std::abs(w);
    }
  return t;
}

/// Runs table k on x [T, K] over rows [n0, n1) into y [T, N].
void runLinear(const QuantKernels& k, const QuantMatrix& m, const std::vector<float>& x, int64_t T,
               const float* bias, std::vector<float>& y, int64_t n0, int64_t n1) {
  const int64_t stride = k.prepared_floats(m);
  std::vector<float> xq(T * stride, kPoison);
  for (int64_t t = 0; t < T; ++t) k.prepare(m, x.data() + t * m.K, xq.data() + t * stride);
  QuantLinearArgs a;
  a.w = &m;
  a.xq = xq.data();
  a.xq_stride = stride;
  a.bias = bias;
  a.y = y.data();
  a.y_stride = m.N;
  a.T = T;
  k.linear(a, n0, n1);
}

struct Shape {
  QuantFormat format;
  int64_t block;
  std::vector<int64_t> ks;
};

std::vector<Shape> shapes() {
  return {
      {QuantFormat::kInt4Min, 32, {32, 96, 160, 576}},
      {QuantFormat::kInt4Min, 64, {64, 192, 576}},
      {QuantFormat::kInt4Min, 128, {128, 384, 640}},
      {QuantFormat::kInt4Zero, 32, {32, 224, 576}},
      {QuantFormat::kInt4Zero, 128, {128, 1024}},
      {QuantFormat::kInt4Zero, 16, {16, 48, 80}},
      {QuantFormat::kInt4Min, 256, {256, 768}},
      {QuantFormat::kFp8, 0, {1, 7, 31, 32, 33, 100, 576}},
      {QuantFormat::kNvfp4, 16, {16, 48, 144, 272, 576}},
      {QuantFormat::kMxfp4, 32, {32, 96, 160, 576}},
  };
}

TEST(QuantLinearTest, EveryFormatMatchesItsFloat64DefinitionOnEveryLevel) {
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  int cases = 0;
  for (const Shape& shape : shapes())
    for (int64_t K : shape.ks)
      for (int64_t N : {1, 3, 8, 13, 37})
        for (int64_t T : {1, 2, 5, 9}) {
          const int variant = cases++;
          // Scale element types and fp8 per-tensor scales rotate through the cases.
          const GroupScaleType st = static_cast<GroupScaleType>(variant % 3);
          const bool perTensor = variant % 4 == 1;
          TestMatrix tm = randomMatrix(shape.format, N, K, shape.block, st, perTensor, rng);
          std::vector<float> x(T * K), bias(N);
          for (float& v : x) v = unit(rng);
          for (float& v : bias) v = unit(rng);
          const bool withBias = variant % 2 == 0;
          for (SimdLevel level : supportedLevels()) {
            SCOPED_TRACE(std::string(simdLevelName(level)) + " " + formatName(shape.format) +
                         " block " + std::to_string(shape.block) + " scales " +
                         std::to_string(static_cast<int>(st)) + " T " + std::to_string(T) +
                         " N " + std::to_string(N) + " K " + std::to_string(K));
            const QuantKernels& k = quantKernels(level);
            std::vector<float> y(T * N, kPoison);
            // Two row ranges, as two threads would split them.
            runLinear(k, tm.m, x, T, withBias ? bias.data() : nullptr, y, 0, N / 2);
            runLinear(k, tm.m, x, T, withBias ? bias.data() : nullptr, y, N / 2, N);
            for (int64_t t = 0; t < T; ++t)
              for (int64_t n = 0; n < N; ++n) {
                double ref = withBias ? bias[n] : 0.0, mag = 0.0;
                for (int64_t i = 0; i < K; ++i) {
                  ref += static_cast<double>(x[t * K + i]) * tm.w[n * K + i];
                  mag += std::abs(x[t * K + i]) * tm.wabs[n * K + i];
                }
                const double tolerance =
                    1e-6 * (std::sqrt(double(K)) * mag + (withBias ? std::abs(bias[n]) : 0.0));
                ASSERT_NEAR(y[t * N + n], ref, tolerance + 1e-30)
                    << "t " << t << " n " << n;
              }
          }
        }
}

TEST(QuantLinearTest, RowsAreBitwiseIndependentOfTheBatchAndTheRowSplit) {
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  const int64_t T = 11, N = 37;
  for (const Shape& shape : shapes())
    for (int64_t K : shape.ks) {
      TestMatrix tm =
          randomMatrix(shape.format, N, K, shape.block, GroupScaleType::kF16, false, rng);
      std::vector<float> x(T * K), bias(N);
      for (float& v : x) v = unit(rng);
      for (float& v : bias) v = unit(rng);
      for (SimdLevel level : supportedLevels()) {
        SCOPED_TRACE(std::string(simdLevelName(level)) + " " + formatName(shape.format) + " K " +
                     std::to_string(K));
        const QuantKernels& k = quantKernels(level);
        std::vector<float> all(T * N, kPoison);
        runLinear(k, tm.m, x, T, bias.data(), all, 0, N);
        for (int64_t t = 0; t < T; ++t) {
          std::vector<float> xt(x.begin() + t * K, x.begin() + (t + 1) * K), one(N, kPoison);
          // Odd row splits, as uneven thread shares give.
          runLinear(k, tm.m, xt, 1, bias.data(), one, 0, 3);
          runLinear(k, tm.m, xt, 1, bias.data(), one, 3, 20);
          runLinear(k, tm.m, xt, 1, bias.data(), one, 20, N);
          ASSERT_EQ(0, std::memcmp(one.data(), all.data() + t * N, N * sizeof(float)))
              << "row " << t;
        }
        // Tokens 3..9 as a batch of their own.
        std::vector<float> some(x.begin() + 3 * K, x.begin() + 10 * K), part(7 * N, kPoison);
        runLinear(k, tm.m, some, 7, bias.data(), part, 0, N);
        ASSERT_EQ(0, std::memcmp(part.data(), all.data() + 3 * N, 7 * N * sizeof(float)));
      }
    }
}

TEST(QuantLinearTest, ARowRangeWritesOnlyItsOwnOutputs) {
  std::mt19937 rng(29);
  const int64_t T = 3, N = 12;
  for (const Shape& shape : shapes()) {
    const int64_t K = shape.ks.back();
    TestMatrix tm = randomMatrix(shape.format, N, K, shape.block, GroupScaleType::kF16, false, rng);
    std::vector<float> x(T * K, 0.5f);
    for (SimdLevel level : supportedLevels()) {
      std::vector<float> y(T * N, kPoison);
      runLinear(quantKernels(level), tm.m, x, T, nullptr, y, 2, 9);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t n = 0; n < N; ++n)
          EXPECT_EQ(std::isnan(y[t * N + n]), n < 2 || n >= 9)
              << simdLevelName(level) << " " << formatName(shape.format) << " " << n;
    }
  }
}

TEST(QuantLinearTest, NanBlockScalesGiveNanOutputs) {
  std::mt19937 rng(31);
  const int64_t N = 4, K = 64;
  for (QuantFormat f : {QuantFormat::kNvfp4, QuantFormat::kMxfp4}) {
    TestMatrix tm = randomMatrix(f, N, K, f == QuantFormat::kNvfp4 ? 16 : 32,
                                 GroupScaleType::kF16, false, rng);
    tm.scales[tm.m.groups() * 2 + 1] = f == QuantFormat::kNvfp4 ? 0x7f : 0xff;  // row 2
    std::vector<float> x(K, 0.25f);
    for (SimdLevel level : supportedLevels()) {
      std::vector<float> y(N, kPoison);
      runLinear(quantKernels(level), tm.m, x, 1, nullptr, y, 0, N);
      for (int64_t n = 0; n < N; ++n)
        EXPECT_EQ(std::isnan(y[n]), n == 2) << simdLevelName(level) << " " << formatName(f);
    }
  }
}

TEST(QuantLinearTest, MatrixBytesCountCodesAndScales) {
  QuantMatrix m;
  m.N = 10;
  m.K = 256;
  m.block = 32;
  m.format = QuantFormat::kInt4Min;
  EXPECT_EQ(m.bytes(), 10 * 128 + 2 * 10 * 8 * 2);
  m.scale_type = GroupScaleType::kF32;
  EXPECT_EQ(m.bytes(), 10 * 128 + 2 * 10 * 8 * 4);
  m.format = QuantFormat::kMxfp4;
  EXPECT_EQ(m.bytes(), 10 * 128 + 10 * 8);
  m.format = QuantFormat::kNvfp4;
  m.block = 16;
  EXPECT_EQ(m.bytes(), 10 * 128 + 10 * 16 + 4);
  m.format = QuantFormat::kFp8;
  m.block = 256;
  float channel[10] = {};
  m.channel_scales = channel;
  EXPECT_EQ(m.bytes(), 10 * 256 + 10 * 4);
}

}  // namespace
}  // namespace ingot
