// Perplexity: stable NLL against a long-double reference, window coverage, and the windowed
// all-rows evaluation against token-by-token decode on a tiny random Llama.
#include "runtime/eval/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>

#include "core/artifact/artifact_reader.h"
#include "testing/llama_program.h"

namespace ingot {
namespace {

constexpr int kVocab = 256;
constexpr int64_t kMaxContext = 512;

/// -log softmax(x)[target] in long double, written independently of tokenNll.
long double referenceNll(const std::vector<float>& x, int32_t target) {
  long double m = x[0];
  for (float v : x) m = std::max(m, static_cast<long double>(v));
  long double sum = 0;
  for (float v : x) sum += std::exp(static_cast<long double>(v) - m);
  return m + std::log(sum) - static_cast<long double>(x[target]);
}

TEST(PerplexityNllTest, TokenNllMatchesLongDoubleReferenceOnRandomLogits) {
  std::mt19937 gen(1234);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> offset(-2000.0f, 2000.0f);
  long double reference_sum = 0;
  NllSum sum;
  for (int row = 0; row < 200; ++row) {
    const int n = 1 + static_cast<int>(gen() % 50000);
    const float scale = 0.1f + 10.0f * static_cast<float>(row % 7);
    // Rows far from zero: exp() of the raw logits overflows (or underflows) float and double.
    const float shift = row % 3 == 0 ? offset(gen) : 0.0f;
    std::vector<float> x(n);
    for (float& v : x) v = shift + scale * normal(gen);
    const int32_t target = static_cast<int32_t>(gen() % n);
    const long double expected = referenceNll(x, target);
    const double nll = tokenNll(x.data(), n, target);
    ASSERT_TRUE(std::isfinite(nll)) << "row " << row;
    EXPECT_NEAR(nll, static_cast<double>(expected), 1e-9 * (1.0 + std::fabs(double(expected))))
        << "row " << row << " n " << n << " shift " << shift;
    EXPECT_GE(nll, -1e-12);
    sum.add(nll);
    reference_sum += expected;
  }
  EXPECT_EQ(sum.count, 200);
  const long double reference_mean = reference_sum / 200;
  EXPECT_NEAR(sum.mean(), static_cast<double>(reference_mean), 1e-9);
  EXPECT_NEAR(sum.perplexity() / static_cast<double>(std::exp(reference_mean)), 1.0, 1e-9);
}

TEST(PerplexityNllTest, UnreachableTargetsHaveInfiniteNll) {
  std::vector<float> x = {1.0f, NAN, -INFINITY, 2.0f};
  EXPECT_EQ(tokenNll(x.data(), 4, 1), INFINITY);
  EXPECT_EQ(tokenNll(x.data(), 4, 2), INFINITY);
  EXPECT_EQ(tokenNll(x.data(), 4, 4), INFINITY);
  EXPECT_EQ(tokenNll(x.data(), 4, -1), INFINITY);
  EXPECT_NEAR(tokenNll(x.data(), 4, 3), std::log1p(std::exp(-1.0)), 1e-12);
  EXPECT_EQ(NllSum().perplexity(), 1.0);
}

/// Tokens each window scores, checked to cover every target at most once.
int64_t scoredTokens(int64_t n, int64_t context, int64_t stride) {
  StatusOr<std::vector<PerplexityWindow>> windows = planPerplexityWindows(n, context, stride);
  EXPECT_TRUE(windows.ok()) << windows.status().message();
  if (!windows.ok()) return -1;
  std::vector<int> times_scored(n, 0);
  int64_t total = 0;
  for (const PerplexityWindow& w : *windows) {
    EXPECT_LT(w.begin, w.first_target);
    EXPECT_LT(w.first_target, w.end);
    EXPECT_LE(w.end - w.begin, context);
    for (int64_t t = w.first_target; t < w.end; ++t) ++times_scored[t];
    if (w.begin > 0 && stride < context)  // later windows give each target its overlap
      EXPECT_GE(w.first_target - w.begin, context - stride);
    total += w.numScored();
  }
  for (int64_t t = 0; t < n; ++t) EXPECT_LE(times_scored[t], 1) << "token " << t;
  return total;
}

TEST(PerplexityWindowsTest, DisjointWindowsScoreAllButEachWindowsFirstToken) {
  EXPECT_EQ(scoredTokens(100, 32, 32), 31 * 3 + 3);  // 32, 32, 32, 4
  EXPECT_EQ(scoredTokens(96, 32, 32), 31 * 3);
  EXPECT_EQ(scoredTokens(97, 32, 32), 31 * 3);       // a last 1-token window scores nothing
  EXPECT_EQ(scoredTokens(10, 1024, 1024), 9);        // shorter than one window
  EXPECT_EQ(scoredTokens(2, 2, 2), 1);
}

TEST(PerplexityWindowsTest, SlidingWindowsScoreEveryTokenAfterTheFirstOnce) {
  EXPECT_EQ(scoredTokens(100, 32, 12), 99);
  EXPECT_EQ(scoredTokens(100, 32, 1), 99);
  EXPECT_EQ(scoredTokens(1000, 300, 100), 999);
  EXPECT_EQ(scoredTokens(33, 32, 31), 32);
}

TEST(PerplexityWindowsTest, RejectsTooFewTokensSmallContextAndBadStride) {
  EXPECT_FALSE(planPerplexityWindows(1, 32, 32).ok());
  EXPECT_FALSE(planPerplexityWindows(0, 32, 32).ok());
  EXPECT_FALSE(planPerplexityWindows(100, 1, 1).ok());
  EXPECT_FALSE(planPerplexityWindows(100, 32, 0).ok());
  EXPECT_FALSE(planPerplexityWindows(100, 32, 33).ok());
}

const Artifact& tinyLlama() { return testing::sharedLlamaArtifact(kVocab, kMaxContext, 11); }

std::unique_ptr<SequenceRunner> makeRunner() {
  SequenceRunnerOptions o;
  o.num_threads = 2;
  StatusOr<std::unique_ptr<SequenceRunner>> runner = SequenceRunner::create(tinyLlama(), o);
  EXPECT_TRUE(runner.ok()) << runner.status().message();
  return std::move(*runner);
}

std::vector<int32_t> randomTokens(int n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<int32_t> tokens(n);
  for (int32_t& t : tokens) t = static_cast<int32_t>(gen() % kVocab);
  return tokens;
}

struct DecodeReference {
  long double nll_sum = 0;
  int64_t scored = 0;
};

/// The HF recipe fed one token per step through the decode path (last-row logits only).
DecodeReference decodeTokenByToken(SequenceRunner& runner, const std::vector<int32_t>& tokens,
                                   int64_t context, int64_t stride, int32_t prefix = -1) {
  DecodeReference ref;
  const int64_t n = static_cast<int64_t>(tokens.size());
  std::vector<float> logits(kVocab, NAN);
  int64_t previous_end = 0;
  for (int64_t begin = 0;; begin += stride) {
    const int64_t end = std::min(begin + context, n);
    const int64_t first_target = std::max(begin + 1, previous_end);
    runner.reset();
    if (prefix >= 0 && tokens[begin] != prefix)
      EXPECT_TRUE(runner.append({prefix}, /*all_rows=*/false, &logits).ok());
    for (int64_t t = begin; t + 1 < end; ++t) {
      Status s = runner.append({tokens[t]}, /*all_rows=*/false, &logits);
      EXPECT_TRUE(s.ok()) << s.message();
      EXPECT_EQ(logits.size(), size_t(kVocab));
      if (t + 1 < first_target) continue;
      ref.nll_sum += referenceNll(logits, tokens[t + 1]);
      ++ref.scored;
    }
    previous_end = end;
    if (end == n) break;
  }
  return ref;
}

double expectMatchesDecode(int n, int64_t context, int64_t stride, int64_t expected_scored,
                           int32_t prefix = -1) {
  SCOPED_TRACE("n " + std::to_string(n) + " context " + std::to_string(context) + " stride " +
               std::to_string(stride));
  const std::vector<int32_t> tokens = randomTokens(n, static_cast<uint32_t>(n + stride));
  std::unique_ptr<SequenceRunner> runner = makeRunner();
  PerplexityOptions options;
  options.context = context;
  options.stride = stride;
  options.window_prefix = prefix;
  int64_t callbacks = 0, last_scored = 0;
  StatusOr<PerplexityResult> result =
      evaluatePerplexity(*runner, tokens, options, [&](const PerplexityProgress& p) {
        ++callbacks;
        EXPECT_EQ(p.windows_done, callbacks);
        EXPECT_GT(p.nll.count, last_scored);
        last_scored = p.nll.count;
      });
  EXPECT_TRUE(result.ok()) << result.status().message();
  if (!result.ok()) return 0;
  EXPECT_EQ(result->tokens_scored, expected_scored);
  EXPECT_EQ(callbacks, result->num_windows);
  EXPECT_EQ(last_scored, expected_scored);

  std::unique_ptr<SequenceRunner> decoder = makeRunner();
  const DecodeReference ref =
      decodeTokenByToken(*decoder, tokens, context, stride == 0 ? context : stride, prefix);
  EXPECT_EQ(ref.scored, expected_scored);
  const double reference_ppl = static_cast<double>(std::exp(ref.nll_sum / ref.scored));
  EXPECT_TRUE(std::isfinite(result->perplexity));
  EXPECT_GT(result->perplexity, 1.0);
  EXPECT_NEAR(result->perplexity / reference_ppl, 1.0, 1e-4)
      << "windowed " << result->perplexity << " vs decode " << reference_ppl;
  EXPECT_NEAR(result->mean_nll, std::log(result->perplexity), 1e-12);
  return result->perplexity;
}

TEST(PerplexityEvalTest, DisjointWindowsMatchTokenByTokenDecode) {
  expectMatchesDecode(150, 64, 0, 63 + 63 + 21);  // windows of 64, 64, 22 tokens
}

TEST(PerplexityEvalTest, SlidingWindowsMatchTokenByTokenDecode) {
  expectMatchesDecode(150, 64, 24, 149);
}

TEST(PerplexityEvalTest, AWindowPrefixIsFedButNotScored) {
  // Token 7 before every window (the text does not start with it): the same tokens are
  // scored, with other logits.
  const double plain = expectMatchesDecode(150, 64, 0, 63 + 63 + 21);
  const double prefixed = expectMatchesDecode(150, 64, 0, 63 + 63 + 21, /*prefix=*/7);
  EXPECT_NE(plain, prefixed);
}

TEST(PerplexityEvalTest, WindowsLongerThanOneStepMatchTokenByTokenDecode) {
  // 299 scored rows in the first window: two appends of all-row logits.
  expectMatchesDecode(420, 300, 100, 419);
}

TEST(PerplexityEvalTest, RejectsContextBeyondTheModelAndOutOfVocabularyTokens) {
  std::unique_ptr<SequenceRunner> runner = makeRunner();
  PerplexityOptions options;
  options.context = kMaxContext + 1;
  StatusOr<PerplexityResult> too_long = evaluatePerplexity(*runner, randomTokens(10, 1), options);
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("exceeds"), std::string::npos);
  options.context = 16;
  std::vector<int32_t> tokens = randomTokens(10, 2);
  tokens.back() = kVocab;  // the last token is only a target, never fed
  EXPECT_FALSE(evaluatePerplexity(*runner, tokens, options).ok());
  EXPECT_FALSE(evaluatePerplexity(*runner, {5}, options).ok());
}

}  // namespace
}  // namespace ingot
