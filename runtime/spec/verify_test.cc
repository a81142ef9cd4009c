// Tests for tree verification: greedy exact match, tie-breaking, the deterministic and
// sampled acceptance rules at their extremes, and input checking.
#include "runtime/spec/verify.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ingot {
namespace {

// root(100) -> a(1), b(2); a -> c(3), d(4); b -> e(5); c -> f(6). BFS flat order.
FlatTree handTree() {
  TokenTree t(100);
  int a = t.addChild(0, 1);
  int b = t.addChild(0, 2);
  int c = t.addChild(a, 3);
  t.addChild(a, 4);
  t.addChild(b, 5);
  t.addChild(c, 6);
  return t.flatten(0);
}

TEST(VerifyGreedyTest, FollowsTargetChoicesDownTheTree) {
  FlatTree f = handTree();  // flat: 0 root, 1 a, 2 b, 3 c, 4 d, 5 e, 6 f
  // Target picks 1 after root, 4 after a, then 9 after d (d is a leaf).
  std::vector<int32_t> choice = {1, 4, 0, 0, 9, 0, 0};
  auto r = verifyTreeGreedy(f, choice);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->accepted, (std::vector<int32_t>{1, 4}));
  EXPECT_EQ(r->last_node, 4);
  EXPECT_EQ(r->bonus_token, 9);
  EXPECT_EQ(r->tokens, (std::vector<int32_t>{1, 4, 9}));
}

TEST(VerifyGreedyTest, MismatchAtTheRootAcceptsNothing) {
  FlatTree f = handTree();
  auto r = verifyTreeGreedy(f, {7, 3, 5, 6, 0, 0, 0});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->accepted.empty());
  EXPECT_EQ(r->last_node, 0);
  EXPECT_EQ(r->tokens, (std::vector<int32_t>{7}));
}

TEST(VerifyGreedyTest, WholePathAcceptedGivesBonusAfterTheLeaf) {
  FlatTree f = handTree();
  auto r = verifyTreeGreedy(f, {1, 3, 0, 6, 0, 0, 11});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tokens, (std::vector<int32_t>{1, 3, 6, 11}));
}

TEST(VerifyGreedyTest, LogitTiesGoToTheLowestTokenId) {
  TokenTree t(0);
  t.addChild(0, 2);
  t.addChild(0, 3);
  FlatTree f = t.flatten(0);
  // Root row: tokens 2 and 3 tie for the max -> 2; node 2's row: NaN never wins, 0 and 4 tie.
  const float nan = std::nanf("");
  std::vector<float> logits = {0, 1, 5, 5, 0,  //
                               nan, 0, 0, 0, 0, //
                               3, 1, nan, 2, 3};
  auto r = verifyTreeGreedyLogits(f, logits.data(), 5);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tokens, (std::vector<int32_t>{2, 1}));
}

TEST(VerifySampledTest, DeterministicChildIsAcceptedWithTargetProbability) {
  TokenTree t(0);
  t.addChild(0, 1);
  FlatTree f = t.flatten(0);
  SpecRng rng(3);
  // p(1) = 1 at the root: always accepted; p(1) = 0: never, and the bonus avoids token 1.
  std::vector<double> sure = {0, 1, 0, 0, 0.5, 0.5};
  std::vector<double> never = {0.5, 0, 0.5, 0.2, 0.3, 0.5};
  for (int i = 0; i < 200; ++i) {
    auto a = verifyTreeSampled(f, {sure.data(), 2, 3}, DraftSampling::kDeterministic, {}, rng);
    ASSERT_TRUE(a.ok()) << a.status().message();
    EXPECT_EQ(a->accepted, (std::vector<int32_t>{1}));
    EXPECT_NE(a->bonus_token, 0);
    auto b = verifyTreeSampled(f, {never.data(), 2, 3}, DraftSampling::kDeterministic, {}, rng);
    ASSERT_TRUE(b.ok());
    EXPECT_TRUE(b->accepted.empty());
    EXPECT_NE(b->bonus_token, 1);
  }
}

TEST(VerifySampledTest, DraftEqualToTargetIsAlwaysAccepted) {
  TokenTree t(0);
  t.addChild(t.addChild(0, 1), 2);
  FlatTree f = t.flatten(0);
  std::vector<double> p = {0.2, 0.3, 0.5, 0.2, 0.3, 0.5, 0.2, 0.3, 0.5};
  SpecRng rng(5);
  for (int i = 0; i < 200; ++i) {
    auto r = verifyTreeSampled(f, {p.data(), 3, 3}, DraftSampling::kSampledWithoutReplacement,
                               {p.data(), 3, 3}, rng);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->accepted.size(), 2u);
  }
}

TEST(VerifySampledTest, RejectsMalformedInputs) {
  FlatTree f = handTree();
  SpecRng rng(1);
  std::vector<double> rows(7 * 8, 1.0);
  // Wrong number of rows.
  EXPECT_FALSE(
      verifyTreeSampled(f, {rows.data(), 6, 8}, DraftSampling::kDeterministic, {}, rng).ok());
  // Tree token 100 is outside an 8-token vocabulary.
  EXPECT_FALSE(
      verifyTreeSampled(f, {rows.data(), 7, 8}, DraftSampling::kDeterministic, {}, rng).ok());
  f.tokens[0] = 0;
  EXPECT_TRUE(
      verifyTreeSampled(f, {rows.data(), 7, 8}, DraftSampling::kDeterministic, {}, rng).ok());
  // Sampled drafts need draft rows, and a child the draft gives no mass cannot be drawn.
  EXPECT_FALSE(verifyTreeSampled(f, {rows.data(), 7, 8}, DraftSampling::kSampledWithReplacement,
                                 {}, rng)
                   .ok());
  std::vector<double> draft(7 * 8, 1.0);
  draft[1] = 0;  // root row, token 1 = flat node 1's token
  auto bad = verifyTreeSampled(f, {rows.data(), 7, 8}, DraftSampling::kSampledWithReplacement,
                               {draft.data(), 7, 8}, rng);
  // Rejected only if the draw reaches node 1 (it is the first child): always.
  EXPECT_FALSE(bad.ok());
  EXPECT_FALSE(verifyTreeGreedy(f, {1, 2}).ok());
}

TEST(SampleFromTest, NeverReturnsZeroProbabilityTokens) {
  std::vector<double> p = {0, 0.25, 0, 0.75, 0};
  SpecRng rng(9);
  int counts[5] = {};
  for (int i = 0; i < 4000; ++i) ++counts[sampleFrom(p.data(), 5, rng)];
  EXPECT_EQ(counts[0] + counts[2] + counts[4], 0);
  EXPECT_NEAR(counts[1] / 4000.0, 0.25, 0.03);
}

}  // namespace
}  // namespace ingot
