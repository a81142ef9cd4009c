// Tests of BlockPool: distinct allocation, all-or-nothing, reference counts, cached blocks.
#include "runtime/kv/block_pool.h"

#include <gtest/gtest.h>

#include <set>

namespace ingot {
namespace {

TEST(BlockPool, NeverHandsOutABlockTwice) {
  BlockPool pool(8);
  auto a = pool.allocate(5);
  ASSERT_TRUE(a.ok());
  auto b = pool.allocate(3);
  ASSERT_TRUE(b.ok());
  std::set<BlockId> seen(a->begin(), a->end());
  seen.insert(b->begin(), b->end());
  EXPECT_EQ(seen.size(), 8u);
  EXPECT_EQ(pool.numFree(), 0);
  EXPECT_EQ(pool.numInUse(), 8);
  for (BlockId x : seen) EXPECT_EQ(pool.refCount(x), 1);
}

TEST(BlockPool, AllocationIsAllOrNothing) {
  BlockPool pool(4);
  auto a = pool.allocate(3);
  ASSERT_TRUE(a.ok());
  auto b = pool.allocate(2);
  ASSERT_FALSE(b.ok());
  EXPECT_TRUE(isOutOfKvBlocks(b.status())) << b.status().toString();
  EXPECT_FALSE(isOutOfKvBlocks(invalidArgument("out of KV blocks")));
  EXPECT_EQ(pool.numFree(), 1);
  EXPECT_EQ(pool.numInUse(), 3);
}

TEST(BlockPool, ReleaseAtZeroReturnsBlockToFreeList) {
  BlockPool pool(2);
  auto a = pool.allocate(1);
  ASSERT_TRUE(a.ok());
  const BlockId b = (*a)[0];
  pool.retain(b);
  EXPECT_EQ(pool.refCount(b), 2);
  pool.release(b);
  EXPECT_FALSE(pool.isFree(b));
  pool.release(b);
  EXPECT_TRUE(pool.isFree(b));
  EXPECT_EQ(pool.numFree(), 2);
}

class RecordingObserver : public CachedBlockObserver {
 public:
  explicit RecordingObserver(BlockPool* pool) : pool_(pool) {}
  void onCachedBlockUnreferenced(BlockId b) override { evictable.insert(b); }
  void onCachedBlockReferenced(BlockId b) override { evictable.erase(b); }
  int32_t evict(int32_t n) override {
    int32_t done = 0;
    while (done < n && !evictable.empty()) {
      const BlockId b = *evictable.begin();
      evictable.erase(evictable.begin());
      pool_->uncache(b);
      ++done;
    }
    return done;
  }
  std::set<BlockId> evictable;

 private:
  BlockPool* pool_;
};

TEST(BlockPool, CachedBlockBecomesEvictableAndIsReclaimedOnDemand) {
  BlockPool pool(2);
  RecordingObserver observer(&pool);
  pool.setObserver(&observer);
  auto a = pool.allocate(2);
  ASSERT_TRUE(a.ok());
  pool.markCached((*a)[0]);
  pool.release((*a)[0]);
  EXPECT_EQ(pool.numEvictable(), 1);
  EXPECT_EQ(pool.numFree(), 0);
  EXPECT_EQ(observer.evictable.count((*a)[0]), 1u);
  // Referencing it again takes it out of the evictable set.
  pool.retain((*a)[0]);
  EXPECT_EQ(pool.numEvictable(), 0);
  EXPECT_TRUE(observer.evictable.empty());
  pool.release((*a)[0]);
  // An allocation with an empty free list evicts it.
  auto b = pool.allocate(1);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)[0], (*a)[0]);
  EXPECT_FALSE(pool.isCached((*b)[0]));
  EXPECT_EQ(pool.numEvictable(), 0);
  pool.setObserver(nullptr);
}

TEST(BlockPool, TracksTheBlocksThatReachTheFreeListOnlyWhenAsked) {
  BlockPool pool(4);
  RecordingObserver observer(&pool);
  pool.setObserver(&observer);
  auto a = pool.allocate(3);
  ASSERT_TRUE(a.ok());
  pool.release((*a)[0]);
  EXPECT_TRUE(pool.takeFreed().empty()) << "not tracking yet";
  pool.trackFreed(true);
  pool.retain((*a)[1]);
  pool.release((*a)[1]);
  EXPECT_TRUE(pool.takeFreed().empty()) << "still referenced";
  pool.release((*a)[1]);
  // A cached block is evictable, not free, until the cache evicts it.
  pool.markCached((*a)[2]);
  pool.release((*a)[2]);
  EXPECT_EQ(pool.takeFreed(), std::vector<BlockId>{(*a)[1]});
  EXPECT_EQ(observer.evict(1), 1);
  EXPECT_EQ(pool.takeFreed(), std::vector<BlockId>{(*a)[2]});
  EXPECT_TRUE(pool.takeFreed().empty()) << "handed over once";
  pool.setObserver(nullptr);
}

TEST(BlockPoolDeathTest, ReleasingAFreeBlockAborts) {
  BlockPool pool(1);
  EXPECT_DEATH(pool.release(0), "invariant violated");
}

}  // namespace
}  // namespace ingot
