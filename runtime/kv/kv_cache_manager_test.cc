// Tests of KvCacheManager: admission with prefix reuse, caching rules, accounting.
#include "runtime/kv/kv_cache_manager.h"

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

void expectAllReturned(const KvCacheManager& kv) {
  const KvUsage u = kv.usage();
  EXPECT_EQ(u.used, 0);
  EXPECT_EQ(u.free + u.cached, u.total);
}

TEST(KvCacheManager, AdmitReusesLongestCachedPrefix) {
  KvCacheManager kv(16, kB);
  auto a = kv.admit(iota(10));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->num_cached_tokens, 0);
  EXPECT_EQ(a->num_tokens_to_compute, 10);
  ASSERT_TRUE(kv.markComputed(a->id, 10).ok());
  const std::vector<BlockId> a_blocks = kv.table(a->id)->blocks();
  ASSERT_TRUE(kv.free(a->id).ok());

  auto prompt = iota(10);
  prompt.push_back(77);
  auto b = kv.admit(prompt);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->num_cached_tokens, 8);
  EXPECT_EQ(b->num_tokens_to_compute, 3);
  const BlockTable* t = kv.table(b->id);
  EXPECT_EQ(t->blocks()[0], a_blocks[0]);
  EXPECT_EQ(t->blocks()[1], a_blocks[1]);
  EXPECT_EQ(t->numTokens(), 11);
  EXPECT_EQ(kv.prefixHitTokens(), 8);
  EXPECT_EQ(kv.prefixMissTokens(), 10 + 3);
  ASSERT_TRUE(kv.free(b->id).ok());
  expectAllReturned(kv);
}

TEST(KvCacheManager, AlwaysComputesTheLastPromptToken) {
  KvCacheManager kv(16, kB);
  auto a = kv.admit(iota(8));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(kv.markComputed(a->id, 8).ok());
  ASSERT_TRUE(kv.free(a->id).ok());
  auto b = kv.admit(iota(8));  // fully cached, but its last token must yield logits
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->num_cached_tokens, 4);
  EXPECT_EQ(b->num_tokens_to_compute, 4);
  ASSERT_TRUE(kv.free(b->id).ok());
}

TEST(KvCacheManager, PartialLastBlockIsNotCached) {
  KvCacheManager kv(16, kB);
  auto a = kv.admit(iota(7));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(kv.markComputed(a->id, 7).ok());
  const BlockId partial = kv.table(a->id)->blocks()[1];
  EXPECT_TRUE(kv.pool().isCached(kv.table(a->id)->blocks()[0]));
  EXPECT_FALSE(kv.pool().isCached(partial));
  ASSERT_TRUE(kv.free(a->id).ok());
  EXPECT_TRUE(kv.pool().isFree(partial));
  EXPECT_EQ(kv.usage().cached, 1);
  auto b = kv.admit(iota(9));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->num_cached_tokens, 4);
  ASSERT_TRUE(kv.free(b->id).ok());
}

TEST(KvCacheManager, UncomputedBlocksAreNotCached) {
  KvCacheManager kv(16, kB);
  auto a = kv.admit(iota(12));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(kv.markComputed(a->id, 5).ok());  // a chunk of the prefill
  EXPECT_EQ(kv.prefixTree().numCachedBlocks(), 1);
  ASSERT_TRUE(kv.free(a->id).ok());  // preempted mid-prefill
  EXPECT_EQ(kv.usage().cached, 1);
  EXPECT_FALSE(kv.markComputed(a->id, 6).ok());
}

TEST(KvCacheManager, OutOfBlocksLeavesNothingHalfAllocated) {
  KvCacheManager kv(4, kB);
  auto a = kv.admit(iota(8));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(kv.markComputed(a->id, 8).ok());
  auto other = kv.admit(iota(4, 500));
  ASSERT_TRUE(other.ok());
  const KvUsage before = kv.usage();
  // Shares a's first block, needs three more; one is free.
  auto prompt = iota(4);
  for (int i = 0; i < 10; ++i) prompt.push_back(900 + i);
  EXPECT_FALSE(kv.canAdmit(static_cast<int32_t>(prompt.size())));
  auto b = kv.admit(prompt);
  ASSERT_FALSE(b.ok());
  EXPECT_TRUE(isOutOfKvBlocks(b.status()));
  const KvUsage after = kv.usage();
  EXPECT_EQ(after.used, before.used);
  EXPECT_EQ(after.free, before.free);
  EXPECT_EQ(kv.pool().refCount(kv.table(a->id)->blocks()[0]), 1);
  EXPECT_EQ(kv.numSequences(), 2);
  EXPECT_EQ(kv.prefixHitTokens(), 0);  // a refused admission is not a lookup

  // Appends fail the same way and leave the sequence as it was.
  ASSERT_TRUE(kv.appendTokens(other->id, iota(4)).ok());  // takes the last free block
  auto r = kv.appendTokens(other->id, {1});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(isOutOfKvBlocks(r.status()));
  EXPECT_EQ(kv.table(other->id)->numTokens(), 8);
  ASSERT_TRUE(kv.free(a->id).ok());
  ASSERT_TRUE(kv.free(other->id).ok());
  expectAllReturned(kv);
}

TEST(KvCacheManager, AllocationEvictsCachedBlocksWhenPoolIsEmpty) {
  KvCacheManager kv(4, kB);
  auto a = kv.admit(iota(16));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(kv.markComputed(a->id, 16).ok());
  ASSERT_TRUE(kv.free(a->id).ok());
  EXPECT_EQ(kv.usage().cached, 4);
  EXPECT_EQ(kv.usage().free, 0);
  EXPECT_TRUE(kv.canAdmit(16));
  auto b = kv.admit(iota(16, 1000));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(kv.usage().used, 4);
  EXPECT_EQ(kv.prefixTree().numCachedBlocks(), 0);
  ASSERT_TRUE(kv.free(b->id).ok());
}

TEST(KvCacheManager, ForkSharesBlocksAndCopiesOnWrite) {
  KvCacheManager kv(16, kB);
  auto a = kv.admit(iota(6));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(kv.markComputed(a->id, 6).ok());
  auto b = kv.fork(a->id);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(kv.table(*b)->blocks(), kv.table(a->id)->blocks());
  EXPECT_EQ(kv.blocksNeededToAppend(*b, 1), 1);
  auto ra = kv.appendTokens(a->id, {42});
  ASSERT_TRUE(ra.ok());
  ASSERT_EQ(ra->copies.size(), 1u);
  EXPECT_EQ(ra->copies[0].src, kv.table(*b)->blocks()[1]);
  EXPECT_EQ(ra->copies[0].dst, kv.table(a->id)->blocks()[1]);
  auto rb = kv.appendTokens(*b, {43});
  ASSERT_TRUE(rb.ok());
  EXPECT_TRUE(rb->copies.empty());
  EXPECT_EQ(kv.usage().used, 3);
  ASSERT_TRUE(kv.free(a->id).ok());
  ASSERT_TRUE(kv.free(*b).ok());
  expectAllReturned(kv);
}

TEST(KvCacheManager, FreeReturnsEveryBlock) {
  KvCacheManager kv(32, kB);
  std::vector<SeqId> seqs;
  for (int i = 0; i < 4; ++i) {
    auto s = kv.admit(iota(9 + i, i % 2 ? 0 : 300));
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE(kv.markComputed(s->id, 9 + i).ok());
    seqs.push_back(s->id);
  }
  auto f = kv.fork(seqs[1]);
  ASSERT_TRUE(f.ok());
  seqs.push_back(*f);
  for (SeqId s : seqs) ASSERT_TRUE(kv.appendTokens(s, {7, 8, 9}).ok());
  for (SeqId s : seqs) ASSERT_TRUE(kv.free(s).ok());
  expectAllReturned(kv);
  EXPECT_EQ(kv.numSequences(), 0);
  const int32_t cached = kv.usage().cached;
  EXPECT_GT(cached, 0);
  EXPECT_EQ(kv.evict(1000), cached);
  EXPECT_EQ(kv.usage().free, kv.usage().total);
}

TEST(KvCacheManager, DisabledPrefixCacheNeverReuses) {
  KvCacheManager kv(8, kB, /*enable_prefix_cache=*/false);
  auto a = kv.admit(iota(8));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(kv.markComputed(a->id, 8).ok());
  ASSERT_TRUE(kv.free(a->id).ok());
  EXPECT_EQ(kv.usage().free, 8);
  auto b = kv.admit(iota(8));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->num_cached_tokens, 0);
  ASSERT_TRUE(kv.free(b->id).ok());
}

TEST(KvCacheManager, RejectsBadArguments) {
  KvCacheManager kv(8, kB);
  EXPECT_FALSE(kv.admit({}).ok());
  EXPECT_FALSE(kv.appendTokens(123, {1}).ok());
  EXPECT_FALSE(kv.fork(123).ok());
  EXPECT_FALSE(kv.free(123).ok());
  EXPECT_EQ(kv.table(123), nullptr);
  auto a = kv.admit(iota(3));
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(kv.markComputed(a->id, 4).ok());
  ASSERT_TRUE(kv.free(a->id).ok());
}

}  // namespace
}  // namespace ingot

namespace ingot {
namespace {

TEST(KvCacheManagerSpeculationTest, TruncateAndRewriteTouchOnlyUncomputedTokens) {
  KvCacheManager kv(16, 4);
  StatusOr<SequenceKv> a = kv.admit({1, 2, 3, 4, 5});
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(kv.markComputed(a->id, 5).ok());
  ASSERT_TRUE(kv.appendTokens(a->id, {6, 7, 8, 9, 10, 11}).ok());  // 11 tokens, 3 blocks
  EXPECT_EQ(kv.usage().used, 3);
  EXPECT_FALSE(kv.truncate(a->id, 4).ok());             // below the computed tokens
  EXPECT_FALSE(kv.rewriteTokens(a->id, 4, {0}).ok());   // a computed position
  EXPECT_FALSE(kv.rewriteTokens(a->id, 10, {0, 0}).ok());  // past the end
  ASSERT_TRUE(kv.rewriteTokens(a->id, 5, {60, 70}).ok());
  ASSERT_TRUE(kv.truncate(a->id, 7).ok());
  EXPECT_EQ(kv.table(a->id)->tokens(), (std::vector<int32_t>{1, 2, 3, 4, 5, 60, 70}));
  EXPECT_EQ(kv.usage().used, 2);
  ASSERT_TRUE(kv.markComputed(a->id, 7).ok());
  ASSERT_TRUE(kv.appendTokens(a->id, {80}).ok());
  ASSERT_TRUE(kv.markComputed(a->id, 8).ok());
  ASSERT_TRUE(kv.free(a->id).ok());
  // The cache holds the rewritten tokens, not the truncated ones.
  StatusOr<SequenceKv> b = kv.admit({1, 2, 3, 4, 5, 60, 70, 80, 9});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->num_cached_tokens, 8);
  StatusOr<SequenceKv> c = kv.admit({1, 2, 3, 4, 5, 6, 7, 8, 9});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->num_cached_tokens, 4);
}

}  // namespace
}  // namespace ingot
