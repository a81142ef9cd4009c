// ThreadPool: every index runs exactly once, across many back-to-back jobs.
#include "runtime/backend/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace ingot {
namespace {

TEST(ThreadPoolTest, RangesCoverEveryIndexOnceInGrainMultiples) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 7, 64, 1001}) {
      std::vector<std::atomic<int>> hits(n);
      pool.parallelRanges(n, 4, [&](int64_t b, int64_t e) {
        EXPECT_EQ(b % 4, 0);
        EXPECT_TRUE(e % 4 == 0 || e == n);
        for (int64_t i = b; i < e; ++i) hits[i]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << n << " " << i;
    }
  }
}

TEST(ThreadPoolTest, DynamicLoopRunsEveryIndexOnceOverManyJobs) {
  ThreadPool pool(3);
  for (int job = 0; job < 2000; ++job) {
    const int64_t n = job % 37;
    std::vector<std::atomic<int>> hits(n);
    pool.parallelForDynamic(n, [&](int64_t i, int worker) {
      EXPECT_GE(worker, 0);
      EXPECT_LT(worker, 3);
      hits[i]++;
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1);
  }
}

TEST(ThreadPoolTest, MoreThreadsThanCoresStillFinishEveryLoop) {
  // 8 threads on a small machine: workers are often descheduled; loops must not wait on
  // workers that never joined.
  ThreadPool pool(8);
  std::atomic<int64_t> total{0};
  for (int job = 0; job < 500; ++job)
    pool.parallelRanges(1000, 8, [&](int64_t b, int64_t e) { total += e - b; });
  EXPECT_EQ(total.load(), 500 * 1000);
}

}  // namespace
}  // namespace ingot
