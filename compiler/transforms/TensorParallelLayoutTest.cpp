//===- TensorParallelLayoutTest.cpp - head and row assignment over every small shape -===//
#include "compiler/transforms/TensorParallelLayout.h"

#include <algorithm>
#include <vector>

#include <gtest/gtest.h>

namespace ingot::compiler {
namespace {

TEST(TensorParallelLayout, EvenBlocksTileInOrderAndDifferByAtMostOne) {
  for (int64_t total = 1; total <= 40; ++total)
    for (int64_t parts = 1; parts <= total; ++parts) {
      int64_t next = 0, smallest = total, largest = 0;
      for (int64_t i = 0; i < parts; ++i) {
        RankSlice s = evenBlock(total, parts, i);
        EXPECT_EQ(s.start, next) << total << "/" << parts << " block " << i;
        next = s.start + s.count;
        smallest = std::min(smallest, s.count);
        largest = std::max(largest, s.count);
      }
      EXPECT_EQ(next, total);
      EXPECT_LE(largest - smallest, 1);
      EXPECT_GE(smallest, 1);
    }
}

TEST(TensorParallelLayout, AlignedBlocksTileOnUnitBoundaries) {
  for (int64_t unit : {1, 16, 32, 128})
    for (int64_t units = 1; units <= 24; ++units)
      for (int64_t parts = 1; parts <= units; ++parts) {
        int64_t next = 0, smallest = units * unit, largest = 0;
        for (int64_t i = 0; i < parts; ++i) {
          RankSlice s = alignedBlock(units * unit, unit, parts, i);
          EXPECT_EQ(s.start, next) << units << "x" << unit << "/" << parts << " block " << i;
          EXPECT_EQ(s.start % unit, 0);
          EXPECT_EQ(s.count % unit, 0);
          next = s.start + s.count;
          smallest = std::min(smallest, s.count);
          largest = std::max(largest, s.count);
        }
        EXPECT_EQ(next, units * unit);
        EXPECT_LE(largest - smallest, unit);
        EXPECT_GE(smallest, unit);
      }
  // SmolLM2's MLP (1536) over 2 ranks at block 32 is the unaligned split's 768 / 768.
  EXPECT_EQ(alignedBlock(1536, 32, 2, 1).start, evenBlock(1536, 2, 1).start);
  // 1536 over 5 ranks: 307/307/307/307/308-style cuts become multiples of 32.
  EXPECT_EQ(alignedBlock(1536, 32, 5, 1).start, 320);
  EXPECT_EQ(alignedBlock(1536, 32, 5, 4).count, 288);
}

TEST(TensorParallelLayout, HeadsFollowTheContractForEveryShape) {
  for (int64_t kvHeads = 1; kvHeads <= 12; ++kvHeads)
    for (int64_t group = 1; group <= 6; ++group) {
      const int64_t heads = kvHeads * group;
      for (int64_t ranks = 1; ranks <= heads; ++ranks) {
        std::vector<HeadAssignment> a;
        for (int64_t r = 0; r < ranks; ++r)
          a.push_back(assignHeads(heads, kvHeads, ranks, r));
        std::string what = std::to_string(heads) + "q/" + std::to_string(kvHeads) + "kv over " +
                           std::to_string(ranks);
        int64_t nextQ = 0;
        for (int64_t r = 0; r < ranks; ++r) {
          const HeadAssignment &h = a[r];
          // Every rank runs a contiguous block of query heads, in rank order, all of them
          // in groups of its own kv heads.
          ASSERT_GE(h.q.count, 1) << what << " rank " << r;
          ASSERT_GE(h.kv.count, 1) << what << " rank " << r;
          EXPECT_EQ(h.q.start, nextQ) << what << " rank " << r;
          nextQ = h.q.start + h.q.count;
          EXPECT_GE(h.q.start / group, h.kv.start) << what << " rank " << r;
          EXPECT_LT((nextQ - 1) / group, h.kv.start + h.kv.count) << what << " rank " << r;
          if (kvHeads >= ranks) {
            EXPECT_EQ(h.q.count, h.kv.count * group) << what << " rank " << r;
            RankSlice kv = evenBlock(kvHeads, ranks, r);
            EXPECT_EQ(h.kv.start, kv.start) << what << " rank " << r;
            EXPECT_EQ(h.kv.count, kv.count) << what << " rank " << r;
          } else {
            EXPECT_EQ(h.kv.count, 1) << what << " rank " << r;
            EXPECT_EQ(h.kv.start, r * kvHeads / ranks) << what << " rank " << r;
          }
        }
        EXPECT_EQ(nextQ, heads) << what;
        // Ranks sharing a kv head split its query group evenly.
        for (int64_t k = 0; k < kvHeads && kvHeads < ranks; ++k) {
          int64_t smallest = group, largest = 0;
          for (const HeadAssignment &h : a)
            if (h.kv.start == k) {
              smallest = std::min(smallest, h.q.count);
              largest = std::max(largest, h.q.count);
            }
          EXPECT_LE(largest - smallest, 1) << what << " kv head " << k;
        }
      }
    }
}

TEST(TensorParallelLayout, SmolLM2MatchesTheContractsExamples) {
  // 9 query heads over 3 kv heads: N = 2 gives 6 q / 2 kv and 3 q / 1 kv.
  EXPECT_EQ(assignHeads(9, 3, 2, 0).q.count, 6);
  EXPECT_EQ(assignHeads(9, 3, 2, 0).kv.count, 2);
  EXPECT_EQ(assignHeads(9, 3, 2, 1).q.count, 3);
  // N = 4: ranks 0 and 1 share kv head 0 with 2 and 1 q heads; ranks 2, 3 take kv 1, 2.
  const int64_t q[] = {2, 1, 3, 3}, kv[] = {0, 0, 1, 2};
  for (int64_t r = 0; r < 4; ++r) {
    EXPECT_EQ(assignHeads(9, 3, 4, r).q.count, q[r]) << "rank " << r;
    EXPECT_EQ(assignHeads(9, 3, 4, r).kv.start, kv[r]) << "rank " << r;
  }
}

} // namespace
} // namespace ingot::compiler
