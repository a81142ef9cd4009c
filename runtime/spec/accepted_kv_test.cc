// Tests for planAcceptedKv: the accepted path is compacted to offsets 1..d without clobbering.
#include "runtime/spec/accepted_kv.h"

#include <gtest/gtest.h>

#include <random>

namespace ingot {
namespace {

TEST(AcceptedKvTest, MovesTheAcceptedBranchNextToTheRoot) {
  TokenTree t(100);
  int a = t.addChild(0, 1);
  int b = t.addChild(0, 2);
  t.addChild(a, 3);
  int e = t.addChild(b, 5);
  t.addChild(e, 6);
  FlatTree f = t.flatten(0);  // 0 root, 1 a, 2 b, 3 c, 4 e, 5 f(6)
  auto r = verifyTreeGreedy(f, {2, 0, 5, 0, 6, 9});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->accepted, (std::vector<int32_t>{2, 4, 5}));
  AcceptedKv plan = planAcceptedKv(f, *r);
  EXPECT_EQ(plan.kept, 4);
  EXPECT_EQ(plan.moves, (std::vector<KvMove>{{2, 1}, {4, 2}, {5, 3}}));
}

TEST(AcceptedKvTest, ApplyingMovesInOrderLeavesThePathInPlaceOnRandomTrees) {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 300; ++trial) {
    TokenTree t(0);
    const int n = 2 + static_cast<int>(rng() % 40);
    for (int i = 1; i < n; ++i) t.addChild(static_cast<int32_t>(rng() % t.size()), i);
    FlatTree f = t.flatten(0, trial % 2 ? TreeOrder::kDepthFirst : TreeOrder::kBreadthFirst);
    // Accept a random root-to-node path: target picks a random child at each step.
    std::vector<int32_t> choice(f.size(), -1);
    for (int32_t i = 0; i < f.size(); ++i)
      if (f.numChildren(i) > 0) choice[i] = f.tokens[f.childrenBegin(i)[rng() % f.numChildren(i)]];
    if (rng() % 3 == 0) choice[0] = -1;
    auto r = verifyTreeGreedy(f, choice);
    ASSERT_TRUE(r.ok());
    AcceptedKv plan = planAcceptedKv(f, *r);
    std::vector<int32_t> kv(f.tokens);  // "KV" of each slot = its token
    for (const KvMove& m : plan.moves) kv[m.to] = kv[m.from];
    ASSERT_EQ(plan.kept, 1 + static_cast<int32_t>(r->accepted.size()));
    EXPECT_EQ(kv[0], f.tokens[0]);
    for (size_t d = 0; d < r->accepted.size(); ++d)
      EXPECT_EQ(kv[d + 1], f.tokens[r->accepted[d]]) << trial;
  }
}

}  // namespace
}  // namespace ingot
