// Tests of PrefixTree: longest-prefix matching, chaining, LRU eviction of unreferenced leaves.
#include "runtime/kv/prefix_tree.h"

#include <gtest/gtest.h>

#include <numeric>

namespace ingot {
namespace {

constexpr int32_t kB = 4;

std::vector<int32_t> iota(int32_t n, int32_t start = 0) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

/// Allocates blocks for `tokens` (whole blocks only), caches them, and returns them still
/// referenced by the "sequence" the test plays.
std::vector<BlockId> cacheSequence(BlockPool& pool, PrefixTree& tree,
                                   const std::vector<int32_t>& tokens) {
  auto blocks = pool.allocate(static_cast<int32_t>(tokens.size() / kB));
  EXPECT_TRUE(blocks.ok());
  EXPECT_EQ(tree.insert(tokens, *blocks), static_cast<int32_t>(blocks->size()));
  return *blocks;
}

void releaseAll(BlockPool& pool, const std::vector<BlockId>& blocks) {
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) pool.release(*it);
}

TEST(PrefixTree, PrefixMatchStopsAtFirstDifference) {
  BlockPool pool(16);
  PrefixTree tree(&pool, kB);
  const auto tokens = iota(12);
  const auto blocks = cacheSequence(pool, tree, tokens);

  auto query = iota(14);
  query[9] = 999;  // differs inside the third block
  PrefixMatch m = tree.match(query);
  EXPECT_EQ(m.num_tokens, 8);
  EXPECT_EQ(m.blocks, std::vector<BlockId>(blocks.begin(), blocks.begin() + 2));
  EXPECT_EQ(pool.refCount(blocks[0]), 2);
  EXPECT_EQ(pool.refCount(blocks[2]), 1);

  // A difference in the first block matches nothing.
  query[0] = 999;
  EXPECT_EQ(tree.match(query).num_tokens, 0);
  // max_tokens limits the match to whole blocks within it.
  PrefixMatch limited = tree.match(tokens, 11);
  EXPECT_EQ(limited.num_tokens, 8);
  releaseAll(pool, limited.blocks);
  releaseAll(pool, m.blocks);
  releaseAll(pool, blocks);
}

TEST(PrefixTree, EqualBlocksAfterDifferentPrefixesDiffer) {
  BlockPool pool(16);
  PrefixTree tree(&pool, kB);
  std::vector<int32_t> a = {1, 2, 3, 4, 9, 9, 9, 9};
  std::vector<int32_t> b = {5, 6, 7, 8, 9, 9, 9, 9};
  const auto blocks_a = cacheSequence(pool, tree, a);
  PrefixMatch m = tree.match(b);
  EXPECT_EQ(m.num_tokens, 0);
  // Asking for the second block alone is asking for a different first block.
  EXPECT_EQ(tree.match({9, 9, 9, 9}).num_tokens, 0);
  releaseAll(pool, blocks_a);
}

TEST(PrefixTree, EvictsOnlyUnreferencedBlocks) {
  BlockPool pool(8);
  PrefixTree tree(&pool, kB);
  const auto held = cacheSequence(pool, tree, iota(8, 0));
  const auto dropped = cacheSequence(pool, tree, iota(8, 100));
  releaseAll(pool, dropped);
  EXPECT_EQ(pool.numEvictable(), 2);
  EXPECT_EQ(tree.evict(10), 2);
  EXPECT_EQ(tree.numCachedBlocks(), 2);
  for (BlockId b : held) {
    EXPECT_TRUE(tree.contains(b));
    EXPECT_EQ(pool.refCount(b), 1);
  }
  for (BlockId b : dropped) EXPECT_TRUE(pool.isFree(b));
  EXPECT_EQ(tree.evict(10), 0);
  // A match re-references an evictable block and protects it.
  releaseAll(pool, held);
  PrefixMatch m = tree.match(iota(4, 0));
  ASSERT_EQ(m.blocks.size(), 1u);
  EXPECT_EQ(tree.evict(10), 1);  // only the unreferenced child
  EXPECT_TRUE(tree.contains(m.blocks[0]));
  releaseAll(pool, m.blocks);
}

TEST(PrefixTree, LruOrderIsRespected) {
  BlockPool pool(8);
  PrefixTree tree(&pool, kB);
  const auto a = cacheSequence(pool, tree, iota(4, 0));
  const auto b = cacheSequence(pool, tree, iota(4, 100));
  const auto c = cacheSequence(pool, tree, iota(4, 200));
  releaseAll(pool, a);
  releaseAll(pool, b);
  releaseAll(pool, c);
  // Use a again: b is now the least recently used, then c, then a.
  releaseAll(pool, tree.match(iota(4, 0)).blocks);
  ASSERT_EQ(tree.evict(1), 1);
  EXPECT_FALSE(tree.contains(b[0]));
  ASSERT_EQ(tree.evict(1), 1);
  EXPECT_FALSE(tree.contains(c[0]));
  EXPECT_TRUE(tree.contains(a[0]));
}

TEST(PrefixTree, EvictsChildrenBeforeTheirParent) {
  BlockPool pool(8);
  PrefixTree tree(&pool, kB);
  const auto chain = cacheSequence(pool, tree, iota(12));
  releaseAll(pool, chain);
  ASSERT_EQ(tree.evict(1), 1);
  EXPECT_FALSE(tree.contains(chain[2]));
  EXPECT_TRUE(tree.contains(chain[1]));
  ASSERT_EQ(tree.evict(1), 1);
  EXPECT_FALSE(tree.contains(chain[1]));
  EXPECT_TRUE(tree.contains(chain[0]));
}

TEST(PrefixTree, AllocationEvictsWhenFreeListIsEmpty) {
  BlockPool pool(2);
  PrefixTree tree(&pool, kB);
  const auto chain = cacheSequence(pool, tree, iota(8));
  releaseAll(pool, chain);
  EXPECT_EQ(pool.numFree(), 0);
  auto got = pool.allocate(1);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[0], chain[1]);  // the leaf went first
  EXPECT_TRUE(tree.contains(chain[0]));
  pool.release((*got)[0]);
}

TEST(PrefixTree, InsertKeepsExistingBlockAndStopsTheDuplicateChain) {
  BlockPool pool(8);
  PrefixTree tree(&pool, kB);
  const auto first = cacheSequence(pool, tree, iota(4));
  auto dup = pool.allocate(2);
  ASSERT_TRUE(dup.ok());
  EXPECT_EQ(tree.insert(iota(8), *dup), 0);
  EXPECT_FALSE(pool.isCached((*dup)[0]));
  EXPECT_FALSE(pool.isCached((*dup)[1]));
  releaseAll(pool, *dup);
  releaseAll(pool, first);
  EXPECT_EQ(pool.numFree() + pool.numEvictable(), 8);
}

TEST(PrefixTree, ExtendContinuesAChainBlockByBlock) {
  BlockPool pool(8);
  PrefixTree tree(&pool, kB);
  auto blocks = pool.allocate(3);
  ASSERT_TRUE(blocks.ok());
  const auto tokens = iota(12);
  EXPECT_EQ(tree.extend(tokens, *blocks, 1, 0), 1);
  EXPECT_EQ(tree.extend(tokens, *blocks, 3, 1), 3);
  PrefixMatch m = tree.match(tokens);
  EXPECT_EQ(m.blocks, *blocks);
  releaseAll(pool, m.blocks);
  releaseAll(pool, *blocks);
}

TEST(PrefixTree, HitAndMissCountersAccumulate) {
  BlockPool pool(2);
  PrefixTree tree(&pool, kB);
  tree.recordLookup(10, 8);
  tree.recordLookup(5, 0);
  EXPECT_EQ(tree.hitTokens(), 8);
  EXPECT_EQ(tree.missTokens(), 7);
}

}  // namespace
}  // namespace ingot
