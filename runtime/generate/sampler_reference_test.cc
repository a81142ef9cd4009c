// Sampler transforms against a direct full-sort reference on random logits.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "runtime/generate/sampler.h"

namespace ingot {
namespace {

/// The distribution vLLM's order defines, written plainly: penalties, temperature softmax over
/// a full descending sort, top-k prefix, top-p prefix, min-p, renormalize.
std::vector<double> reference(std::vector<float> x, const SamplingParams& p,
                              const std::vector<int32_t>& prompt,
                              const std::vector<int32_t>& output) {
  const int n = static_cast<int>(x.size());
  std::map<int32_t, int> counts;
  for (int32_t t : output) ++counts[t];
  std::set<int32_t> seen(prompt.begin(), prompt.end());
  seen.insert(output.begin(), output.end());
  for (int32_t t : seen) x[t] = x[t] > 0 ? x[t] / p.repetition_penalty : x[t] * p.repetition_penalty;
  for (auto [t, c] : counts) x[t] -= p.frequency_penalty * float(c) + p.presence_penalty;
  std::vector<double> probs(n, 0.0);
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return x[a] > x[b]; });
  if (p.temperature == 0.0f) {
    probs[order[0]] = 1.0;
    return probs;
  }
  size_t keep = p.top_k > 0 ? std::min<size_t>(p.top_k, n) : n;
  const double maxLogit = x[order[0]];
  std::vector<double> w(keep);
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += w[i] = std::exp((x[order[i]] - maxLogit) / p.temperature);
  if (p.top_p < 1.0f) {
    double cumulative = 0;
    for (size_t i = 0; i < keep; ++i) {
      cumulative += w[i] / total;
      if (cumulative >= p.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  double kept = 0;
  for (size_t i = 0; i < keep; ++i) {
    if (w[i] < p.min_p * w[0]) continue;
    probs[order[i]] = w[i];
    kept += w[i];
  }
  for (double& q : probs) q /= kept;
  return probs;
}

void expectMatchesReference(const SamplingParams& p, int vocab, uint32_t seed,
                            bool withHistory = false, bool withTies = false) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(vocab);
  for (float& v : logits) v = withTies ? std::round(normal(gen)) : normal(gen);
  std::vector<int32_t> prompt, output;
  if (withHistory) {
    std::uniform_int_distribution<int32_t> token(0, vocab - 1);
    for (int i = 0; i < 40; ++i) prompt.push_back(token(gen));
    for (int i = 0; i < 30; ++i) output.push_back(token(gen) % 50);  // repeats
  }
  Sampler s(p);
  s.setPrompt(prompt);
  for (int32_t t : output) s.recordOutput(t);
  std::vector<double> got(vocab, -1.0);  // poison
  s.probabilities(logits.data(), vocab, &got);
  const std::vector<double> want = reference(logits, p, prompt, output);
  ASSERT_EQ(got.size(), want.size());
  int support = 0;
  for (int t = 0; t < vocab; ++t) {
    ASSERT_EQ(got[t] > 0, want[t] > 0) << "token " << t << " kept differently";
    ASSERT_NEAR(got[t], want[t], 1e-9) << "token " << t;
    support += want[t] > 0;
  }
  EXPECT_GT(support, 0);
}

TEST(SamplerReferenceTest, TemperatureMatchesSoftmax) {
  for (float t : {0.0f, 0.3f, 1.0f, 1.9f}) {
    SamplingParams p;
    p.temperature = t;
    expectMatchesReference(p, 1000, 1 + uint32_t(t * 10));
  }
}

TEST(SamplerReferenceTest, TopKKeepsTheKLargest) {
  for (int k : {1, 5, 64, 999, 1000, 5000}) {
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_k = k;
    expectMatchesReference(p, 1000, 100 + k);
  }
}

TEST(SamplerReferenceTest, TopKOnALargeVocabularyAndTiesGoToLowerIds) {
  for (int k : {3, 100, 1024, 1025, 3000}) {  // the heap path and the nth_element path
    SamplingParams p;
    p.temperature = 0.9f;
    p.top_k = k;
    expectMatchesReference(p, 8000, 600 + k);
    expectMatchesReference(p, 8000, 700 + k, /*withHistory=*/false, /*withTies=*/true);
  }
}

TEST(SamplerReferenceTest, TopPKeepsTheSmallestNucleus) {
  for (float q : {0.05f, 0.5f, 0.9f, 0.999f}) {
    SamplingParams p;
    p.temperature = 1.3f;
    p.top_p = q;
    expectMatchesReference(p, 1000, 200 + uint32_t(q * 1000));
  }
}

TEST(SamplerReferenceTest, TopPOnALargeVocabularyGrowsItsSortedPrefix) {
  SamplingParams p;
  p.temperature = 2.0f;  // a flat distribution: the nucleus holds thousands of tokens
  p.top_p = 0.95f;
  expectMatchesReference(p, 50000, 7);
}

TEST(SamplerReferenceTest, MinPDropsTokensBelowAFractionOfTheMax) {
  for (float m : {0.01f, 0.2f, 0.9f, 1.0f}) {
    SamplingParams p;
    p.temperature = 0.8f;
    p.min_p = m;
    expectMatchesReference(p, 1000, 300 + uint32_t(m * 100));
  }
}

TEST(SamplerReferenceTest, PenaltiesMatchTheReference) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.repetition_penalty = 1.3f;
  p.presence_penalty = 0.7f;
  p.frequency_penalty = -0.4f;
  expectMatchesReference(p, 1000, 400, /*withHistory=*/true);
  p.temperature = 0.0f;
  expectMatchesReference(p, 1000, 401, /*withHistory=*/true);
}

TEST(SamplerReferenceTest, AllTransformsComposeInVllmOrder) {
  std::mt19937 gen(9);
  for (int trial = 0; trial < 30; ++trial) {
    SamplingParams p;
    p.temperature = std::uniform_real_distribution<float>(0.1f, 2.0f)(gen);
    p.top_k = std::uniform_int_distribution<int>(0, 300)(gen);
    p.top_p = std::uniform_real_distribution<float>(0.1f, 1.0f)(gen);
    p.min_p = std::uniform_real_distribution<float>(0.0f, 0.3f)(gen);
    p.repetition_penalty = std::uniform_real_distribution<float>(0.8f, 1.5f)(gen);
    p.presence_penalty = std::uniform_real_distribution<float>(-1.0f, 1.0f)(gen);
    p.frequency_penalty = std::uniform_real_distribution<float>(-1.0f, 1.0f)(gen);
    SCOPED_TRACE(trial);
    expectMatchesReference(p, 2000, 500 + trial, /*withHistory=*/true);
  }
}

}  // namespace
}  // namespace ingot
