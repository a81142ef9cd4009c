// Tests for TokenTree: flattening order, rope positions, parents and the ancestor mask bits.
#include "runtime/spec/token_tree.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace ingot {
namespace {

// root(100) -> a(1), b(2); a -> c(3), d(4); b -> e(5); c -> f(6).
TokenTree handTree() {
  TokenTree t(100);
  int a = t.addChild(0, 1);
  int b = t.addChild(0, 2);
  int c = t.addChild(a, 3);
  t.addChild(a, 4);
  t.addChild(b, 5);
  t.addChild(c, 6);
  return t;
}

bool isAncestorOrSelf(const FlatTree& f, int32_t kv, int32_t q) {
  for (int32_t i = q; i >= 0; i = f.parents[i])
    if (i == kv) return true;
  return false;
}

TokenTree randomTree(int32_t n, std::mt19937_64& rng) {
  TokenTree t(static_cast<int32_t>(rng() % 1000));
  for (int32_t i = 1; i < n; ++i)
    t.addChild(static_cast<int32_t>(rng() % t.size()), static_cast<int32_t>(rng() % 1000));
  return t;
}

TEST(TokenTreeTest, BreadthFirstFlattenGivesTokensParentsPositionsAndMask) {
  FlatTree f = handTree().flatten(/*base_position=*/40);
  EXPECT_EQ(f.tokens, (std::vector<int32_t>{100, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(f.parents, (std::vector<int32_t>{-1, 0, 0, 1, 1, 2, 3}));
  EXPECT_EQ(f.positions, (std::vector<int32_t>{40, 41, 41, 42, 42, 42, 43}));
  EXPECT_EQ(f.depths, (std::vector<int32_t>{0, 1, 1, 2, 2, 2, 3}));
  ASSERT_EQ(f.words_per_row, 1);
  EXPECT_EQ(f.ancestor_mask,
            (std::vector<uint64_t>{0b1, 0b11, 0b101, 0b1011, 0b10011, 0b100101, 0b1001011}));
  EXPECT_EQ(f.child_offsets, (std::vector<int32_t>{0, 2, 4, 5, 6, 6, 6, 6}));
  EXPECT_EQ(f.child_list, (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
}

TEST(TokenTreeTest, DepthFirstFlattenKeepsSiblingOrderAndIsTopological) {
  FlatTree f = handTree().flatten(0, TreeOrder::kDepthFirst);
  EXPECT_EQ(f.tokens, (std::vector<int32_t>{100, 1, 3, 6, 4, 2, 5}));
  EXPECT_EQ(f.parents, (std::vector<int32_t>{-1, 0, 1, 2, 1, 0, 5}));
  EXPECT_EQ(f.positions, (std::vector<int32_t>{0, 1, 2, 3, 2, 1, 2}));
  for (int32_t i = 1; i < f.size(); ++i) EXPECT_LT(f.parents[i], i);
}

TEST(TokenTreeTest, MaskMatchesAncestorRelationOnRandomTreesPastOneWord) {
  std::mt19937_64 rng(7);
  for (int32_t n : {1, 2, 63, 64, 65, 128, 129, 300}) {
    TokenTree tree = randomTree(n, rng);
    for (TreeOrder order : {TreeOrder::kBreadthFirst, TreeOrder::kDepthFirst}) {
      FlatTree f = tree.flatten(5, order);
      ASSERT_EQ(f.size(), n);
      ASSERT_EQ(f.words_per_row, (n + 63) / 64);
      ASSERT_EQ(f.ancestor_mask.size(), static_cast<size_t>(n) * f.words_per_row);
      for (int32_t q = 0; q < n; ++q) {
        EXPECT_EQ(f.positions[q], 5 + tree.node(f.source[q]).depth);
        EXPECT_EQ(f.tokens[q], tree.node(f.source[q]).token);
        if (q > 0) {
          EXPECT_EQ(f.source[f.parents[q]], tree.node(f.source[q]).parent);
        }
        for (int32_t w = 0; w < f.words_per_row; ++w) {
          for (int32_t bit = 0; bit < 64; ++bit) {
            int32_t kv = w * 64 + bit;
            bool set = (f.ancestor_mask[q * f.words_per_row + w] >> bit) & 1;
            EXPECT_EQ(set, kv < n && isAncestorOrSelf(f, kv, q)) << n << " " << q << " " << kv;
          }
        }
      }
    }
  }
}

TEST(TokenTreeTest, Words32FormIsTheLittleEndianViewOfTheMask) {
  std::mt19937_64 rng(11);
  FlatTree f = randomTree(150, rng).flatten(0);
  const int32_t words32 = 2 * f.words_per_row;
  std::vector<int32_t> w32 = f.ancestorMaskWords32(words32);
  for (int32_t q = 0; q < f.size(); ++q)
    for (int32_t kv = 0; kv < f.size(); ++kv)
      EXPECT_EQ((w32[q * words32 + kv / 32] >> (kv % 32)) & 1, f.isAncestorOrSelf(kv, q) ? 1 : 0);
  const uint16_t probe = 1;
  if (*reinterpret_cast<const uint8_t*>(&probe) == 1) {  // little-endian host
    EXPECT_EQ(std::memcmp(w32.data(), f.ancestor_mask.data(), w32.size() * 4), 0);
  }
  // A wider row is zero-padded.
  std::vector<int32_t> padded = f.ancestorMaskWords32(words32 + 3);
  for (int32_t q = 0; q < f.size(); ++q)
    for (int32_t w = words32; w < words32 + 3; ++w) EXPECT_EQ(padded[q * (words32 + 3) + w], 0);
}

TEST(TokenTreeTest, PathsChildrenAndPathProbabilities) {
  TokenTree t(9);
  int a = t.addChild(0, 1, 0.5);
  int b = t.addChild(a, 2, 0.5);
  int c = t.addChild(a, 3, 0.25);
  EXPECT_EQ(t.children(0), (std::vector<int32_t>{a}));
  EXPECT_EQ(t.children(a), (std::vector<int32_t>{b, c}));
  EXPECT_EQ(t.pathTo(c), (std::vector<int32_t>{0, a, c}));
  EXPECT_EQ(t.pathTokens(b), (std::vector<int32_t>{9, 1, 2}));
  EXPECT_DOUBLE_EQ(t.node(c).path_prob, 0.125);
  EXPECT_EQ(t.maxDepth(), 2);
  FlatTree f = t.flatten(0);
  EXPECT_EQ(f.pathTo(3), (std::vector<int32_t>{0, 1, 3}));
}

TEST(TokenTreeTest, GatherRowsFollowsFlatOrder) {
  TokenTree t = handTree();
  FlatTree f = t.flatten(0, TreeOrder::kDepthFirst);
  std::vector<double> by_node;
  for (int32_t i = 0; i < t.size(); ++i) by_node.insert(by_node.end(), {i + 0.0, i + 0.5});
  std::vector<double> flat = f.gatherRows(by_node, 2);
  for (int32_t i = 0; i < f.size(); ++i) {
    EXPECT_EQ(flat[2 * i], f.source[i]);
    EXPECT_EQ(flat[2 * i + 1], f.source[i] + 0.5);
  }
}

}  // namespace
}  // namespace ingot
