// Sampler: greedy is argmax, seeds reproduce per request, penalties, logprobs, validation,
// draw frequencies follow the transformed distribution, the draw walks the kept tokens in id
// order, and every non-greedy token costs exactly one uniform.
#include "runtime/generate/sampler.h"

#include <cmath>
#include <functional>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "testing/test_seed.h"

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

TEST(SamplerTest, PenaltiesFollowHfAndOpenAiSemantics) {
  // Token 0 is in the prompt, 1 in prompt and output, 2 twice in the output, 3 and 4 unseen.
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, -3.0f, 1.5f};
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  p.logprobs = true;
  p.top_logprobs = 5;
  p.logprobs_source = LogprobsSource::kPenalized;
  Sampler s(p);
  s.setPrompt({0, 1, 0});
  for (int32_t t : {1, 2, 2}) s.recordOutput(t);
  // 0: 2/2; 1: -1*2 - 0.25 - 0.5; 2: 0.5/2 - 2*0.25 - 0.5; 3, 4 unchanged.
  const std::vector<double> expected = {1.0, -2.75, -0.75, -3.0, 1.5};
  double lse = 0;
  for (double v : expected) lse += std::exp(v);
  lse = std::log(lse);
  SampleLogprobs lp;
  EXPECT_EQ(s.sample(logits.data(), logits.size(), &lp), 4);  // greedy; unpenalized it is 0
  ASSERT_EQ(lp.top.size(), 5u);
  for (const TokenLogprob& e : lp.top)
    EXPECT_NEAR(e.logprob, expected[e.token] - lse, 1e-6) << "token " << e.token;
  EXPECT_NEAR(lp.chosen.logprob, expected[4] - lse, 1e-6);
  EXPECT_EQ(s.numGenerated(), 4);
}

TEST(SamplerTest, RawLogprobsIgnorePenaltiesAndTemperature) {
  std::vector<float> logits = {0.3f, 1.7f, -0.2f, 0.9f};
  SamplingParams p;
  p.temperature = 0.5f;
  p.frequency_penalty = 2.0f;
  p.logprobs = true;
  p.top_logprobs = 2;
  p.seed = 3;
  Sampler s(p);
  double lse = 0;
  for (float v : logits) lse += std::exp(double(v));
  lse = std::log(lse);
  for (int step = 0; step < 20; ++step) {
    SampleLogprobs lp;
    lp.chosen = {-7, 123.0f};  // poison
    int32_t t = s.sample(logits.data(), logits.size(), &lp);
    EXPECT_EQ(lp.chosen.token, t);
    EXPECT_NEAR(lp.chosen.logprob, logits[t] - lse, 1e-6);
    ASSERT_EQ(lp.top.size(), 2u);
    EXPECT_EQ(lp.top[0].token, 1);
    EXPECT_EQ(lp.top[1].token, 3);
  }
}

TEST(SamplerTest, EachRequestOwnsItsRandomStreamWhenInterleaved) {
  std::mt19937 gen(11);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const int vocab = 500, steps = 200;
  std::vector<std::vector<float>> rowsA(steps, std::vector<float>(vocab)), rowsB = rowsA;
  for (auto* rows : {&rowsA, &rowsB})
    for (auto& row : *rows)
      for (float& v : row) v = normal(gen);
  SamplingParams pa;
  pa.temperature = 0.8f;
  pa.top_p = 0.95f;
  pa.presence_penalty = 0.3f;
  pa.seed = 1;
  SamplingParams pb = pa;
  pb.top_k = 40;
  pb.seed = 2;
  auto alone = [&](const SamplingParams& p, const std::vector<std::vector<float>>& rows) {
    Sampler s(p);
    std::vector<int32_t> out;
    for (const auto& row : rows) out.push_back(s.sample(row.data(), vocab));
    return out;
  };
  const std::vector<int32_t> soloA = alone(pa, rowsA), soloB = alone(pb, rowsB);
  Sampler a(pa), b(pb);
  std::vector<int32_t> mixedA, mixedB;
  for (int i = 0; i < steps; ++i) {
    // B runs twice as many steps at first (an uneven batch), then catches up.
    if (i % 2 == 0) mixedB.push_back(b.sample(rowsB[mixedB.size()].data(), vocab));
    mixedA.push_back(a.sample(rowsA[i].data(), vocab));
  }
  while (mixedB.size() < static_cast<size_t>(steps))
    mixedB.push_back(b.sample(rowsB[mixedB.size()].data(), vocab));
  EXPECT_EQ(mixedA, soloA);
  EXPECT_EQ(mixedB, soloB);
  EXPECT_NE(soloA, alone([&] { SamplingParams q = pa; q.seed = 5; return q; }(), rowsA));
}

TEST(SamplerTest, FrequenciesFollowTheTransformedDistribution) {
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::vector<float> logits(30);
  for (float& v : logits) v = normal(gen);
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_k = 12;
  p.top_p = 0.9f;
  p.min_p = 0.05f;
  p.seed = 77;
  Sampler s(p);
  std::vector<double> probs;
  s.probabilities(logits.data(), logits.size(), &probs);
  const int n = 50000;
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i) ++counts[s.sample(logits.data(), logits.size())];
  double chi2 = 0;
  int support = 0;
  for (size_t t = 0; t < logits.size(); ++t) {
    if (probs[t] == 0) {
      EXPECT_EQ(counts[t], 0) << "filtered token " << t << " was drawn";
      continue;
    }
    ++support;
    const double expected = n * probs[t];
    const double sd = std::sqrt(expected * (1 - probs[t]));
    EXPECT_NEAR(counts[t], expected, 5 * sd) << "token " << t;
    chi2 += (counts[t] - expected) * (counts[t] - expected) / expected;
  }
  ASSERT_GT(support, 2);
  const int dof = support - 1;
  EXPECT_LT(chi2, dof + 5 * std::sqrt(2.0 * dof)) << "chi-square over " << dof << " dof";
}

TEST(SamplerTest, DrawWalksTheKeptTokensInIdOrder) {
  // For the uniform u the Sampler draws (read from a copy of it), the token is the first id
  // whose running probability exceeds u, whatever order the filter left the candidates in:
  // the small-top-k heap, nth_element for a large top-k, the sorted top-p prefix, min-p.
  std::mt19937_64 gen(ingot::testing::testSeed());
  std::normal_distribution<float> normal(0.0f, 2.0f);
  struct Filter {
    int32_t top_k;
    float top_p, min_p;
  };
  const std::vector<Filter> filters = {{0, 1.0f, 0.0f},  {5, 1.0f, 0.0f},   {1500, 1.0f, 0.0f},
                                       {0, 0.8f, 0.0f},  {0, 1.0f, 0.05f},  {40, 0.9f, 0.02f},
                                       {1500, 0.95f, 0.01f}};
  int checked = 0;
  for (const Filter& f : filters) {
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<float> logits(2000 + gen() % 500);
      for (float& v : logits) v = normal(gen);
      SamplingParams p;
      p.temperature = 0.8f;
      p.top_k = f.top_k;
      p.top_p = f.top_p;
      p.min_p = f.min_p;
      p.seed = gen();
      Sampler s(p), peek(p);
      std::vector<double> probs;
      s.probabilities(logits.data(), logits.size(), &probs);
      const double u = peek.nextUniform();
      const int32_t token = s.sample(logits.data(), logits.size());
      EXPECT_EQ(s.nextUniform(), peek.nextUniform()) << "one sample, one uniform";
      double cumulative = 0;
      int32_t expected = -1;
      bool nearBoundary = false;
      for (size_t i = 0; i < probs.size() && expected < 0; ++i) {
        if (probs[i] == 0) continue;
        cumulative += probs[i];
        nearBoundary |= std::fabs(cumulative - u) < 1e-9;
        if (u < cumulative) expected = static_cast<int32_t>(i);
      }
      if (nearBoundary || expected < 0) continue;
      EXPECT_EQ(token, expected) << "top_k " << f.top_k << " top_p " << f.top_p << " min_p "
                                 << f.min_p << " u " << u;
      ++checked;
    }
  }
  EXPECT_GT(checked, 250);
}

TEST(SamplerTest, EveryNonGreedyTokenConsumesExactlyOneUniform) {
  // Also a row that falls back to the argmax (+inf, or nothing finite): the stream stays in
  // step with a caller that draws nextUniform() and samples elsewhere. Greedy draws none.
  const std::vector<float> inf = {0.0f, INFINITY, 1.0f}, nan = {NAN, -INFINITY};
  std::vector<float> row(50);
  for (size_t i = 0; i < row.size(); ++i) row[i] = std::cos(float(i));
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.7f;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    p.seed = seed;
    Sampler a(p), b(p);
    EXPECT_EQ(a.sample(inf.data(), inf.size()), 1);
    EXPECT_EQ(a.sample(nan.data(), nan.size()), 0);
    b.nextUniform();
    b.nextUniform();
    EXPECT_EQ(a.sample(row.data(), row.size()), b.sample(row.data(), row.size()));
  }
  SamplingParams g;
  g.seed = 3;
  Sampler greedy(g), fresh(g);
  greedy.sample(row.data(), row.size());
  EXPECT_EQ(greedy.nextUniform(), fresh.nextUniform());
}

TEST(SamplerTest, SamplesWithoutHistoryOnlyWithoutPenaltiesAndLogprobs) {
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_k = 10;
  p.top_p = 0.8f;
  p.min_p = 0.1f;
  p.stop = {"x"};
  EXPECT_TRUE(Sampler(p).samplesWithoutHistory());
  EXPECT_TRUE(Sampler(SamplingParams{}).samplesWithoutHistory());
  const std::vector<std::function<void(SamplingParams&)>> history = {
      [](SamplingParams& q) { q.repetition_penalty = 1.1f; },
      [](SamplingParams& q) { q.presence_penalty = 0.5f; },
      [](SamplingParams& q) { q.frequency_penalty = -0.5f; },
      [](SamplingParams& q) { q.logprobs = true; }};
  for (const auto& set : history) {
    SamplingParams q = p;
    set(q);
    EXPECT_FALSE(Sampler(q).samplesWithoutHistory());
  }
}

TEST(SamplerTest, ValidateNamesTheOffendingField) {
  struct Case {
    std::function<void(SamplingParams&)> set;
    const char* field;
  };
  const std::vector<Case> cases = {
      {[](SamplingParams& p) { p.temperature = 2.5f; }, "temperature"},
      {[](SamplingParams& p) { p.temperature = -0.1f; }, "temperature"},
      {[](SamplingParams& p) { p.temperature = NAN; }, "temperature"},
      {[](SamplingParams& p) { p.top_k = -2; }, "top_k"},
      {[](SamplingParams& p) { p.top_p = 0.0f; }, "top_p"},
      {[](SamplingParams& p) { p.top_p = 1.01f; }, "top_p"},
      {[](SamplingParams& p) { p.min_p = -0.5f; }, "min_p"},
      {[](SamplingParams& p) { p.repetition_penalty = 0.0f; }, "repetition_penalty"},
      {[](SamplingParams& p) { p.presence_penalty = 2.5f; }, "presence_penalty"},
      {[](SamplingParams& p) { p.frequency_penalty = -3.0f; }, "frequency_penalty"},
      {[](SamplingParams& p) { p.max_tokens = 0; }, "max_tokens"},
      {[](SamplingParams& p) { p.stop_token_ids = {3, -1}; }, "stop_token_ids"},
      {[](SamplingParams& p) { p.stop = {"ok", ""}; }, "stop"},
      {[](SamplingParams& p) { p.logprobs = true; p.top_logprobs = 21; }, "top_logprobs"},
      {[](SamplingParams& p) { p.top_logprobs = 3; }, "top_logprobs"},
  };
  for (const Case& c : cases) {
    SamplingParams p;
    c.set(p);
    Status st = p.validate();
    ASSERT_FALSE(st.ok()) << c.field;
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(st.message().rfind(std::string(c.field) + " ", 0), 0u) << st.message();
    EXPECT_EQ(st.message().find('\n'), std::string::npos);
  }
  SamplingParams good;
  good.temperature = 2.0f;
  good.top_k = -1;
  good.top_p = 1.0f;
  good.min_p = 1.0f;
  good.presence_penalty = -2.0f;
  good.frequency_penalty = 2.0f;
  good.max_tokens = 1;
  good.logprobs = true;
  good.top_logprobs = 20;
  good.stop = {"\n\n"};
  EXPECT_TRUE(good.validate().ok()) << good.validate().message();
  EXPECT_EQ(SamplingParams{}.validate().message(), "");
  SamplingParams bad;
  bad.temperature = 3.0f;
  EXPECT_EQ(bad.validate().message(), "temperature must be in [0, 2], got 3");
}

}  // namespace
}  // namespace ingot
