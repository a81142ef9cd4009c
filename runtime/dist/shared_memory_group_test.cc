// Tests of SharedMemoryGroup: sums and gathers against serial references, timeouts, breaks.
#include "runtime/dist/shared_memory_group.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <thread>
#include <vector>

namespace ingot {
namespace {

using std::chrono::milliseconds;

std::unique_ptr<SharedMemoryGroup> makeGroup(int world, milliseconds timeout) {
  StatusOr<std::unique_ptr<SharedMemoryGroup>> g = SharedMemoryGroup::create(world, timeout);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return std::move(g).value();
}

/// Runs fn(rank) on one thread per rank and returns each rank's status.
std::vector<Status> onRanks(int world, const std::function<Status(int)>& fn) {
  std::vector<Status> status(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back([&, r] { status[r] = fn(r); });
  for (std::thread& t : threads) t.join();
  return status;
}

TEST(SharedMemoryGroup, AllReduceMatchesRankOrderedSerialSumBitwise) {
  for (int world : {1, 2, 3, 4}) {
    std::unique_ptr<SharedMemoryGroup> group = makeGroup(world, milliseconds(20000));
    std::mt19937 rng(1234 + world);
    std::uniform_int_distribution<int64_t> size(0, 3000);
    std::uniform_real_distribution<float> value(-100.0f, 100.0f);
    constexpr int kIterations = 200;
    // Every rank's inputs for every iteration, drawn up front; sizes vary per iteration.
    std::vector<std::vector<std::vector<float>>> inputs(kIterations);
    for (auto& it : inputs) {
      const int64_t n = size(rng);
      it.assign(world, std::vector<float>(n));
      for (auto& v : it)
        for (float& x : v) x = value(rng);
    }
    std::vector<std::vector<std::vector<float>>> results(
        kIterations, std::vector<std::vector<float>>(world));
    std::vector<Status> st = onRanks(world, [&](int r) -> Status {
      Communicator* c = group->communicator(r);
      for (int i = 0; i < kIterations; ++i) {
        std::vector<float> data = inputs[i][r];
        INGOT_RETURN_IF_ERROR(c->allReduceSum(data.data(), static_cast<int64_t>(data.size())));
        results[i][r] = std::move(data);
      }
      return okStatus();
    });
    for (int r = 0; r < world; ++r) ASSERT_TRUE(st[r].ok()) << st[r].message();
    for (int i = 0; i < kIterations; ++i) {
      const size_t n = inputs[i][0].size();
      for (size_t e = 0; e < n; ++e) {
        float want = inputs[i][0][e];
        for (int r = 1; r < world; ++r) want += inputs[i][r][e];
        for (int r = 0; r < world; ++r)
          ASSERT_EQ(results[i][r][e], want) << "world " << world << " iteration " << i
                                            << " element " << e << " rank " << r;
      }
    }
  }
}

TEST(SharedMemoryGroup, AllGatherConcatenatesInRankOrder) {
  for (int world : {1, 2, 4}) {
    std::unique_ptr<SharedMemoryGroup> group = makeGroup(world, milliseconds(20000));
    std::mt19937 rng(99 + world);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    constexpr int kIterations = 100;
    std::vector<std::vector<std::vector<float>>> inputs(kIterations);
    for (int i = 0; i < kIterations; ++i) {
      const int64_t n = 1 + i * 7 % 300;
      inputs[i].assign(world, std::vector<float>(n));
      for (auto& v : inputs[i])
        for (float& x : v) x = value(rng);
    }
    std::vector<Status> st = onRanks(world, [&](int r) -> Status {
      Communicator* c = group->communicator(r);
      for (int i = 0; i < kIterations; ++i) {
        const int64_t n = static_cast<int64_t>(inputs[i][r].size());
        std::vector<float> out(world * n, std::numeric_limits<float>::quiet_NaN());  // poison
        INGOT_RETURN_IF_ERROR(c->allGather(inputs[i][r].data(), n, out.data()));
        for (int q = 0; q < world; ++q)
          for (int64_t e = 0; e < n; ++e)
            if (out[q * n + e] != inputs[i][q][e])
              return internalError("rank " + std::to_string(r) + " iteration " +
                                   std::to_string(i) + ": wrong element " +
                                   std::to_string(q * n + e));
        INGOT_RETURN_IF_ERROR(c->barrier());
      }
      return okStatus();
    });
    for (int r = 0; r < world; ++r) EXPECT_TRUE(st[r].ok()) << st[r].message();
  }
}

TEST(SharedMemoryGroup, AMissingRankFailsTheOthersWithinTheTimeoutAndNamesIt) {
  constexpr int kWorld = 4;
  std::unique_ptr<SharedMemoryGroup> group = makeGroup(kWorld, milliseconds(200));
  std::vector<double> seconds(kWorld, 0);
  std::vector<Status> st = onRanks(kWorld, [&](int r) -> Status {
    Communicator* c = group->communicator(r);
    std::vector<float> x(64, 1.0f);
    for (int i = 0; i < 3; ++i) INGOT_RETURN_IF_ERROR(c->allReduceSum(x.data(), 64));
    if (r == 2) return okStatus();  // rank 2 stops before all_reduce #3
    const auto start = std::chrono::steady_clock::now();
    Status s = c->allReduceSum(x.data(), 64);
    seconds[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return s;
  });
  EXPECT_TRUE(st[2].ok());
  for (int r : {0, 1, 3}) {
    ASSERT_FALSE(st[r].ok()) << "rank " << r;
    EXPECT_EQ(st[r].message(), "all_reduce #3: rank 2 did not arrive within 200 ms");
    EXPECT_GE(seconds[r], 0.15) << "rank " << r;  // it did wait (up to its own deadline)
    EXPECT_LT(seconds[r], 2.0) << "rank " << r;   // and not much longer
  }
  // The group stays broken: every later call fails at once with the first error.
  for (int r = 0; r < kWorld; ++r) {
    const auto start = std::chrono::steady_clock::now();
    float x = 1;
    std::vector<float> out(kWorld);
    Status s = group->communicator(r)->barrier();
    Status g = group->communicator(r)->allGather(&x, 1, out.data());
    EXPECT_EQ(s.message(), "all_reduce #3: rank 2 did not arrive within 200 ms");
    EXPECT_FALSE(g.ok());
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
              0.1);
  }
  EXPECT_FALSE(group->status().ok());
}

TEST(SharedMemoryGroup, SeveralMissingRanksAreAllNamed) {
  std::unique_ptr<SharedMemoryGroup> group = makeGroup(4, milliseconds(100));
  std::vector<Status> st = onRanks(4, [&](int r) -> Status {
    if (r == 1 || r == 3) return okStatus();
    return group->communicator(r)->barrier();
  });
  EXPECT_EQ(st[0].message(), "barrier #0: ranks 1, 3 did not arrive within 100 ms");
  EXPECT_EQ(st[2].message(), st[0].message());
}

TEST(SharedMemoryGroup, AbortWakesWaitingRanksAtOnceWithTheGivenError) {
  std::unique_ptr<SharedMemoryGroup> group = makeGroup(3, milliseconds(30000));
  const auto start = std::chrono::steady_clock::now();
  std::vector<Status> st = onRanks(3, [&](int r) -> Status {
    if (r == 1) {
      std::this_thread::sleep_for(milliseconds(50));
      group->communicator(1)->abort(internalError("rank 1: out of memory"));
      return okStatus();
    }
    float x[8] = {};
    return group->communicator(r)->allReduceSum(x, 8);
  });
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  EXPECT_EQ(st[0].message(), "rank 1: out of memory");
  EXPECT_EQ(st[2].message(), "rank 1: out of memory");
  group->abort(internalError("a second error"));  // the first one stays
  EXPECT_EQ(group->status().message(), "rank 1: out of memory");
}

TEST(SharedMemoryGroup, MismatchedCollectivesBreakTheGroup) {
  std::unique_ptr<SharedMemoryGroup> group = makeGroup(2, milliseconds(2000));
  std::vector<Status> st = onRanks(2, [&](int r) -> Status {
    std::vector<float> x(32, 1.0f), out(64);
    if (r == 0) {
      std::this_thread::sleep_for(milliseconds(20));  // rank 1 arrives first
      return group->communicator(0)->allReduceSum(x.data(), 32);
    }
    return group->communicator(1)->allGather(x.data(), 32, out.data());
  });
  for (const Status& s : st) {
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("ranks disagree on the collective"), std::string::npos)
        << s.message();
  }
}

TEST(SharedMemoryGroup, RejectsBadSizesAndTimeouts) {
  EXPECT_FALSE(SharedMemoryGroup::create(0).ok());
  EXPECT_FALSE(SharedMemoryGroup::create(2, milliseconds(0)).ok());
  std::unique_ptr<SharedMemoryGroup> group = makeGroup(2, milliseconds(100));
  EXPECT_EQ(group->communicator(2), nullptr);
  EXPECT_EQ(group->communicator(-1), nullptr);
  Status s = group->communicator(0)->allReduceSum(nullptr, 4);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ingot
