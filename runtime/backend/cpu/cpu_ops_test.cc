// Row ops (embedding, norms, rope, activations, add, KV writes) against naive references.
#include "runtime/backend/cpu/cpu_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "runtime/backend/cpu/half_float.h"
#include "runtime/backend/cpu/paged_attention.h"

namespace ingot {
namespace {

const float kPoison = std::numeric_limits<float>::quiet_NaN();

std::vector<float> randomVector(size_t n, std::mt19937& rng, float lo = -2.f, float hi = 2.f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(CpuOpsTest, EmbeddingGathersAndWidensRows) {
  std::mt19937 rng(1);
  const int64_t V = 10, D = 7;
  std::vector<float> table = randomVector(V * D, rng);
  std::vector<uint16_t> bf(V * D), hf(V * D);
  for (int64_t i = 0; i < V * D; ++i) {
    bf[i] = f32ToBf16(table[i]);
    hf[i] = f32ToF16(table[i]);
  }
  const std::vector<int32_t> tokens = {3, 0, 9, 3};
  for (WeightType type : {WeightType::kF32, WeightType::kBF16, WeightType::kF16}) {
    const void* data = type == WeightType::kF32 ? static_cast<const void*>(table.data())
                       : type == WeightType::kBF16 ? static_cast<const void*>(bf.data())
                                                   : static_cast<const void*>(hf.data());
    std::vector<float> out(tokens.size() * D, kPoison);
    embeddingRows(tokens.data(), data, type, D, out.data(), 0, 2);
    embeddingRows(tokens.data(), data, type, D, out.data(), 2, 4);
    for (size_t t = 0; t < tokens.size(); ++t)
      for (int64_t d = 0; d < D; ++d) {
        const int64_t i = tokens[t] * D + d;
        const float want = type == WeightType::kF32 ? table[i]
                           : type == WeightType::kBF16 ? bf16ToF32(bf[i]) : f16ToF32(hf[i]);
        EXPECT_EQ(out[t * D + d], want);
      }
  }
}

TEST(CpuOpsTest, RmsNormAndLayerNormMatchNaive) {
  std::mt19937 rng(2);
  const int64_t T = 5, D = 37;
  std::vector<float> x = randomVector(T * D, rng), w = randomVector(D, rng), b = randomVector(D, rng);
  std::vector<float> rms(T * D, kPoison), ln(T * D, kPoison);
  rmsNormRows(x.data(), w.data(), D, 1e-5f, rms.data(), 0, T);
  layerNormRows(x.data(), w.data(), b.data(), D, 1e-5f, ln.data(), 0, T);
  for (int64_t t = 0; t < T; ++t) {
    double ss = 0, mean = 0, var = 0;
    for (int64_t d = 0; d < D; ++d) {
      ss += double(x[t * D + d]) * x[t * D + d];
      mean += x[t * D + d];
    }
    mean /= D;
    for (int64_t d = 0; d < D; ++d) var += (x[t * D + d] - mean) * (x[t * D + d] - mean);
    var /= D;
    for (int64_t d = 0; d < D; ++d) {
      EXPECT_NEAR(rms[t * D + d], x[t * D + d] / std::sqrt(ss / D + 1e-5) * w[d], 1e-5);
      EXPECT_NEAR(ln[t * D + d], (x[t * D + d] - mean) / std::sqrt(var + 1e-5) * w[d] + b[d], 1e-5);
    }
  }
}

/// Hugging Face rotate_half on one head, angles in double.
void ropeReference(const float* x, double pos, const std::vector<double>& invFreq, int64_t D,
                   double* out) {
  const int64_t half = D / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double c = std::cos(pos * invFreq[i]), s = std::sin(pos * invFreq[i]);
    out[i] = x[i] * c - x[i + half] * s;
    out[i + half] = x[i + half] * c + x[i] * s;
  }
}

TEST(CpuOpsTest, RopeRotatesHalvesOfEachHead) {
  std::mt19937 rng(3);
  const int64_t T = 6, H = 3, D = 16;
  const double theta = 10000.0;
  std::vector<float> x = randomVector(T * H * D, rng), out(T * H * D, kPoison);
  const std::vector<int32_t> pos = {0, 1, 2, 17, 100, 511};
  std::vector<float> inv = ropeInverseFrequencies(theta, D, {});
  std::vector<double> invRef(D / 2);
  for (int64_t i = 0; i < D / 2; ++i) {
    invRef[i] = std::pow(theta, -2.0 * i / D);
    EXPECT_NEAR(inv[i], invRef[i], 1e-7 * invRef[i] + 1e-12);
  }
  ropeRows(x.data(), pos.data(), inv, H, D, out.data(), 0, T);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      double ref[D];
      ropeReference(&x[(t * H + h) * D], pos[t], invRef, D, ref);
      for (int64_t d = 0; d < D; ++d)
        EXPECT_NEAR(out[(t * H + h) * D + d], ref[d], 2e-4) << t << " " << h << " " << d;
    }
  // In place gives the same result.
  std::vector<float> inplace = x;
  ropeRows(inplace.data(), pos.data(), inv, H, D, inplace.data(), 0, T);
  EXPECT_EQ(inplace, out);
}

TEST(CpuOpsTest, RopeScalingFollowsHuggingFace) {
  const int64_t D = 128;
  const double theta = 500000.0;
  RopeScalingParams linear{RopeScaling::kLinear, 4.0};
  std::vector<float> base = ropeInverseFrequencies(theta, D, {});
  std::vector<float> lin = ropeInverseFrequencies(theta, D, linear);
  for (int64_t i = 0; i < D / 2; ++i) EXPECT_FLOAT_EQ(lin[i], base[i] / 4.0f);
  // Llama 3.1: factor 8, low 1, high 4, original 8192.
  RopeScalingParams llama3{RopeScaling::kLlama3, 8.0, 1.0, 4.0, 8192};
  std::vector<float> l3 = ropeInverseFrequencies(theta, D, llama3);
  for (int64_t i = 0; i < D / 2; ++i) {
    const double f = std::pow(theta, -2.0 * i / D);
    const double wavelen = 2 * M_PI / f;
    double want;
    if (wavelen < 8192.0 / 4.0) want = f;
    else if (wavelen > 8192.0 / 1.0) want = f / 8.0;
    else {
      const double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
      want = (1 - smooth) * f / 8.0 + smooth * f;
    }
    EXPECT_NEAR(l3[i], want, 1e-6 * want) << i;
    // Exactly the GGUF route: the f32 factor rope_freqs.weight would hold, divided out.
    const float factor = llama3RopeFactor(base[i], llama3);
    EXPECT_EQ(l3[i], base[i] / factor) << i;
    if (wavelen < 8192.0 / 4.0) EXPECT_EQ(factor, 1.0f) << i;
    else if (wavelen > 8192.0) EXPECT_EQ(factor, 8.0f) << i;
    else EXPECT_TRUE(factor > 1.0f && factor < 8.0f) << i;
  }
}

TEST(CpuOpsTest, GatedActivationsAndAddMatchNaive) {
  std::mt19937 rng(4);
  const int64_t n = 333;
  std::vector<float> a = randomVector(n, rng, -6, 6), b = randomVector(n, rng);
  std::vector<float> silu(n, kPoison), gelu(n, kPoison), sum(n, kPoison);
  siluMulRange(a.data(), b.data(), silu.data(), 0, 100);
  siluMulRange(a.data(), b.data(), silu.data(), 100, n);
  geluMulRange(a.data(), b.data(), gelu.data(), 0, n);
  addRange(a.data(), b.data(), sum.data(), 0, n);
  for (int64_t i = 0; i < n; ++i) {
    const double g = a[i];
    EXPECT_NEAR(silu[i], g / (1 + std::exp(-g)) * b[i], 1e-5);
    const double ge = 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g)));
    EXPECT_NEAR(gelu[i], ge * b[i], 1e-5);
    EXPECT_EQ(sum[i], a[i] + b[i]);
  }
}

TEST(CpuOpsTest, KvWriteStoresRowsAtTheirSlots) {
  std::mt19937 rng(5);
  KvCacheLayout layout{3, 4, 2, 8};  // layers, block size, kv heads, head dim
  const int64_t blocks = 5, T = 6;
  std::vector<float> cache(blocks * layout.blockFloats(), kPoison);
  std::vector<float> k = randomVector(T * 16, rng), v = randomVector(T * 16, rng);
  const std::vector<int32_t> slots = {0, 5, 19, 7, 12, 3};
  kvWriteRows(cache.data(), layout, 2, k.data(), v.data(), slots.data(), 0, T);
  int64_t written = 0;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t block = slots[t] / 4, off = slots[t] % 4;
    for (int64_t i = 0; i < 16; ++i) {
      // [block][layer][kv][offset][head][dim]
      const int64_t kIndex = (((block * 3 + 2) * 2 + 0) * 4 + off) * 16 + i;
      const int64_t vIndex = (((block * 3 + 2) * 2 + 1) * 4 + off) * 16 + i;
      EXPECT_EQ(cache[kIndex], k[t * 16 + i]);
      EXPECT_EQ(cache[vIndex], v[t * 16 + i]);
    }
  }
  for (float f : cache) written += !std::isnan(f);
  EXPECT_EQ(written, T * 2 * 16);  // nothing else touched
}

}  // namespace
}  // namespace ingot
