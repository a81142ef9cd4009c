// Tests of BlockTable: slot mapping, fork with copy-on-write, all-or-nothing appends.
#include "runtime/kv/block_table.h"

#include <gtest/gtest.h>

#include <numeric>

namespace ingot {
namespace {

constexpr int32_t kB = 4;  // small blocks keep the cases readable

std::vector<int32_t> iota(int32_t n, int32_t start = 0) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST(BlockTable, AppendReportsSlotMapping) {
  BlockPool pool(8);
  BlockTable t(&pool, kB);
  auto r = t.append(iota(6));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(t.blocks().size(), 2u);
  ASSERT_EQ(r->slots.size(), 6u);
  for (int32_t i = 0; i < 6; ++i)
    EXPECT_EQ(r->slots[i], t.blocks()[i / kB] * kB + i % kB) << i;
  EXPECT_TRUE(r->copies.empty());
  auto r2 = t.append({100});
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->slots, std::vector<int32_t>{t.blocks()[1] * kB + 2});
  EXPECT_EQ(t.numTokens(), 7);
}

TEST(BlockTable, ForkSharesBlocksAndCopiesOnWrite) {
  BlockPool pool(8);
  BlockTable a(&pool, kB);
  ASSERT_TRUE(a.append(iota(6)).ok());  // one full block, one half-full block
  BlockTable b = a.fork();
  EXPECT_EQ(a.blocks(), b.blocks());
  for (BlockId x : a.blocks()) EXPECT_EQ(pool.refCount(x), 2);
  EXPECT_EQ(b.blocksNeededToAppend(1), 1);  // the copy

  const BlockId shared_last = a.blocks()[1];
  auto rb = b.append({7});
  ASSERT_TRUE(rb.ok());
  ASSERT_EQ(rb->copies.size(), 1u);
  EXPECT_EQ(rb->copies[0].src, shared_last);
  EXPECT_EQ(rb->copies[0].dst, b.blocks()[1]);
  EXPECT_NE(b.blocks()[1], shared_last);
  EXPECT_EQ(b.blocks()[0], a.blocks()[0]);  // the full block stays shared
  EXPECT_EQ(pool.refCount(a.blocks()[0]), 2);
  EXPECT_EQ(pool.refCount(shared_last), 1);
  EXPECT_EQ(rb->slots, std::vector<int32_t>{b.blocks()[1] * kB + 2});

  // The other sharer now owns the old block alone and writes in place.
  auto ra = a.append({8});
  ASSERT_TRUE(ra.ok());
  EXPECT_TRUE(ra->copies.empty());
  EXPECT_EQ(a.blocks()[1], shared_last);
}

TEST(BlockTable, ForkOfFullLastBlockNeedsNoCopy) {
  BlockPool pool(8);
  BlockTable a(&pool, kB);
  ASSERT_TRUE(a.append(iota(8)).ok());
  BlockTable b = a.fork();
  auto r = b.append({1});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->copies.empty());
  EXPECT_EQ(b.blocks().size(), 3u);
}

TEST(BlockTable, OutOfBlocksLeavesNothingHalfAllocated) {
  BlockPool pool(3);
  BlockTable a(&pool, kB);
  ASSERT_TRUE(a.append(iota(6)).ok());
  BlockTable b = a.fork();
  // b needs a copy plus two new blocks; only one is free.
  auto r = b.append(iota(6, 50));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(isOutOfKvBlocks(r.status()));
  EXPECT_EQ(b.blocks(), a.blocks());
  EXPECT_EQ(b.numTokens(), 6);
  EXPECT_EQ(pool.numFree(), 1);
  for (BlockId x : a.blocks()) EXPECT_EQ(pool.refCount(x), 2);
}

TEST(BlockTable, DestructionReleasesEveryBlock) {
  BlockPool pool(4);
  {
    BlockTable a(&pool, kB);
    ASSERT_TRUE(a.append(iota(9)).ok());
    BlockTable b = a.fork();
    BlockTable c = std::move(b);
    EXPECT_EQ(pool.numFree(), 1);
  }
  EXPECT_EQ(pool.numFree(), 4);
}

}  // namespace
}  // namespace ingot
