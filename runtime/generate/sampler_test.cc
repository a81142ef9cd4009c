// Sampler: greedy is argmax, seeds reproduce, top-k/top-p restrict, frequencies follow softmax.
#include "runtime/generate/sampler.h"

#include <cmath>
#include <map>

#include <gtest/gtest.h>

namespace ingot {
namespace {

TEST(SamplerTest, GreedyIsArgmaxWithTiesToLowestId) {
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, NAN};
  Sampler greedy({});
  EXPECT_EQ(greedy.sample(logits.data(), logits.size()), 1);
  EXPECT_EQ(argmax(logits.data(), logits.size()), 1);
}

TEST(SamplerTest, SameSeedSameTokens) {
  std::vector<float> logits(100);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(float(i));
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 1234;
  Sampler a(p), b(p);
  p.seed = 99;
  Sampler c(p);
  int differ = 0;
  for (int i = 0; i < 50; ++i) {
    int32_t x = a.sample(logits.data(), logits.size());
    EXPECT_EQ(x, b.sample(logits.data(), logits.size()));
    differ += x != c.sample(logits.data(), logits.size());
  }
  EXPECT_GT(differ, 0);
}

TEST(SamplerTest, TopKAndTopPKeepOnlyTheLikeliestTokens) {
  std::vector<float> logits = {1.0f, 5.0f, 4.0f, 0.0f, 3.0f};
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 2;
  Sampler k(p);
  for (int i = 0; i < 200; ++i) {
    int32_t t = k.sample(logits.data(), logits.size());
    EXPECT_TRUE(t == 1 || t == 2) << t;
  }
  p.top_k = 0;
  p.top_p = 0.5f;  // token 1 alone has p = 0.64 > 0.5
  Sampler top_p(p);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(top_p.sample(logits.data(), logits.size()), 1);
}

TEST(SamplerTest, FrequenciesFollowTheSoftmax) {
  std::vector<float> logits = {0.0f, std::log(2.0f), std::log(3.0f)};  // p = 1/6, 2/6, 3/6
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 7;
  Sampler s(p);
  std::map<int32_t, int> counts;
  const int n = 60000;
  for (int i = 0; i < n; ++i) ++counts[s.sample(logits.data(), logits.size())];
  for (int t = 0; t < 3; ++t) {
    double expected = n * (t + 1) / 6.0;
    // 5 standard deviations of a binomial count.
    double sd = std::sqrt(expected * (1 - (t + 1) / 6.0));
    EXPECT_NEAR(counts[t], expected, 5 * sd) << "token " << t;
  }
}

}  // namespace
}  // namespace ingot
