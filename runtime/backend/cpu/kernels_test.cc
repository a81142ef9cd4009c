// Linear/dot/axpy kernels of every SIMD level this CPU has, against naive double loops.
#include "runtime/backend/cpu/kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "runtime/backend/cpu/half_float.h"

namespace ingot {
namespace {

std::vector<SimdLevel> supportedLevels() {
  std::vector<SimdLevel> levels;
  for (int l = 0; l <= static_cast<int>(detectSimdLevel()); ++l)
    levels.push_back(static_cast<SimdLevel>(l));
  return levels;
}

const float kPoison = std::numeric_limits<float>::quiet_NaN();

/// Weights in the given type plus their exact f32 values.
struct Weights {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};

Weights randomWeights(WeightType type, int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  Weights w;
  w.values.resize(n);
  w.bytes.resize(n * (type == WeightType::kF32 ? 4 : 2));
  for (int64_t i = 0; i < n; ++i) {
    float v = dist(rng);
    if (type == WeightType::kF32) {
      std::memcpy(&w.bytes[i * 4], &v, 4);
    } else {
      uint16_t h = type == WeightType::kBF16 ? f32ToBf16(v) : f32ToF16(v);
      v = type == WeightType::kBF16 ? bf16ToF32(h) : f16ToF32(h);
      std::memcpy(&w.bytes[i * 2], &h, 2);
    }
    w.values[i] = v;
  }
  return w;
}

TEST(KernelsTest, LinearMatchesNaiveForEveryLevelTypeAndShape) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (SimdLevel level : supportedLevels()) {
    const CpuKernels& k = cpuKernels(level);
    ASSERT_EQ(k.level, level);
    for (WeightType type : {WeightType::kF32, WeightType::kF16, WeightType::kBF16}) {
      for (int64_t T : {1, 2, 3, 5, 9, 70}) {
        for (int64_t N : {1, 5, 13, 64}) {
          for (int64_t K : {1, 7, 16, 33, 100}) {
            SCOPED_TRACE(std::string(simdLevelName(level)) + " type " +
                         std::to_string(static_cast<int>(type)) + " T " + std::to_string(T) +
                         " N " + std::to_string(N) + " K " + std::to_string(K));
            Weights w = randomWeights(type, N * K, rng);
            std::vector<float> x(T * K), bias(N), y(T * N, kPoison);
            for (float& v : x) v = dist(rng);
            for (float& v : bias) v = dist(rng);
            const bool withBias = (T + N + K) % 2 == 0;
            LinearArgs a;
            a.x = x.data();
            a.x_stride = K;
            a.w = w.bytes.data();
            a.w_type = type;
            a.bias = withBias ? bias.data() : nullptr;
            a.y = y.data();
            a.y_stride = N;
            a.T = T;
            a.K = K;
            // A bf16-activation table reads x rounded to bf16; the reference uses the same.
            const bool roundX = k.bf16_activations && type == WeightType::kBF16;
            std::vector<uint16_t> xb(T * K);
            if (roundX) {
              k.round_to_bf16(x.data(), T * K, xb.data());
              for (int64_t i = 0; i < T * K; ++i) {
                ASSERT_EQ(xb[i], f32ToBf16(x[i])) << "rounds to nearest even";
                x[i] = bf16ToF32(xb[i]);
              }
              a.x_bf16 = xb.data();
            }
            // Two row ranges, as two threads would split them.
            const int64_t mid = N / 2;
            k.linear[static_cast<int>(type)](a, 0, mid);
            k.linear[static_cast<int>(type)](a, mid, N);
            for (int64_t t = 0; t < T; ++t)
              for (int64_t n = 0; n < N; ++n) {
                double ref = withBias ? bias[n] : 0.0;
                for (int64_t i = 0; i < K; ++i)
                  ref += static_cast<double>(x[t * K + i]) * w.values[n * K + i];
                ASSERT_NEAR(y[t * N + n], ref, 1e-5 * (1 + std::sqrt(double(K))))
                    << "t " << t << " n " << n;
              }
            // A row range writes only its own columns.
            std::vector<float> y2(T * N, kPoison);
            a.y = y2.data();
            k.linear[static_cast<int>(type)](a, 1, N);
            for (int64_t t = 0; t < T; ++t) EXPECT_TRUE(std::isnan(y2[t * N]));
          }
        }
      }
    }
  }
}

TEST(KernelsTest, LinearRowIsBitwiseIndependentOfTheBatch) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  const int64_t T = 11, N = 37, K = 61;
  for (SimdLevel level : supportedLevels()) {
    for (WeightType type : {WeightType::kF32, WeightType::kF16, WeightType::kBF16}) {
      const CpuKernels& k = cpuKernels(level);
      Weights w = randomWeights(type, N * K, rng);
      std::vector<float> x(T * K), all(T * N, kPoison), one(N, kPoison);
      for (float& v : x) v = dist(rng);
      std::vector<uint16_t> xb(T * K);
      if (k.bf16_activations) k.round_to_bf16(x.data(), T * K, xb.data());
      LinearArgs a{x.data(), K, w.bytes.data(), type, nullptr, all.data(), N, T, K, xb.data()};
      k.linear[static_cast<int>(type)](a, 0, N);
      for (int64_t t = 0; t < T; ++t) {
        LinearArgs b{x.data() + t * K, K,       w.bytes.data(), type, nullptr, one.data(),
                     N,                1,       K,              xb.data() + t * K};
        k.linear[static_cast<int>(type)](b, 0, N);
        ASSERT_EQ(0, std::memcmp(one.data(), all.data() + t * N, N * sizeof(float)))
            << simdLevelName(level) << " row " << t;
      }
    }
  }
}

TEST(KernelsTest, DotAndAxpyMatchNaive) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (SimdLevel level : supportedLevels()) {
    const CpuKernels& k = cpuKernels(level);
    for (int64_t n : {0, 1, 7, 8, 15, 16, 17, 64, 100}) {
      std::vector<float> a(n), b(n), y(n);
      for (int64_t i = 0; i < n; ++i) {
        a[i] = dist(rng);
        b[i] = dist(rng);
        y[i] = dist(rng);
      }
      double ref = 0;
      for (int64_t i = 0; i < n; ++i) ref += double(a[i]) * b[i];
      EXPECT_NEAR(k.dot(a.data(), b.data(), n), ref, 1e-5) << simdLevelName(level) << " " << n;
      std::vector<float> y2 = y;
      k.axpy(0.75f, a.data(), y2.data(), n);
      for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y2[i], y[i] + 0.75 * a[i], 1e-6);
    }
  }
}

TEST(KernelsTest, AttentionScoresAndValueUpdatesMatchNaive) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (SimdLevel level : supportedLevels()) {
    const CpuKernels& k = cpuKernels(level);
    for (int64_t D : {1, 8, 15, 16, 40, 64, 80, 128, 200}) {
      for (int64_t rows : {1, 3, 4, 5, 9}) {
        for (int64_t n : {1, 3, 4, 7, 16}) {
          SCOPED_TRACE(std::string(simdLevelName(level)) + " D " + std::to_string(D) + " rows " +
                       std::to_string(rows) + " n " + std::to_string(n));
          // Strided rows, as in the KV pool (k_stride > D) and a score tile (s_stride > n).
          const int64_t qs = D + 3, ks = D + 5, ss = n + 2, os = D + 1;
          std::vector<float> q(rows * qs), kv(n * ks), p(rows * ss), alpha(rows);
          std::vector<float> o(rows * os);
          for (std::vector<float>* v : {&q, &kv, &p, &alpha, &o})
            for (float& x : *v) x = dist(rng);
          std::vector<float> s(rows * ss, kPoison);
          k.qk(q.data(), qs, rows, kv.data(), ks, n, D, 0.5f, s.data(), ss);
          std::vector<float> o2 = o;
          k.pv(p.data(), ss, rows, kv.data(), ks, n, D, alpha.data(), o2.data(), os);
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t i = 0; i < n; ++i) {
              double ref = 0;
              for (int64_t d = 0; d < D; ++d) ref += double(q[r * qs + d]) * kv[i * ks + d];
              ASSERT_NEAR(s[r * ss + i], 0.5 * ref, 1e-5);
            }
            for (int64_t d = 0; d < os; ++d) {
              if (d >= D) {  // past the row: untouched
                ASSERT_EQ(o2[r * os + d], o[r * os + d]);
                continue;
              }
              double ref = double(alpha[r]) * o[r * os + d];
              for (int64_t i = 0; i < n; ++i) ref += double(p[r * ss + i]) * kv[i * ks + d];
              ASSERT_NEAR(o2[r * os + d], ref, 1e-5);
            }
          }
          // One row or one key alone gives bitwise the same score as among many.
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t i = 0; i < n; ++i) {
              float one = kPoison;
              k.qk(q.data() + r * qs, qs, 1, kv.data() + i * ks, ks, 1, D, 0.5f, &one, 1);
              ASSERT_EQ(0, std::memcmp(&one, &s[r * ss + i], sizeof(float)));
            }
        }
      }
    }
  }
}

TEST(KernelsTest, ExpShiftedMatchesStdExpAndZeroesMaskedScores) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> dist(-120.f, 0.f);
  const float negInf = -std::numeric_limits<float>::infinity();
  for (SimdLevel level : supportedLevels()) {
    const CpuKernels& k = cpuKernels(level);
    for (int64_t n : {1, 5, 16, 17, 40, 1000}) {
      std::vector<float> s(n);
      for (int64_t i = 0; i < n; ++i) s[i] = i % 7 == 3 ? negInf : dist(rng);
      if (n > 2) s[1] = 0.f, s[2] = 88.f;  // exp(0) and the top of the range
      const float shift = n > 2 ? 88.f : -1.5f;
      std::vector<float> e = s;
      const float sum = k.exp_shifted(e.data(), n, shift);
      double ref = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double want = s[i] == negInf ? 0.0 : std::exp(double(s[i]) - shift);
        ref += want;
        if (s[i] == negInf) ASSERT_EQ(e[i], 0.f) << "masked scores weigh exactly nothing";
        if (want > 1e-37) ASSERT_NEAR(e[i], want, 2.5e-7 * want) << simdLevelName(level) << " " << s[i];
        else ASSERT_LE(e[i], 1e-37);
      }
      ASSERT_NEAR(sum, ref, 1e-6 * ref + 1e-30);
    }
  }
}

TEST(HalfFloatTest, ConversionsRoundTripAndRoundToNearest) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16ToF32(static_cast<uint16_t>(h));
    if (!std::isnan(f)) {
      EXPECT_EQ(f32ToF16(f), h) << h;
    }
    const float g = bf16ToF32(static_cast<uint16_t>(h));
    if (!std::isnan(g)) {
      EXPECT_EQ(f32ToBf16(g), h) << h;
    }
  }
  EXPECT_EQ(f16ToF32(0x3c00), 1.0f);
  EXPECT_EQ(f16ToF32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f32ToF16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie -> even
  EXPECT_EQ(f32ToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie -> even
  EXPECT_EQ(f32ToF16(1e6f), 0x7c00);
}

}  // namespace
}  // namespace ingot
