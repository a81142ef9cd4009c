// Logprobs: log-sum-exp is stable, top-N are ordered and equal the log-softmax.
#include "runtime/generate/logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include <gtest/gtest.h>

namespace ingot {
namespace {

TEST(LogprobsTest, TopLogprobsAreOrderedAndEqualLogSoftmax) {
  std::mt19937 gen(21);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (int trial = 0; trial < 20; ++trial) {
    const int n = 3000;
    std::vector<float> x(n);
    for (float& v : x) v = normal(gen);
    x[17] = x[2900];  // a tie: the lower id comes first
    double sum = 0;
    for (float v : x) sum += std::exp(double(v));
    const double lse = std::log(sum);
    EXPECT_NEAR(logSumExp(x.data(), n), lse, 1e-9);
    std::vector<TokenLogprob> top(3, TokenLogprob{-1, 99.0f});  // poison
    const int k = 1 + trial % 20;
    topLogprobs(x.data(), n, k, logSumExp(x.data(), n), &top);
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return x[a] > x[b]; });
    ASSERT_EQ(top.size(), size_t(k));
    for (int i = 0; i < k; ++i) {
      EXPECT_EQ(top[i].token, order[i]) << "rank " << i;
      EXPECT_NEAR(top[i].logprob, double(x[order[i]]) - lse, 1e-5);
      EXPECT_FLOAT_EQ(top[i].logprob, logprobOf(x.data(), n, order[i], lse));
    }
  }
}

TEST(LogprobsTest, StableForHugeLogitsAndSkipsNan) {
  std::vector<float> x = {1000.0f, 1000.0f, NAN, -INFINITY, 990.0f};  // exp overflows double
  const double lse = logSumExp(x.data(), x.size());
  EXPECT_TRUE(std::isfinite(lse));
  EXPECT_NEAR(logprobOf(x.data(), x.size(), 0, lse), -std::log(2.0 + std::exp(-10.0)), 1e-6);
  EXPECT_EQ(logprobOf(x.data(), x.size(), 2, lse), -INFINITY);
  EXPECT_EQ(logprobOf(x.data(), x.size(), 3, lse), -INFINITY);
  EXPECT_EQ(logprobOf(x.data(), x.size(), 9, lse), -INFINITY);
  std::vector<TokenLogprob> top;
  topLogprobs(x.data(), x.size(), 20, lse, &top);
  ASSERT_EQ(top.size(), 4u);  // NaN is never listed
  EXPECT_EQ(top[0].token, 0);
  EXPECT_EQ(top[1].token, 1);
  EXPECT_EQ(top[2].token, 4);
  EXPECT_EQ(top[3].token, 3);
  EXPECT_EQ(top[3].logprob, -INFINITY);
  std::vector<float> dead = {-INFINITY, NAN};
  EXPECT_EQ(logSumExp(dead.data(), 2), -INFINITY);
}

TEST(LogprobsTest, LogSoftmaxSumsToOneOnALargeVocabulary) {
  std::mt19937 gen(4);
  std::normal_distribution<float> normal(0.0f, 10.0f);
  std::vector<float> x(151936);
  for (float& v : x) v = normal(gen);
  const double lse = logSumExp(x.data(), x.size());
  double total = 0;
  for (size_t i = 0; i < x.size(); ++i) total += std::exp(double(logprobOf(x.data(), x.size(), i, lse)));
  EXPECT_NEAR(total, 1.0, 1e-5);
}

}  // namespace
}  // namespace ingot
