// Tests of ShmProcessGroup across forked processes: bits against SharedMemoryGroup,
// timeouts, a SIGKILLed peer, abort and mismatched calls.
#include "runtime/dist/shm_process_group.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "testing/test_seed.h"
#include "runtime/dist/shared_memory_group.h"
#include "runtime/dist/tcp_store.h"

namespace ingot {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

/// Memory every forked rank writes and the parent reads: one message per rank.
struct Mailbox {
  static constexpr int kRanks = 8;
  char message[kRanks][1024];
  double elapsed_ms[kRanks];
};

template <typename T>
T* sharedAnonymous(size_t count) {
  void* p = mmap(nullptr, sizeof(T) * count, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                 -1, 0);
  EXPECT_NE(p, MAP_FAILED);
  return static_cast<T*>(p);
}

void post(Mailbox* box, int rank, const Status& s) {
  std::snprintf(box->message[rank], sizeof(box->message[rank]), "%s",
                s.ok() ? "ok" : s.message().c_str());
}

/// Runs body() in a forked child that exits with its result.
pid_t forkRank(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  return pid;
}

/// The child's exit code, or 128 + signal.
int waitExit(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// A store served by the test process; ranks connect to it on 127.0.0.1.
class Store {
 public:
  Store() {
    StatusOr<std::unique_ptr<TcpStoreServer>> s = TcpStoreServer::start("127.0.0.1", 0);
    EXPECT_TRUE(s.ok()) << s.status().message();
    server_ = std::move(s).value();
  }
  std::unique_ptr<TcpStoreClient> client() const {
    StatusOr<std::unique_ptr<TcpStoreClient>> c =
        TcpStoreClient::connect("127.0.0.1", server_->port(), milliseconds(10000));
    return c.ok() ? std::move(c).value() : nullptr;
  }

 private:
  std::unique_ptr<TcpStoreServer> server_;
};

StatusOr<std::unique_ptr<ShmProcessGroup>> joinGroup(TcpStoreClient& store, int rank, int world,
                                                     milliseconds timeout,
                                                     int64_t chunk = int64_t{1} << 20) {
  ShmProcessGroupOptions o;
  o.timeout = timeout;
  o.chunk_floats = chunk;
  return ShmProcessGroup::join(store, rank, world, o);
}

TEST(ShmProcessGroup, SumsAndGathersAcrossProcessesMatchSharedMemoryGroupBitwise) {
  constexpr int kWorld = 3;
  constexpr int kCalls = 40;
  constexpr int64_t kChunk = 64;  // small: most calls take several rounds
  std::mt19937 rng(ingot::testing::testSeed());
  std::uniform_int_distribution<int64_t> size(0, 300);
  std::uniform_real_distribution<float> value(-100.0f, 100.0f);
  // calls[i]: even = all_reduce, odd = all_gather; inputs[i][r]: rank r's input.
  std::vector<std::vector<std::vector<float>>> inputs(kCalls);
  std::vector<int64_t> offsets(kCalls + 1, 0);
  for (int i = 0; i < kCalls; ++i) {
    const int64_t n = i == 5 || i == 6 ? 0 : size(rng);  // empty calls too
    inputs[i].assign(kWorld, std::vector<float>(n));
    for (auto& v : inputs[i])
      for (float& x : v) x = value(rng);
    offsets[i + 1] = offsets[i] + (i % 2 == 0 ? n : n * kWorld);
  }
  // Each rank's outputs, poisoned with NaN before the ranks run.
  const int64_t per_rank = offsets[kCalls];
  float* results = sharedAnonymous<float>(static_cast<size_t>(per_rank * kWorld + 1));
  std::fill(results, results + per_rank * kWorld, std::numeric_limits<float>::quiet_NaN());
  Mailbox* box = sharedAnonymous<Mailbox>(1);

  Store store;
  std::vector<pid_t> pids;
  for (int r = 0; r < kWorld; ++r) {
    pids.push_back(forkRank([&, r]() -> int {
      std::unique_ptr<TcpStoreClient> client = store.client();
      if (!client) return 3;
      auto group = joinGroup(*client, r, kWorld, milliseconds(20000), kChunk);
      if (!group.ok()) return post(box, r, group.status()), 4;
      for (int i = 0; i < kCalls; ++i) {
        std::vector<float> in = inputs[i][r];
        float* out = results + per_rank * r + offsets[i];
        const int64_t n = static_cast<int64_t>(in.size());
        Status s = i % 2 == 0 ? (*group)->allReduceSum(in.data(), n)
                              : (*group)->allGather(in.data(), n, out);
        if (!s.ok()) return post(box, r, s), 5;
        if (i % 2 == 0) std::copy(in.begin(), in.end(), out);
      }
      return 0;
    }));
  }
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(waitExit(pids[r]), 0) << box->message[r];

  // The reference: the same calls through the in-process group on threads.
  auto ref_group = SharedMemoryGroup::create(kWorld, milliseconds(20000));
  ASSERT_TRUE(ref_group.ok());
  std::vector<std::vector<float>> expected(kWorld, std::vector<float>(per_rank));
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      Communicator* c = (*ref_group)->communicator(r);
      for (int i = 0; i < kCalls; ++i) {
        std::vector<float> in = inputs[i][r];
        const int64_t n = static_cast<int64_t>(in.size());
        float* out = expected[r].data() + offsets[i];
        Status s = i % 2 == 0 ? c->allReduceSum(in.data(), n) : c->allGather(in.data(), n, out);
        EXPECT_TRUE(s.ok()) << s.message();
        if (i % 2 == 0) std::copy(in.begin(), in.end(), out);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kWorld; ++r)
    EXPECT_EQ(std::memcmp(expected[r].data(), results + per_rank * r,
                          static_cast<size_t>(per_rank) * sizeof(float)),
              0)
        << "rank " << r << " differs from SharedMemoryGroup";
  munmap(results, sizeof(float) * static_cast<size_t>(per_rank * kWorld + 1));
  munmap(box, sizeof(Mailbox));
}

TEST(ShmProcessGroup, RankThatDoesNotArriveFailsTheCollectiveAfterTheTimeout) {
  Store store;
  const pid_t peer = forkRank([&]() -> int {
    std::unique_ptr<TcpStoreClient> client = store.client();
    auto group = joinGroup(*client, 1, 2, milliseconds(300));
    if (!group.ok()) return 4;
    std::this_thread::sleep_for(std::chrono::seconds(5));  // never calls the collective
    return 0;
  });
  std::unique_ptr<TcpStoreClient> client = store.client();
  auto group = joinGroup(*client, 0, 2, milliseconds(300));
  ASSERT_TRUE(group.ok()) << group.status().message();
  std::vector<float> data(100, 1.0f);
  const auto start = Clock::now();
  Status s = (*group)->allReduceSum(data.data(), 100);
  const double waited = msSince(start);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "all_reduce #0: rank 1 did not arrive within 300 ms");
  EXPECT_GE(waited, 290.0);
  EXPECT_LT(waited, 2000.0);
  // Broken for good: the next call fails at once with the first error.
  const auto again = Clock::now();
  Status later = (*group)->barrier();
  EXPECT_EQ(later.message(), s.message());
  EXPECT_LT(msSince(again), 50.0);
  kill(peer, SIGKILL);
  waitExit(peer);
}

TEST(ShmProcessGroup, KilledPeerFailsEveryOtherRankWellWithinTheTimeout) {
  Store store;
  Mailbox* box = sharedAnonymous<Mailbox>(1);
  std::memset(box, 0, sizeof(Mailbox));
  const milliseconds timeout(20000);
  const pid_t rank1 = forkRank([&]() -> int {
    std::unique_ptr<TcpStoreClient> client = store.client();
    auto group = joinGroup(*client, 1, 3, timeout);
    if (!group.ok()) return post(box, 1, group.status()), 4;
    std::vector<float> data(1000, 1.0f);
    Status s = (*group)->allReduceSum(data.data(), 1000);
    post(box, 1, s);
    return s.ok() ? 1 : 0;
  });
  const pid_t rank2 = forkRank([&]() -> int {
    std::unique_ptr<TcpStoreClient> client = store.client();
    auto group = joinGroup(*client, 2, 3, timeout);
    if (!group.ok()) return 4;
    pause();  // never arrives; killed
    return 0;
  });
  std::unique_ptr<TcpStoreClient> client = store.client();
  auto group = joinGroup(*client, 0, 3, timeout);
  ASSERT_TRUE(group.ok()) << group.status().message();
  Clock::time_point killed_at;
  std::thread killer([&] {
    std::this_thread::sleep_for(milliseconds(200));
    killed_at = Clock::now();
    kill(rank2, SIGKILL);
  });
  std::vector<float> data(1000, 1.0f);
  Status s = (*group)->allReduceSum(data.data(), 1000);
  const auto failed_at = Clock::now();
  killer.join();
  const double noticed_ms =
      std::chrono::duration<double, std::milli>(failed_at - killed_at).count();
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "all_reduce #0: rank 2 (pid " + std::to_string(rank2) +
                             ") exited before arriving");
  EXPECT_LT(noticed_ms, 1000.0) << "a dead peer must be noticed long before the 20 s timeout";
  std::printf("killed peer noticed by rank 0 after %.1f ms\n", noticed_ms);
  EXPECT_EQ(waitExit(rank1), 0) << box->message[1];
  EXPECT_EQ(std::string(box->message[1]), s.message()) << "every rank reports the first error";
  EXPECT_EQ(waitExit(rank2), 128 + SIGKILL);
  munmap(box, sizeof(Mailbox));
}

TEST(ShmProcessGroup, AbortInOneProcessFailsTheOthersWithItsError) {
  Store store;
  const pid_t peer = forkRank([&]() -> int {
    std::unique_ptr<TcpStoreClient> client = store.client();
    auto group = joinGroup(*client, 1, 2, milliseconds(20000));
    if (!group.ok()) return 4;
    (*group)->abort(internalError("tp rank 1: the layer 3 matmul failed"));
    std::this_thread::sleep_for(milliseconds(500));  // still alive: the abort, not the exit
    return 0;
  });
  std::unique_ptr<TcpStoreClient> client = store.client();
  auto group = joinGroup(*client, 0, 2, milliseconds(20000));
  ASSERT_TRUE(group.ok()) << group.status().message();
  std::vector<float> in(8, 1.0f), out(16);
  const auto start = Clock::now();
  Status s = (*group)->allGather(in.data(), 8, out.data());
  EXPECT_EQ(s.message(), "tp rank 1: the layer 3 matmul failed");
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_LT(msSince(start), 1000.0);
  EXPECT_EQ((*group)->groupStatus().message(), s.message());
  EXPECT_EQ(waitExit(peer), 0);
}

TEST(ShmProcessGroup, MismatchedCollectivesBreakTheGroupOnEveryRank) {
  Store store;
  Mailbox* box = sharedAnonymous<Mailbox>(1);
  const pid_t peer = forkRank([&]() -> int {
    std::unique_ptr<TcpStoreClient> client = store.client();
    auto group = joinGroup(*client, 1, 2, milliseconds(20000));
    if (!group.ok()) return 4;
    Status s = (*group)->barrier();
    post(box, 1, s);
    return s.ok() ? 1 : 0;
  });
  std::unique_ptr<TcpStoreClient> client = store.client();
  auto group = joinGroup(*client, 0, 2, milliseconds(20000));
  ASSERT_TRUE(group.ok()) << group.status().message();
  std::vector<float> data(4, 2.0f);
  Status s = (*group)->allReduceSum(data.data(), 4);
  EXPECT_NE(s.message().find("ranks disagree on the collective"), std::string::npos)
      << s.message();
  EXPECT_EQ(waitExit(peer), 0);
  EXPECT_EQ(std::string(box->message[1]), s.message());
  munmap(box, sizeof(Mailbox));
}

TEST(ShmProcessGroup, JoinNamesTheRanksThatNeverCameAndRejectsBadArguments) {
  Store store;
  std::unique_ptr<TcpStoreClient> client = store.client();
  auto group = joinGroup(*client, 0, 3, milliseconds(300));
  ASSERT_FALSE(group.ok());
  EXPECT_EQ(group.status().message(),
            "join of a 3-rank process group: ranks 1, 2 did not arrive within 300 ms");

  ShmProcessGroupOptions probe;
  probe.timeout = milliseconds(20000);
  probe.name = "probed";
  probe.join_probe = [] { return failedPrecondition("tp worker rank 1 exited with status 2"); };
  const auto start = Clock::now();
  auto probed = ShmProcessGroup::join(*client, 0, 2, probe);
  EXPECT_EQ(probed.status().message(), "tp worker rank 1 exited with status 2");
  EXPECT_LT(msSince(start), 1000.0);

  EXPECT_FALSE(joinGroup(*client, 2, 2, milliseconds(100)).ok());
  EXPECT_FALSE(joinGroup(*client, 0, 0, milliseconds(100)).ok());
  EXPECT_FALSE(joinGroup(*client, 0, 1, milliseconds(0)).ok());
  EXPECT_FALSE(joinGroup(*client, 0, 1, milliseconds(100), 3).ok());
  // A one-rank group works alone.
  auto alone = joinGroup(*client, 0, 1, milliseconds(100));
  ASSERT_TRUE(alone.ok()) << alone.status().message();
  std::vector<float> data = {1.5f, -2.0f};
  ASSERT_TRUE((*alone)->allReduceSum(data.data(), 2).ok());
  EXPECT_EQ(data[0], 1.5f);
}

}  // namespace
}  // namespace ingot
