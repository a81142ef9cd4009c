//===- sampling_host_test.cc - the sampling kernel's algorithm on the CPU vs. the Sampler ---===//
//
// Runs sampleRowWith (kernels/sampling.cuh) sequentially on the host (sampleRowHost) against
// the runtime's CPU Sampler (runtime/generate/sampler) on fresh random rows and parameters:
// for the uniform the Sampler is about to draw (read from a copy of it), both must pick the
// same token. Also the edge rows (greedy ties, NaN / -inf / +inf, -0 vs +0, k >= vocab,
// top_p = 1, min_p = 1, vocab 1) and the key order the selection relies on.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codegen/cuda/kernels/sampling.cuh"
#include "runtime/generate/sampler.h"

namespace ingot {
namespace {

using sampling::RowParams;
using sampling::sampleRowHost;

constexpr float kInf = std::numeric_limits<float>::infinity();

RowParams rowParams(const SamplingParams &p, double u) {
  return {p.temperature, p.top_k, p.top_p, p.min_p, p.greedy() ? 0.0 : u};
}

/// The CPU Sampler's token for `x` and the host algorithm's, given the uniform the Sampler
/// draws (one fresh Sampler per call: no history, so no penalties apply).
struct Both {
  int32_t cpu;
  int host;
  double u;
};
Both sampleBoth(const std::vector<float> &x, const SamplingParams &p) {
  Sampler sampler(p);
  Sampler peek = sampler;  // same random stream
  const double u = peek.nextUniform();
  Both b;
  b.u = u;
  b.cpu = sampler.sample(x.data(), static_cast<int64_t>(x.size()));
  b.host = sampleRowHost(x.data(), static_cast<int>(x.size()), rowParams(p, u));
  return b;
}

std::string describe(const SamplingParams &p, size_t vocab, double u) {
  return "vocab " + std::to_string(vocab) + " T " + std::to_string(p.temperature) + " top_k " +
         std::to_string(p.top_k) + " top_p " + std::to_string(p.top_p) + " min_p " +
         std::to_string(p.min_p) + " u " + std::to_string(u);
}

/// A random row: normal logits at a random scale; some rows quantized to force ties, some
/// with -inf and NaN entries (masked tokens).
std::vector<float> randomRow(std::mt19937_64 &rng, size_t vocab) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::normal_distribution<float> normal(0.0f, 0.5f + 6.0f * unit(rng));
  const bool ties = unit(rng) < 0.25f, masked = unit(rng) < 0.25f;
  std::vector<float> x(vocab);
  for (float &v : x) {
    v = normal(rng);
    if (ties) v = std::round(v * 2.0f) / 2.0f;
    if (masked && unit(rng) < 0.2f) v = unit(rng) < 0.5f ? -kInf : NAN;
  }
  return x;
}

SamplingParams randomParams(std::mt19937_64 &rng, size_t vocab) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  SamplingParams p;
  p.seed = rng();
  p.temperature = unit(rng) < 0.1f ? 0.0f : 0.05f + 1.95f * unit(rng);
  const float k = unit(rng);
  p.top_k = k < 0.3f ? 0 : k < 0.4f ? -1
          : static_cast<int32_t>(1 + rng() % (k < 0.8f ? std::min<size_t>(vocab, 64) : vocab + 4));
  p.top_p = unit(rng) < 0.4f ? 1.0f : std::max(0.01f, unit(rng));
  p.min_p = unit(rng) < 0.5f ? 0.0f : 0.3f * unit(rng);
  return p;
}

TEST(SamplingHostTest, MatchesTheCpuSamplerOnRandomRowsAndParameters) {
  std::mt19937_64 rng(std::random_device{}());
  int sampled = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const size_t vocab = trial % 100 == 0 ? 49152 : 1 + rng() % 3000;
    const std::vector<float> x = randomRow(rng, vocab);
    const SamplingParams p = randomParams(rng, vocab);
    ASSERT_TRUE(p.validate().ok()) << p.validate().message();
    const Both b = sampleBoth(x, p);
    ASSERT_EQ(b.host, b.cpu) << "trial " << trial << ": " << describe(p, vocab, b.u);
    sampled += !p.greedy();
  }
  EXPECT_GT(sampled, 2000);
}

TEST(SamplingHostTest, EveryUniformPicksTheCpuSamplersToken) {
  // One row and parameter set, many uniforms: every boundary of the id-order walk agrees.
  std::mt19937_64 rng(std::random_device{}());
  const std::vector<float> x = randomRow(rng, 500);
  for (int trial = 0; trial < 500; ++trial) {
    SamplingParams p;
    p.temperature = 0.7f;
    p.top_k = 40;
    p.top_p = 0.9f;
    p.min_p = 0.02f;
    p.seed = rng();
    const Both b = sampleBoth(x, p);
    ASSERT_EQ(b.host, b.cpu) << describe(p, x.size(), b.u);
  }
}

TEST(SamplingHostTest, DrawIsTheIdOrderInverseCdfOfTheSamplersDistribution) {
  // Independent of the Sampler's draw: the first id whose cumulative probability (from
  // Sampler::probabilities) exceeds u. Rows without ties, u away from the boundaries.
  std::mt19937_64 rng(std::random_device{}());
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<float> x(200 + rng() % 800);
    for (float &v : x) v = normal(rng);
    SamplingParams p = randomParams(rng, x.size());
    if (p.greedy()) p.temperature = 1.0f;
    Sampler sampler(p);
    std::vector<double> probs;
    sampler.probabilities(x.data(), static_cast<int64_t>(x.size()), &probs);
    const double u = unit(rng);
    double cumulative = 0;
    int expected = -1;
    bool nearBoundary = false;
    for (size_t i = 0; i < probs.size() && expected < 0; ++i) {
      if (probs[i] == 0) continue;
      cumulative += probs[i];
      nearBoundary |= std::fabs(cumulative - u) < 1e-9;
      if (u < cumulative) expected = static_cast<int>(i);
    }
    if (nearBoundary || expected < 0) continue;
    EXPECT_EQ(sampleRowHost(x.data(), static_cast<int>(x.size()), rowParams(p, u)), expected)
        << describe(p, x.size(), u);
    ++checked;
  }
  EXPECT_GT(checked, 250);
}

TEST(SamplingHostTest, GreedyIsArgmaxWithTiesToTheLowestIdAndNoNaN) {
  std::mt19937_64 rng(std::random_device{}());
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> x = randomRow(rng, 1 + rng() % 300);
    const int a = sampleRowHost(x.data(), static_cast<int>(x.size()), {0.0f, 0, 1.0f, 0.0f, 0.5});
    ASSERT_EQ(a, argmax(x.data(), static_cast<int64_t>(x.size())));
  }
  const std::vector<float> ties = {1.0f, NAN, 3.0f, -kInf, 3.0f, 2.0f};
  EXPECT_EQ(sampleRowHost(ties.data(), 6, {0.0f, 5, 0.5f, 0.1f, 0.99}), 2);
  // -0 and +0 are equal logits: the lower id wins either way round.
  const std::vector<float> zeros = {-1.0f, 0.0f, -0.0f}, zeros2 = {-1.0f, -0.0f, 0.0f};
  EXPECT_EQ(sampleRowHost(zeros.data(), 3, {0.0f, 0, 1.0f, 0.0f, 0.0}), 1);
  EXPECT_EQ(sampleRowHost(zeros2.data(), 3, {0.0f, 0, 1.0f, 0.0f, 0.0}), 1);
  // With top_k = 1 the single kept token is the lower id of the two zeros.
  EXPECT_EQ(sampleRowHost(zeros2.data(), 3, {1.0f, 1, 1.0f, 0.0f, 0.9}), 1);
}

TEST(SamplingHostTest, RowsWithoutAFiniteMaximumTakeTheArgmaxLikeTheSampler) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 2;
  p.top_p = 0.5f;
  const std::vector<std::vector<float>> rows = {
      {NAN, NAN, NAN},                        // no candidate: 0
      {-kInf, -kInf, -kInf, -kInf},           // no candidate: 0
      {NAN, -kInf, NAN},                      // no candidate: 0
      {1.0f, kInf, 3.0f, kInf, NAN},          // +inf dominates: the lowest +inf id
      {NAN, -kInf, 2.0f, -kInf},              // one candidate
  };
  const std::vector<int> expected = {0, 0, 0, 1, 2};
  std::mt19937_64 rng(std::random_device{}());
  for (size_t r = 0; r < rows.size(); ++r)
    for (int trial = 0; trial < 20; ++trial) {
      p.seed = rng();
      const Both b = sampleBoth(rows[r], p);
      EXPECT_EQ(b.host, expected[r]) << "row " << r;
      EXPECT_EQ(b.cpu, expected[r]) << "row " << r;
    }
}

TEST(SamplingHostTest, FiltersThatKeepEverythingEqualNoFilter) {
  // top_k >= vocab (or >= the candidates), top_p = 1 and min_p = 0 all keep every candidate:
  // the same token as no filter for every uniform.
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> x = randomRow(rng, 1 + rng() % 400);
    const int vocab = static_cast<int>(x.size());
    const double u = unit(rng);
    const int none = sampleRowHost(x.data(), vocab, {0.8f, 0, 1.0f, 0.0f, u});
    EXPECT_EQ(sampleRowHost(x.data(), vocab, {0.8f, -1, 1.0f, 0.0f, u}), none);
    EXPECT_EQ(sampleRowHost(x.data(), vocab, {0.8f, vocab, 1.0f, 0.0f, u}), none);
    EXPECT_EQ(sampleRowHost(x.data(), vocab, {0.8f, vocab + 7, 1.0f, 0.0f, u}), none);
  }
}

TEST(SamplingHostTest, MinPOneKeepsOnlyTheTiesAtTheMaximumInIdOrder) {
  const std::vector<float> x = {0.5f, 3.0f, 1.0f, 3.0f, 2.9f, 3.0f};
  // Kept: ids 1, 3, 5 with weight 1 each: u in [0, 1/3) -> 1, [1/3, 2/3) -> 3, else 5.
  EXPECT_EQ(sampleRowHost(x.data(), 6, {1.0f, 0, 1.0f, 1.0f, 0.0}), 1);
  EXPECT_EQ(sampleRowHost(x.data(), 6, {1.0f, 0, 1.0f, 1.0f, 0.3}), 1);
  // u * total = 1 exactly: the running sum must exceed it, so not id 1 but id 3.
  EXPECT_EQ(sampleRowHost(x.data(), 6, {1.0f, 0, 1.0f, 1.0f, 1.0 / 3.0}), 3);
  EXPECT_EQ(sampleRowHost(x.data(), 6, {1.0f, 0, 1.0f, 1.0f, 0.34}), 3);
  EXPECT_EQ(sampleRowHost(x.data(), 6, {1.0f, 0, 1.0f, 1.0f, 0.66}), 3);
  EXPECT_EQ(sampleRowHost(x.data(), 6, {1.0f, 0, 1.0f, 1.0f, 0.67}), 5);
  EXPECT_EQ(sampleRowHost(x.data(), 6, {1.0f, 0, 1.0f, 1.0f, 0.999999}), 5);
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 1.0f;
  std::mt19937_64 rng(std::random_device{}());
  for (int trial = 0; trial < 50; ++trial) {
    p.seed = rng();
    const Both b = sampleBoth(x, p);
    EXPECT_EQ(b.host, b.cpu);
  }
}

TEST(SamplingHostTest, TopKTiesKeepTheLowerIds) {
  // Four tokens share the best logit; top_k = 2 keeps ids 2 and 4, drawn in id order.
  const std::vector<float> x = {1.0f, 0.0f, 5.0f, 1.0f, 5.0f, 5.0f, 5.0f};
  EXPECT_EQ(sampleRowHost(x.data(), 7, {1.0f, 2, 1.0f, 0.0f, 0.49}), 2);
  EXPECT_EQ(sampleRowHost(x.data(), 7, {1.0f, 2, 1.0f, 0.0f, 0.51}), 4);
  EXPECT_EQ(sampleRowHost(x.data(), 7, {1.0f, 2, 1.0f, 0.0f, 0.999}), 4);
  // top_p = 0.1 with equal weights: the first (lowest-id) of the ties alone.
  EXPECT_EQ(sampleRowHost(x.data(), 7, {1.0f, 0, 0.1f, 0.0f, 0.999}), 2);
}

TEST(SamplingHostTest, VocabularyOfOneAndEmptyRows) {
  const float one[1] = {-3.0f};
  EXPECT_EQ(sampleRowHost(one, 1, {1.0f, 1, 0.5f, 0.5f, 0.999}), 0);
  EXPECT_EQ(sampleRowHost(one, 1, {0.0f, 0, 1.0f, 0.0f, 0.0}), 0);
  EXPECT_EQ(sampleRowHost(one, 0, {1.0f, 0, 1.0f, 0.0f, 0.5}), 0);
}

TEST(SamplingHostTest, KeysOrderLikeTheSampler) {
  // Larger key = larger logit, or equal logits and the smaller id; non-candidates are 0.
  std::mt19937_64 rng(std::random_device{}());
  std::normal_distribution<float> normal(0.0f, 100.0f);
  std::vector<float> values = {0.0f, -0.0f, kInf, -kInf, 1e-45f, -1e-45f,
                               std::numeric_limits<float>::max(),
                               -std::numeric_limits<float>::max()};
  for (int i = 0; i < 200; ++i) values.push_back(normal(rng));
  for (float a : values)
    for (float b : values) {
      const int ia = static_cast<int>(rng() % 1000), ib = static_cast<int>(rng() % 1000);
      const sampling::SampleKey ka = sampling::candidateKey(a, ia),
                                kb = sampling::candidateKey(b, ib);
      if (a == -kInf) {
        EXPECT_EQ(ka, 0u);
        continue;
      }
      EXPECT_EQ(sampling::keyId(ka), ia);
      if (b == -kInf) continue;
      const bool better = a > b || (a == b && ia < ib);
      EXPECT_EQ(ka > kb, better) << a << "@" << ia << " vs " << b << "@" << ib;
    }
  EXPECT_EQ(sampling::candidateKey(NAN, 3), 0u);
}

}  // namespace
}  // namespace ingot
