// Tests for the tree builders: static top-k shapes, EAGLE-2 dynamic trees (kept set is the
// most confident connected subtree) and sampled trees with and without replacement.
#include "runtime/spec/tree_builder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace ingot {
namespace {

constexpr int32_t kVocab = 10;

/// Next-token distribution depends on the previous token; counts the batched calls.
class TableDraft : public DraftModel {
 public:
  explicit TableDraft(uint64_t seed) : table_(kVocab * kVocab) {
    std::mt19937_64 rng(seed);
    for (int32_t p = 0; p < kVocab; ++p) {
      double total = 0;
      for (int32_t v = 0; v < kVocab; ++v) total += table_[p * kVocab + v] = std::exp((rng() % 1000) / 250.0);
      for (int32_t v = 0; v < kVocab; ++v) table_[p * kVocab + v] /= total;
    }
  }
  int64_t vocab() const override { return kVocab; }
  void nextTokenProbs(const TokenTree& tree, const std::vector<int32_t>& nodes,
                      std::vector<double>* probs) override {
    ++calls;
    probs->clear();
    for (int32_t n : nodes) {
      const double* row = table_.data() + tree.node(n).token * kVocab;
      probs->insert(probs->end(), row, row + kVocab);
    }
  }
  double prob(int32_t prev, int32_t next) const { return table_[prev * kVocab + next]; }
  int calls = 0;

 private:
  std::vector<double> table_;
};

TEST(TopTokensTest, OrdersByProbabilityWithTiesToLowestIdAndSkipsZeros) {
  std::vector<double> p = {0.1, 0.3, 0, 0.3, 0.2, 0};
  EXPECT_EQ(topTokens(p.data(), 6, 3), (std::vector<int32_t>{1, 3, 4}));
  EXPECT_EQ(topTokens(p.data(), 6, 10), (std::vector<int32_t>{1, 3, 4, 0}));
}

TEST(TreeBuilderTest, StaticTreeHasTheTopKShapeOneDraftCallPerLevel) {
  TableDraft draft(1);
  TokenTree t = buildStaticTree(4, {3, 2, 1}, draft);
  EXPECT_EQ(t.size(), 1 + 3 + 6 + 6);
  EXPECT_EQ(draft.calls, 3);
  std::vector<double> row(kVocab);
  for (int32_t v = 0; v < kVocab; ++v) row[v] = draft.prob(4, v);
  std::vector<int32_t> firsts;
  for (int32_t c : t.children(0)) firsts.push_back(t.node(c).token);
  EXPECT_EQ(firsts, topTokens(row.data(), kVocab, 3));
  for (int32_t i = 1; i < t.size(); ++i) {
    const TreeNode& n = t.node(i);
    EXPECT_NEAR(n.path_prob, t.node(n.parent).path_prob * draft.prob(t.node(n.parent).token, n.token),
                1e-15);
  }
}

TEST(TreeBuilderTest, DynamicTreeKeepsTheMostConfidentConnectedNodes) {
  TableDraft draft(2);
  DynamicTreeConfig config{4, 2, 3, 9};
  TokenTree t = buildDynamicTree(7, config, draft);
  EXPECT_EQ(t.size(), 1 + 9);
  EXPECT_LE(t.maxDepth(), 4);
  // Reference: all candidates of the same growth, every kept path prob >= every dropped one.
  TokenTree all = buildDynamicTree(7, DynamicTreeConfig{4, 2, 3, 1000}, draft);
  std::vector<double> probs;
  for (int32_t i = 1; i < all.size(); ++i) probs.push_back(all.node(i).path_prob);
  std::sort(probs.rbegin(), probs.rend());
  std::vector<double> kept;
  for (int32_t i = 1; i < t.size(); ++i) kept.push_back(t.node(i).path_prob);
  std::sort(kept.rbegin(), kept.rend());
  for (size_t i = 0; i < kept.size(); ++i) EXPECT_NEAR(kept[i], probs[i], 1e-15);
  for (int32_t i = 1; i < t.size(); ++i) EXPECT_LT(t.node(i).parent, i);
}

TEST(TreeBuilderTest, SampledTreeWithoutReplacementHasDistinctSiblings) {
  TableDraft draft(3);
  SpecRng rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    SampledTree s = buildSampledTree(2, {4, 3}, DraftSampling::kSampledWithoutReplacement, draft, rng);
    EXPECT_EQ(s.tree.size(), 1 + 4 + 12);
    ASSERT_EQ(s.draft_probs.size(), static_cast<size_t>(s.tree.size()) * kVocab);
    for (int32_t i = 0; i < s.tree.size(); ++i) {
      std::vector<int32_t> tokens;
      for (int32_t c : s.tree.children(i)) tokens.push_back(s.tree.node(c).token);
      std::sort(tokens.begin(), tokens.end());
      EXPECT_EQ(std::adjacent_find(tokens.begin(), tokens.end()), tokens.end());
      if (!s.tree.children(i).empty()) {
        EXPECT_DOUBLE_EQ(s.draft_probs[i * kVocab + 3], draft.prob(s.tree.node(i).token, 3));
      }
    }
  }
}

TEST(TreeBuilderTest, SampledTreeWithReplacementDrawsFromTheDraft) {
  TableDraft draft(4);
  SpecRng rng(6);
  std::vector<int> counts(kVocab, 0);
  const int trials = 4000;
  for (int trial = 0; trial < trials; ++trial) {
    SampledTree s = buildSampledTree(1, {2}, DraftSampling::kSampledWithReplacement, draft, rng);
    ++counts[s.tree.node(s.tree.children(0)[1]).token];  // the second draw is also ~ q
  }
  for (int32_t v = 0; v < kVocab; ++v)
    EXPECT_NEAR(counts[v] / double(trials), draft.prob(1, v), 0.03) << v;
}

}  // namespace
}  // namespace ingot
