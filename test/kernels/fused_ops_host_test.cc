//===- fused_ops_host_test.cc - fused kernel math on the CPU vs. the CPU backend ops ---===//
//
// Runs the __host__ __device__ math of kernels/fused_ops.cuh on the CPU over whole rows,
// in the kernels' own order (rms_norm: 256 per-thread partial sums, the warp butterfly, the
// sum over warps), against runtime/backend/cpu/cpu_ops and kvWriteRows on fresh random
// inputs. Tolerances: rms_norm within 4 ulp (f32 sum here, double sum there), rope and
// silu_mul within 1 ulp (same f32 formulas; only contraction may differ), embedding and
// the KV write exact. The new elementwise ops: bf16 rounding bit-exact against a reference
// worked out in double, add and add_bias exact, the grid-stride launch grid covering every
// element once.
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

TEST(FusedOpsHostTest, SiluMulAndGeluMulMatchCpuOps) {
  std::mt19937 rng(std::random_device{}());
  const int n = 3 * 1536;
  std::vector<float> gate = randomVector(rng, n, 6.0f), up = randomVector(rng, n);
  std::vector<float> silu(n, NAN), gelu(n, NAN);
  siluMulRange(gate.data(), up.data(), silu.data(), 0, n);
  geluMulRange(gate.data(), up.data(), gelu.data(), 0, n);
  for (int i = 0; i < n; ++i) {
    ASSERT_LE(ulpDistance(fused::siluMul(gate[i], up[i]), silu[i]), 1) << "element " << i;
    ASSERT_LE(ulpDistance(fused::geluMul(gate[i], up[i]), gelu[i]), 1) << "element " << i;
  }
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

/// Reference rounding of f32 `x` to bf16, ties to even, worked out on values in double
/// (not on bits): the two bf16 neighbours of x and the nearer one; past the largest bf16
/// the upper neighbour is 2^128, which is infinity (IEEE rounding with an unbounded
/// exponent, then overflow). NaN -> the canonical 0x7fff.
uint16_t referenceBf16(float x) {
  if (std::isnan(x)) return 0x7fff;
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  const uint32_t sign = bits & 0x80000000u, magnitude = bits & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) return static_cast<uint16_t>(bits >> 16);  // infinity
  const uint32_t below = magnitude & 0xffff0000u, above = below + 0x10000u;
  auto valueOf = [](uint32_t m) {
    if (m == 0x7f800000u) return std::ldexp(1.0, 128);
    float f;
    std::memcpy(&f, &m, 4);
    return static_cast<double>(f);
  };
  const double v = std::fabs(static_cast<double>(x));
  const double toBelow = v - valueOf(below), toAbove = valueOf(above) - v;
  uint32_t chosen = toBelow < toAbove ? below : toAbove < toBelow ? above
                    : ((below >> 16) & 1u) == 0 ? below : above;
  return static_cast<uint16_t>((sign | chosen) >> 16);
}

uint32_t floatBits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

TEST(FusedOpsHostTest, Bf16RoundingIsNearestEven) {
  std::mt19937 rng(std::random_device{}());
  std::vector<float> values;
  // Random bit patterns cover every exponent: subnormals, huge values, infinities, NaNs.
  std::uniform_int_distribution<uint32_t> anyBits;
  for (int i = 0; i < 200000; ++i) {
    const uint32_t b = anyBits(rng);
    float f;
    std::memcpy(&f, &b, 4);
    values.push_back(f);
  }
  // Exact ties (lower 16 bits 0x8000) with even and odd kept bits, the neighbours of a tie,
  // and the overflow edge around the largest bf16 (0x7f7f0000).
  for (int i = 0; i < 20000; ++i) {
    const uint32_t kept = anyBits(rng) & 0xffff0000u;
    for (uint32_t low : {0x8000u, 0x7fffu, 0x8001u, 0x0000u, 0xffffu}) {
      const uint32_t b = kept | low;
      float f;
      std::memcpy(&f, &b, 4);
      values.push_back(f);
    }
  }
  for (uint32_t b : {0x7f7f7fffu, 0x7f7f8000u, 0x7f7fffffu, 0xff7f8000u, 0x00000001u,
                     0x80008000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffffffffu}) {
    float f;
    std::memcpy(&f, &b, 4);
    values.push_back(f);
  }
  size_t ties = 0;
  for (float x : values) {
    const uint16_t got = fused::bf16BitsNearestEven(floatBits(x));
    ASSERT_EQ(got, referenceBf16(x)) << std::hex << "f32 bits 0x" << floatBits(x);
    ties += (floatBits(x) & 0xffffu) == 0x8000u;
  }
  EXPECT_GT(ties, 10000u);
  // The overflow edge, spelled out: halfway past the largest bf16 rounds to infinity.
  EXPECT_EQ(fused::bf16BitsNearestEven(0x7f7f8000u), 0x7f80);
  EXPECT_EQ(fused::bf16BitsNearestEven(0x7f7f7fffu), 0x7f7f);
  EXPECT_EQ(fused::bf16BitsNearestEven(0xffc00001u), 0x7fff);
}

TEST(FusedOpsHostTest, AddAndAddBiasMatchPlainSums) {
  std::mt19937 rng(std::random_device{}());
  // add: the kernel's f32 sum against the CPU op; stored in bf16 it is the rounded sum.
  const int n = 4099;
  std::vector<float> a = randomVector(rng, n, 3.0f), b = randomVector(rng, n, 3.0f);
  std::vector<float> expected(n, NAN);
  addRange(a.data(), b.data(), expected.data(), 0, n);
  for (int i = 0; i < n; ++i) {
    const float sum = a[i] + b[i];
    ASSERT_EQ(floatBits(sum), floatBits(expected[i])) << "add element " << i;
    ASSERT_EQ(fused::bf16BitsNearestEven(floatBits(sum)), referenceBf16(expected[i]))
        << "bf16 add element " << i;
  }
  // add_bias: the kernel's column of each flat index against a row/column double loop.
  for (int width : {1, 7, 576, 1536}) {
    const long rows = std::uniform_int_distribution<int>(1, 9)(rng);
    std::vector<float> x = randomVector(rng, rows * width), bias = randomVector(rng, width);
    std::vector<float> got(x.size(), NAN), want(x.size(), NAN);
    for (long i = 0; i < rows * width; ++i) got[i] = x[i] + bias[fused::columnOf(i, width)];
    for (long r = 0; r < rows; ++r)
      for (int c = 0; c < width; ++c) want[r * width + c] = x[r * width + c] + bias[c];
    ASSERT_EQ(got, want) << "add_bias, width " << width;
  }
}

TEST(FusedOpsHostTest, GridSizeCoversEveryElementOnce) {
  std::mt19937 rng(std::random_device{}());
  std::vector<long> counts = {1, 255, 256, 257, 65535L * 256, 65535L * 4 * 256 + 1};
  for (int i = 0; i < 4; ++i) counts.push_back(std::uniform_int_distribution<long>(1, 1 << 22)(rng));
  for (long count : counts) {
    const long grid = fused::fusedGridSize(count);
    const long want = std::min((count + 255) / 256, fused::kFusedMaxGrid);
    ASSERT_EQ(grid, want) << "count " << count;
    if (count > (1L << 22)) continue;  // the loop below is for the small ones
    std::vector<uint8_t> hits(count, 0);
    const long stride = grid * fused::kFusedThreads;
    for (long start = 0; start < stride; ++start)  // (blockIdx.x, threadIdx.x) flattened
      for (long i = start; i < count; i += stride) ++hits[i];
    ASSERT_TRUE(std::all_of(hits.begin(), hits.end(), [](uint8_t h) { return h == 1; }))
        << "count " << count;
  }
  EXPECT_EQ(fused::fusedGridSize(0), 1u);
  EXPECT_EQ(fused::fusedGridSize(1L << 40), static_cast<unsigned>(fused::kFusedMaxGrid));
}

}  // namespace
}  // namespace ingot
