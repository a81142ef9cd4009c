//===- FusedOpsHostTest.cpp - fused kernel math on the CPU vs. the CPU backend ops ---===//
//
// Runs the __host__ __device__ math of kernels/fused_ops.cuh on the CPU over whole rows,
// in the kernels' own order (rms_norm: 256 per-thread partial sums, the warp butterfly, the
// sum over warps), against runtime/backend/cpu/cpu_ops and kvWriteRows on fresh random
// inputs. Tolerances: rms_norm within 4 ulp (f32 sum here, double sum there), rope and
// silu_mul within 1 ulp (same f32 formulas; only contraction may differ), embedding and
// the KV write exact.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "codegen/cuda/kernels/fused_ops.cuh"
#include "runtime/backend/cpu/cpu_ops.h"
#include "runtime/backend/cpu/paged_attention.h"

namespace ingot {
namespace {

/// Distance in units in the last place between two finite floats.
int64_t ulpDistance(float a, float b) {
  auto key = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, 4);
    return i < 0 ? static_cast<int64_t>(INT32_MIN) - i : static_cast<int64_t>(i);
  };
  return std::llabs(key(a) - key(b));
}

std::vector<float> randomVector(std::mt19937 &rng, size_t n, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float &x : v) x = normal(rng);
  return v;
}

/// The rms_norm kernel's reduction order for one row of `dim` squares.
float kernelSumOfSquares(const float *row, int dim) {
  constexpr int kThreads = fused::kFusedThreads;
  float lane[kThreads] = {};
  for (int t = 0; t < kThreads; ++t)
    for (int d = t; d < dim; d += kThreads) lane[t] += row[d] * row[d];
  auto butterfly = [](float *v) {  // __shfl_xor_sync over 32 lanes; lane 0's result
    for (int o = 16; o > 0; o >>= 1) {
      float next[32];
      for (int l = 0; l < 32; ++l) next[l] = v[l] + v[l ^ o];
      std::memcpy(v, next, sizeof(next));
    }
    return v[0];
  };
  float warps[32] = {};
  for (int w = 0; w < kThreads / 32; ++w) warps[w] = butterfly(lane + 32 * w);
  return butterfly(warps);
}

TEST(FusedOpsHostTest, RmsNormResidualMatchesCpuOps) {
  std::mt19937 rng(std::random_device{}());
  for (int dim : {64, 576, 1000, 4096}) {
    const int rows = 5;
    const float eps = 1e-5f;
    std::vector<float> x = randomVector(rng, rows * dim), residual = randomVector(rng, rows * dim);
    std::vector<float> gamma = randomVector(rng, dim, 0.5f);
    // CPU backend: residual = add(residual, x); out = rms_norm(residual) * gamma.
    std::vector<float> sum(rows * dim, NAN), expected(rows * dim, NAN);
    addRange(residual.data(), x.data(), sum.data(), 0, rows * dim);
    rmsNormRows(sum.data(), gamma.data(), dim, eps, expected.data(), 0, rows);
    // The kernel's math, row by row.
    std::vector<float> res = residual, out(rows * dim, NAN);
    int64_t worst = 0;
    for (int r = 0; r < rows; ++r) {
      float *rr = res.data() + r * dim;
      for (int d = 0; d < dim; ++d) rr[d] = rr[d] + x[r * dim + d];
      const float inv = fused::rmsInverse(kernelSumOfSquares(rr, dim), dim, eps);
      for (int d = 0; d < dim; ++d) out[r * dim + d] = fused::rmsNormElement(rr[d], inv, gamma[d]);
    }
    for (int i = 0; i < rows * dim; ++i) {
      ASSERT_EQ(res[i], sum[i]) << "residual sum, dim " << dim << " element " << i;
      worst = std::max(worst, ulpDistance(out[i], expected[i]));
      ASSERT_LE(ulpDistance(out[i], expected[i]), 4)
          << "dim " << dim << " element " << i << ": " << out[i] << " vs " << expected[i];
    }
    std::printf("rms_norm dim %d: worst %lld ulp\n", dim, static_cast<long long>(worst));
  }
}

TEST(FusedOpsHostTest, RopeAndKvWriteMatchCpuOps) {
  std::mt19937 rng(std::random_device{}());
  struct Shape { int heads, kvHeads, headDim, rotaryDim; };
  for (Shape sh : {Shape{9, 3, 64, 64}, Shape{8, 2, 128, 128}, Shape{4, 4, 64, 32}}) {
    const int T = 7, layers = 3, layer = 1, blockSize = 16, numBlocks = 6;
    const std::vector<float> invFreq =
        ropeInverseFrequencies(10000.0, sh.rotaryDim, RopeScalingParams{});
    std::vector<int32_t> positions(T);
    for (int32_t &p : positions) p = std::uniform_int_distribution<int>(0, 32767)(rng);
    std::vector<float> q = randomVector(rng, T * sh.heads * sh.headDim);
    std::vector<float> k = randomVector(rng, T * sh.kvHeads * sh.headDim);
    std::vector<float> v = randomVector(rng, T * sh.kvHeads * sh.headDim);
    // CPU backend: rope on q and k, then kvWriteRows.
    std::vector<float> qRef(q.size(), NAN), kRef(k.size(), NAN);
    ropeRows(q.data(), positions.data(), invFreq, sh.heads, sh.headDim, qRef.data(), 0, T);
    ropeRows(k.data(), positions.data(), invFreq, sh.kvHeads, sh.headDim, kRef.data(), 0, T);
    // The kernel's math: every (head, pair) of q and k, in place.
    const int half = sh.rotaryDim / 2;
    auto rotate = [&](std::vector<float> &x, int heads) {
      for (int t = 0; t < T; ++t)
        for (int h = 0; h < heads; ++h)
          for (int j = 0; j < half; ++j) {
            float *row = x.data() + (t * heads + h) * sh.headDim;
            float c, s;
            fused::ropeCosSin(positions[t], invFreq[j], c, s);
            fused::ropePair(row[j], row[j + half], c, s, row[j], row[j + half]);
          }
    };
    rotate(q, sh.heads);
    rotate(k, sh.kvHeads);
    for (size_t i = 0; i < q.size(); ++i) ASSERT_LE(ulpDistance(q[i], qRef[i]), 1) << "q " << i;
    for (size_t i = 0; i < k.size(); ++i) ASSERT_LE(ulpDistance(k[i], kRef[i]), 1) << "k " << i;
    // KV write into distinct random slots, the kernel's offsets against kvWriteRows.
    KvCacheLayout layout{layers, blockSize, sh.kvHeads, sh.headDim};
    std::vector<int32_t> slots(numBlocks * blockSize);
    for (size_t i = 0; i < slots.size(); ++i) slots[i] = static_cast<int32_t>(i);
    std::shuffle(slots.begin(), slots.end(), rng);
    slots.resize(T);
    const size_t poolSize = static_cast<size_t>(numBlocks) * layout.blockFloats();
    std::vector<float> poolRef = randomVector(rng, poolSize), pool = poolRef;
    kvWriteRows(poolRef.data(), layout, layer, kRef.data(), v.data(), slots.data(), 0, T);
    const int width = sh.kvHeads * sh.headDim;
    for (int t = 0; t < T; ++t) {
      const long kRow = fused::kvRowOffset(slots[t], layer, 0, layers, blockSize, width);
      const long vRow = fused::kvRowOffset(slots[t], layer, 1, layers, blockSize, width);
      for (int d = 0; d < width; ++d) {
        pool[kRow + d] = kRef[t * width + d];
        pool[vRow + d] = v[t * width + d];
      }
    }
    ASSERT_EQ(pool, poolRef) << "KV write, " << sh.heads << "/" << sh.kvHeads << " heads";
  }
}

TEST(FusedOpsHostTest, SiluMulMatchesCpuOps) {
  std::mt19937 rng(std::random_device{}());
  const int n = 3 * 1536;
  std::vector<float> gate = randomVector(rng, n, 4.0f), up = randomVector(rng, n);
  std::vector<float> expected(n, NAN);
  siluMulRange(gate.data(), up.data(), expected.data(), 0, n);
  for (int i = 0; i < n; ++i)
    ASSERT_LE(ulpDistance(fused::siluMul(gate[i], up[i]), expected[i]), 1) << "element " << i;
}

TEST(FusedOpsHostTest, EmbeddingRowsMatchCpuOpsAndFlagBadTokens) {
  std::mt19937 rng(std::random_device{}());
  const int vocab = 100, dim = 48, start = 40, numRows = 30, T = 64;
  std::vector<float> table = randomVector(rng, numRows * dim);
  std::vector<int32_t> tokens(T);
  for (int32_t &t : tokens) t = std::uniform_int_distribution<int>(-5, vocab + 5)(rng);
  tokens[0] = start;
  tokens[1] = start + numRows - 1;
  tokens[2] = -1;
  tokens[3] = vocab;
  std::vector<float> expected(T * dim, NAN), out(T * dim, NAN);
  // The CPU op zeroes every token outside the shard; it never sees invalid ones (the
  // step inputs are validated first), so a zero row is the expectation for both kinds.
  embeddingShardRows(tokens.data(), table.data(), WeightType::kF32, start, numRows, dim,
                     expected.data(), 0, T);
  for (int t = 0; t < T; ++t) {
    const int row = fused::embeddingRow(tokens[t], vocab, start, numRows);
    const bool invalid = tokens[t] < 0 || tokens[t] >= vocab;
    ASSERT_EQ(row == -2, invalid) << "token " << tokens[t];
    for (int d = 0; d < dim; ++d) out[t * dim + d] = row < 0 ? 0.0f : table[row * dim + d];
  }
  ASSERT_EQ(out, expected);
}

}  // namespace
}  // namespace ingot
