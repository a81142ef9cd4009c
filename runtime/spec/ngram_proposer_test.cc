// Tests for NgramProposer: most recent match, longest suffix first, and the incremental
// index against a brute-force scan of random histories.
#include "runtime/spec/ngram_proposer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace ingot {
namespace {

using Tokens = std::vector<int32_t>;

NgramProposer proposerFor(const Tokens& history, NgramConfig config = {}) {
  NgramProposer p(config);
  p.append(history);
  return p;
}

/// Starts of the continuations of the last n tokens, newest first, distinct first tokens.
std::vector<int64_t> bruteContinuations(const Tokens& h, int32_t n) {
  std::vector<int64_t> out;
  const int64_t len = static_cast<int64_t>(h.size());
  if (len < n) return out;
  std::vector<int32_t> seen;
  for (int64_t s = len - 1; s >= n; --s) {
    if (!std::equal(h.begin() + (s - n), h.begin() + s, h.end() - n)) continue;
    if (std::find(seen.begin(), seen.end(), h[s]) != seen.end()) continue;
    seen.push_back(h[s]);
    out.push_back(s);
  }
  return out;
}

Tokens bruteChain(const Tokens& h, NgramConfig config, int32_t k) {
  for (int32_t n = config.max_ngram; n >= config.min_ngram; --n) {
    auto found = bruteContinuations(h, n);
    if (found.empty()) continue;
    int64_t end = std::min<int64_t>(found[0] + k, h.size());
    return Tokens(h.begin() + found[0], h.begin() + end);
  }
  return {};
}

std::vector<Tokens> bruteBranches(const Tokens& h, NgramConfig config, int32_t k, int32_t max) {
  std::vector<Tokens> branches;
  std::vector<int32_t> firsts;
  for (int32_t n = config.max_ngram; n >= config.min_ngram; --n) {
    for (int64_t s : bruteContinuations(h, n)) {
      if (static_cast<int32_t>(branches.size()) >= max) return branches;
      if (std::find(firsts.begin(), firsts.end(), h[s]) != firsts.end()) continue;
      firsts.push_back(h[s]);
      branches.emplace_back(h.begin() + s, h.begin() + std::min<int64_t>(s + k, h.size()));
    }
  }
  return branches;
}

std::vector<Tokens> treeBranches(const TokenTree& tree) {
  std::vector<Tokens> out;
  for (int32_t c : tree.children(0)) {
    Tokens chain;
    for (int32_t v = c;;) {
      chain.push_back(tree.node(v).token);
      if (tree.children(v).empty()) break;
      EXPECT_EQ(tree.children(v).size(), 1u);
      v = tree.children(v)[0];
    }
    out.push_back(chain);
  }
  return out;
}

TEST(NgramProposerTest, ProposesWhatFollowedTheMostRecentOccurrence) {
  NgramProposer p = proposerFor({1, 2, 3, 9, 1, 2, 3, 7, 5, 1, 2, 3});
  EXPECT_EQ(p.proposeChain(3), (Tokens{7, 5, 1}));
  EXPECT_EQ(p.proposeChain(1), (Tokens{7}));
}

TEST(NgramProposerTest, PrefersTheLongestMatchingSuffix) {
  // "6" alone last occurred at index 5 (followed by 12), but "4 5 6" occurred at 0..2.
  NgramProposer p = proposerFor({4, 5, 6, 10, 11, 6, 12, 4, 5, 6});
  EXPECT_EQ(p.proposeChain(2), (Tokens{10, 11}));
  // With n limited to 1 the more recent unigram match wins.
  NgramProposer unigram = proposerFor({4, 5, 6, 10, 11, 6, 12, 4, 5, 6}, {1, 1});
  EXPECT_EQ(unigram.proposeChain(2), (Tokens{12, 4}));
}

TEST(NgramProposerTest, FallsBackToShorterSuffixesAndStopsAtTheHistoryEnd) {
  NgramProposer p = proposerFor({8, 3, 1, 2, 3});  // "1 2 3" and "2 3" unseen; "3" at 1
  EXPECT_EQ(p.proposeChain(10), (Tokens{1, 2, 3}));
  NgramProposer none = proposerFor({1, 2, 3, 4});
  EXPECT_TRUE(none.proposeChain(4).empty());
  EXPECT_EQ(none.proposeTree(4, 3).size(), 1);
  EXPECT_TRUE(NgramProposer().proposeChain(3).empty());
}

TEST(NgramProposerTest, SelfOverlappingRepeatsAreFound) {
  NgramProposer p = proposerFor({5, 5, 5});
  EXPECT_EQ(p.proposeChain(4), (Tokens{5}));  // "5 5" ended at 1, followed by the last 5
}

TEST(NgramProposerTest, TreeHasDistinctContinuationsNewestAndLongestFirst) {
  NgramProposer p = proposerFor({1, 2, 7, 8, 3, 2, 9, 4, 1, 2, 6, 6, 5, 2, 9, 9, 1, 2});
  TokenTree tree = p.proposeTree(2, 3);
  EXPECT_EQ(tree.node(0).token, 2);
  // "1 2" -> 6 6 (newest), 7 8; then "2" adds 9 9 (newest of its distinct continuations).
  EXPECT_EQ(treeBranches(tree), (std::vector<Tokens>{{6, 6}, {7, 8}, {9, 9}}));
}

TEST(NgramProposerTest, IncrementalIndexEqualsBruteForceOnRandomHistories) {
  std::mt19937_64 rng(1234);
  for (int trial = 0; trial < 40; ++trial) {
    const int32_t vocab = 2 + static_cast<int32_t>(rng() % 6);
    NgramConfig config{1 + static_cast<int32_t>(rng() % 2), 2 + static_cast<int32_t>(rng() % 3)};
    NgramProposer p(config);
    Tokens history;
    for (int step = 0; step < 250; ++step) {
      int32_t t = static_cast<int32_t>(rng() % vocab);
      history.push_back(t);
      p.append(t);
      const int32_t k = 1 + static_cast<int32_t>(rng() % 5);
      ASSERT_EQ(p.proposeChain(k), bruteChain(history, config, k)) << trial << " " << step;
      const int32_t branches = 1 + static_cast<int32_t>(rng() % kMaxNgramContinuations);
      ASSERT_EQ(treeBranches(p.proposeTree(k, branches)),
                bruteBranches(history, config, k, branches))
          << trial << " " << step;
      for (int32_t n = config.min_ngram; n <= config.max_ngram; ++n) {
        auto want = bruteContinuations(history, n);
        if (want.size() > static_cast<size_t>(kMaxNgramContinuations))
          want.resize(kMaxNgramContinuations);
        ASSERT_EQ(p.continuations(n, kMaxNgramContinuations), want) << trial << " " << step;
      }
    }
  }
}

}  // namespace
}  // namespace ingot
