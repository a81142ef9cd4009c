// Tests of TcpProcessGroup: bits against SharedMemoryGroup (2 and 4 ranks), a killed or silent
// peer, abort, mismatched calls, bad sizes, a join that misses a rank or meets a stranger; keep-alive.
#include "runtime/dist/tcp_process_group.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "testing/test_seed.h"
#include "runtime/dist/shared_memory_group.h"
#include "runtime/dist/tcp_socket.h"
#include "runtime/dist/tcp_store.h"

namespace ingot {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

std::unique_ptr<TcpStoreServer> startStore() {
  StatusOr<std::unique_ptr<TcpStoreServer>> s = TcpStoreServer::start("127.0.0.1", 0);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return std::move(s).value();
}

std::unique_ptr<TcpStoreClient> storeClient(uint16_t port) {
  StatusOr<std::unique_ptr<TcpStoreClient>> c =
      TcpStoreClient::connect("127.0.0.1", port, milliseconds(10000));
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? std::move(c).value() : nullptr;
}

TcpProcessGroupOptions groupOptions(milliseconds timeout, int ranks_per_node = 0) {
  TcpProcessGroupOptions o;
  o.timeout = timeout;
  o.ranks_per_node = ranks_per_node;
  return o;
}

/// Joins `world` ranks on threads (each with its own store connection, as processes would).
std::vector<std::unique_ptr<TcpProcessGroup>> joinOnThreads(uint16_t port, int world,
                                                            const TcpProcessGroupOptions& o) {
  std::vector<std::unique_ptr<TcpStoreClient>> clients(world);
  std::vector<std::unique_ptr<TcpProcessGroup>> groups(world);
  std::vector<std::thread> threads;
  std::vector<Status> errors(world);
  for (int r = 0; r < world; ++r) clients[r] = storeClient(port);
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      StatusOr<std::unique_ptr<TcpProcessGroup>> g = TcpProcessGroup::join(*clients[r], r, world, o);
      if (g.ok()) groups[r] = std::move(g).value();
      else errors[r] = g.status();
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) EXPECT_TRUE(errors[r].ok()) << "rank " << r << ": " << errors[r].message();
  return groups;
}

/// Runs body(rank, communicator) on one thread per rank.
void onRanks(int world, const std::function<Communicator*(int)>& comm,
             const std::function<void(int, Communicator&)>& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back([&, r] { body(r, *comm(r)); });
  for (auto& t : threads) t.join();
}

/// Random all_reduce and all_gather calls through the TCP group and a SharedMemoryGroup
/// with the same inputs: every rank's outputs must be the same bits.
void expectBitsOfSharedMemoryGroup(int world) {
  constexpr int kCalls = 30;
  std::mt19937 rng(ingot::testing::testSeed());
  std::uniform_int_distribution<int64_t> small(0, 700);
  std::uniform_real_distribution<float> value(-100.0f, 100.0f);
  std::vector<int64_t> sizes(kCalls);
  for (int i = 0; i < kCalls; ++i) sizes[i] = small(rng);
  sizes[3] = 1 << 20;  // 4 MiB per rank: more than the socket buffers hold
  sizes[4] = 1 << 19;  // the same as a gather (2 MiB per rank)
  sizes[5] = 0;        // empty calls, with no buffer at all, still meet
  sizes[6] = 0;
  // inputs[i][r]: rank r's input to call i (even i: all_reduce, odd: all_gather).
  std::vector<std::vector<std::vector<float>>> inputs(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    inputs[i].assign(world, std::vector<float>(static_cast<size_t>(sizes[i])));
    for (auto& v : inputs[i])
      for (float& x : v) x = value(rng);
  }
  auto runAll = [&](const std::function<Communicator*(int)>& comm) {
    std::vector<std::vector<std::vector<float>>> outputs(kCalls,
                                                         std::vector<std::vector<float>>(world));
    onRanks(world, comm, [&](int r, Communicator& c) {
      for (int i = 0; i < kCalls; ++i) {
        std::vector<float>& out = outputs[i][r];
        Status s;
        if (i % 2 == 0) {
          out = inputs[i][r];
          s = c.allReduceSum(out.data(), sizes[i]);
        } else {
          out.assign(static_cast<size_t>(sizes[i] * world), std::numeric_limits<float>::quiet_NaN());
          s = c.allGather(inputs[i][r].data(), sizes[i], out.data());
        }
        ASSERT_TRUE(s.ok()) << "rank " << r << " call " << i << ": " << s.message();
      }
    });
    return outputs;
  };
  std::unique_ptr<TcpStoreServer> store = startStore();
  std::vector<std::unique_ptr<TcpProcessGroup>> tcp =
      joinOnThreads(store->port(), world, groupOptions(milliseconds(20000)));
  ASSERT_EQ(tcp.size(), static_cast<size_t>(world));
  for (auto& g : tcp) ASSERT_NE(g, nullptr);
  StatusOr<std::unique_ptr<SharedMemoryGroup>> shm = SharedMemoryGroup::create(world);
  ASSERT_TRUE(shm.ok());
  const auto got = runAll([&](int r) { return tcp[r].get(); });
  const auto want = runAll([&](int r) { return (*shm)->communicator(r); });
  for (int i = 0; i < kCalls; ++i)
    for (int r = 0; r < world; ++r) {
      ASSERT_EQ(got[i][r].size(), want[i][r].size()) << "call " << i;
      for (float x : got[i][r]) ASSERT_TRUE(std::isfinite(x)) << "call " << i << ": unwritten";
      EXPECT_TRUE(got[i][r].empty() ||
                  std::memcmp(got[i][r].data(), want[i][r].data(),
                              got[i][r].size() * sizeof(float)) == 0)
          << "call " << i << " (" << sizes[i] << " floats) rank " << r << " differs";
    }
}

TEST(TcpProcessGroup, TwoRanksGiveTheBitsOfSharedMemoryGroup) { expectBitsOfSharedMemoryGroup(2); }
TEST(TcpProcessGroup, FourRanksGiveTheBitsOfSharedMemoryGroup) { expectBitsOfSharedMemoryGroup(4); }

TEST(TcpProcessGroup, OneRankIsItsOwnSumAndGather) {
  std::unique_ptr<TcpStoreServer> store = startStore();
  auto groups = joinOnThreads(store->port(), 1, groupOptions(milliseconds(1000)));
  ASSERT_NE(groups[0], nullptr);
  std::vector<float> x = {1.5f, -2.0f}, out(2, std::numeric_limits<float>::quiet_NaN());
  ASSERT_TRUE(groups[0]->allReduceSum(x.data(), 2).ok());
  EXPECT_EQ(x, (std::vector<float>{1.5f, -2.0f}));
  ASSERT_TRUE(groups[0]->allGather(x.data(), 2, out.data()).ok());
  EXPECT_EQ(out, x);
  EXPECT_TRUE(groups[0]->barrier().ok());
}

TEST(TcpProcessGroup, KilledPeerProcessFailsTheOthersNamingIt) {
  constexpr int kWorld = 3;
  std::unique_ptr<TcpStoreServer> store = startStore();
  const uint16_t port = store->port();
  // Rank 2 is a child process: joins, takes part in one sum, then waits to be killed.
  const pid_t child = ::fork();
  if (child == 0) {
    StatusOr<std::unique_ptr<TcpStoreClient>> c =
        TcpStoreClient::connect("127.0.0.1", port, milliseconds(10000));
    if (!c.ok()) ::_exit(2);
    auto g = TcpProcessGroup::join(**c, 2, kWorld, groupOptions(milliseconds(10000), 2));
    if (!g.ok()) ::_exit(3);
    float x[5] = {1, 2, 3, 4, 5};
    if (!(*g)->allReduceSum(x, 5).ok()) ::_exit(4);
    for (;;) ::pause();
  }
  ASSERT_GT(child, 0);
  std::vector<std::unique_ptr<TcpStoreClient>> clients;
  for (int r = 0; r < 2; ++r) clients.push_back(storeClient(port));
  std::vector<std::unique_ptr<TcpProcessGroup>> groups(2);
  std::vector<std::thread> joins;
  for (int r = 0; r < 2; ++r)
    joins.emplace_back([&, r] {
      auto g = TcpProcessGroup::join(*clients[r], r, kWorld, groupOptions(milliseconds(10000), 2));
      ASSERT_TRUE(g.ok()) << g.status().message();
      groups[r] = std::move(g).value();
    });
  for (auto& t : joins) t.join();
  ASSERT_NE(groups[0], nullptr);
  ASSERT_NE(groups[1], nullptr);
  onRanks(2, [&](int r) { return groups[r].get(); }, [](int r, Communicator& c) {
    float x[5] = {1, 2, 3, 4, 5};
    ASSERT_TRUE(c.allReduceSum(x, 5).ok()) << "rank " << r;
    EXPECT_EQ(x[4], 15.0f);
  });
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  std::vector<std::string> errors(2);
  std::vector<double> elapsed(2);
  onRanks(2, [&](int r) { return groups[r].get(); }, [&](int r, Communicator& c) {
    std::vector<float> x(1000, 1.0f);
    const auto start = Clock::now();
    Status s = c.allReduceSum(x.data(), 1000);
    elapsed[r] = msSince(start);
    errors[r] = s.ok() ? "ok" : s.message();
  });
  const std::string pid = "pid " + std::to_string(child);
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("all_reduce #1"), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find("rank 2 (node 1, " + pid), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find("closed its connection"), std::string::npos) << errors[r];
    EXPECT_LT(elapsed[r], 5000.0) << "noticed by the connection closing, not the timeout";
    // Broken for good: the next call fails at once with the first error.
    EXPECT_EQ(groups[r]->groupStatus().message(), errors[r]);
  }
}

TEST(TcpProcessGroup, SilentPeerFailsTheCollectiveAfterTheTimeoutNamingIt) {
  std::unique_ptr<TcpStoreServer> store = startStore();
  auto groups = joinOnThreads(store->port(), 3, groupOptions(milliseconds(300)));
  for (auto& g : groups) ASSERT_NE(g, nullptr);
  std::vector<std::string> errors(2);
  std::vector<double> elapsed(2);
  onRanks(2, [&](int r) { return groups[r].get(); }, [&](int r, Communicator& c) {
    std::vector<float> x(16, 1.0f), out(48);
    const auto start = Clock::now();
    Status s = c.allGather(x.data(), 16, out.data());  // rank 2 never calls
    elapsed[r] = msSince(start);
    errors[r] = s.ok() ? "ok" : s.message();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("all_gather #0: rank 2 (pid "), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find("did not arrive within 300 ms"), std::string::npos) << errors[r];
    EXPECT_GE(elapsed[r], 290.0);
    EXPECT_LT(elapsed[r], 3000.0);
  }
}

TEST(TcpProcessGroup, AbortFailsTheOtherRanksWithItsError) {
  std::unique_ptr<TcpStoreServer> store = startStore();
  auto groups = joinOnThreads(store->port(), 3, groupOptions(milliseconds(10000)));
  for (auto& g : groups) ASSERT_NE(g, nullptr);
  groups[1]->abort(failedPrecondition("tp rank 1: the step failed on its own"));
  std::vector<std::string> errors(3);
  onRanks(3, [&](int r) { return groups[r].get(); }, [&](int r, Communicator& c) {
    std::vector<float> x(8, 1.0f);
    Status s = c.allReduceSum(x.data(), 8);
    errors[r] = s.ok() ? "ok" : s.message();
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(errors[r], "tp rank 1: the step failed on its own") << r;
}

TEST(TcpProcessGroup, AbortFromAnotherThreadWakesAWaitingCollective) {
  std::unique_ptr<TcpStoreServer> store = startStore();
  auto groups = joinOnThreads(store->port(), 2, groupOptions(milliseconds(20000)));
  for (auto& g : groups) ASSERT_NE(g, nullptr);
  const auto start = Clock::now();
  std::thread aborter([&] {
    std::this_thread::sleep_for(milliseconds(100));
    groups[0]->abort(internalError("engine shut down"));
  });
  float x[4] = {};
  Status s = groups[0]->allReduceSum(x, 4);  // rank 1 never calls
  aborter.join();
  EXPECT_EQ(s.message(), "engine shut down");
  EXPECT_LT(msSince(start), 5000.0);
  // Rank 1 learns of it in its next call (the same collective: rank 0's data, then the error).
  float y[4] = {};
  EXPECT_EQ(groups[1]->allReduceSum(y, 4).message(), "engine shut down");
}

TEST(TcpProcessGroup, MismatchedCallsBreakTheGroupNamingBoth) {
  std::unique_ptr<TcpStoreServer> store = startStore();
  auto groups = joinOnThreads(store->port(), 2, groupOptions(milliseconds(5000)));
  for (auto& g : groups) ASSERT_NE(g, nullptr);
  std::vector<std::string> errors(2);
  onRanks(2, [&](int r) { return groups[r].get(); }, [&](int r, Communicator& c) {
    std::vector<float> x(10, 1.0f);
    Status s = c.allReduceSum(x.data(), r == 0 ? 10 : 7);
    errors[r] = s.ok() ? "ok" : s.message();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("ranks disagree on the collective"), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find("(10 floats)"), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find("(7 floats)"), std::string::npos) << errors[r];
  }
}

TEST(TcpProcessGroup, RefusesBadSizesWithoutBreakingTheGroup) {
  std::unique_ptr<TcpStoreServer> store = startStore();
  auto groups = joinOnThreads(store->port(), 2, groupOptions(milliseconds(5000)));
  for (auto& g : groups) ASSERT_NE(g, nullptr);
  std::vector<float> buf(8, 1.0f);
  Communicator& c = *groups[0];
  EXPECT_NE(c.allReduceSum(buf.data(), -1).message().find("bad buffer (-1 floats)"), std::string::npos);
  EXPECT_NE(c.allReduceSum(nullptr, 4).message().find("null"), std::string::npos);
  EXPECT_NE(c.allReduceSum(buf.data(), TcpProcessGroup::kMaxFloats + 1).message().find("bad buffer"),
            std::string::npos);
  EXPECT_NE(c.allGather(buf.data(), 2, buf.data() + 1).message().find("overlaps"), std::string::npos);
  EXPECT_NE(c.allGather(nullptr, 2, buf.data()).message().find("bad buffers"), std::string::npos);
  EXPECT_TRUE(c.groupStatus().ok());
  // Rank 1 refused the same calls: both are still in step.
  Communicator& d = *groups[1];
  (void)d.allReduceSum(buf.data(), -1);
  (void)d.allReduceSum(nullptr, 4);
  (void)d.allReduceSum(buf.data(), TcpProcessGroup::kMaxFloats + 1);
  (void)d.allGather(buf.data(), 2, buf.data() + 1);
  (void)d.allGather(nullptr, 2, buf.data());
  onRanks(2, [&](int r) { return groups[r].get(); }, [](int r, Communicator& g) {
    float x[3] = {1, 2, 3};
    ASSERT_TRUE(g.allReduceSum(x, 3).ok()) << r;
    EXPECT_EQ(x[2], 6.0f);
  });
}

TEST(TcpProcessGroup, JoinNamesTheRanksAndNodesThatNeverCame) {
  std::unique_ptr<TcpStoreServer> store = startStore();
  std::vector<std::unique_ptr<TcpStoreClient>> clients;
  for (int r = 0; r < 2; ++r) clients.push_back(storeClient(store->port()));
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      auto g = TcpProcessGroup::join(*clients[r], r, 4, groupOptions(milliseconds(300), 2));
      errors[r] = g.ok() ? "ok" : g.status().message();
    });
  for (auto& t : threads) t.join();
  EXPECT_NE(errors[0].find("rank 2 (node 1), rank 3 (node 1) did not connect within 300 ms"),
            std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("rank 2 (node 1), rank 3 (node 1) did not connect"), std::string::npos)
      << errors[1];
  TcpProcessGroupOptions bad = groupOptions(milliseconds(0));
  EXPECT_NE(TcpProcessGroup::join(*clients[0], 0, 2, bad).status().message().find("timeout"),
            std::string::npos);
  EXPECT_NE(TcpProcessGroup::join(*clients[0], 2, 2, groupOptions(milliseconds(100)))
                .status().message().find("rank 2 is outside a world of 2"),
            std::string::npos);
}

/// Connects a raw socket to where `rank` of group "tp" listens (its record in the store).
int connectToRank(TcpStoreClient& store, int rank) {
  StatusOr<std::vector<uint8_t>> record = store.get("tp/tcp/" + std::to_string(rank), milliseconds(10000));
  EXPECT_TRUE(record.ok()) << record.status().message();
  if (!record.ok()) return -1;
  std::istringstream in(std::string(record->begin(), record->end()));
  std::string addr;
  int port = 0;
  in >> addr >> port;
  StatusOr<int> fd = tcp_socket::connectWithRetry(addr, static_cast<uint16_t>(port),
                                                  Clock::now() + milliseconds(5000));
  EXPECT_TRUE(fd.ok()) << fd.status().message();
  return fd.ok() ? *fd : -1;
}

/// Sends `bytes` and waits for the other end to close (the join dropped this connection).
bool sendAndSeeClosed(int fd, const void* bytes, size_t n) {
  if (!tcp_socket::writeFully(fd, bytes, n, Clock::now() + milliseconds(5000)).ok()) return false;
  char c;
  const Status closed = tcp_socket::readFully(fd, &c, 1, Clock::now() + milliseconds(5000));
  return !closed.ok() && closed.message().find("closed") != std::string::npos;
}

TEST(TcpProcessGroup, JoinDropsStrangersOnItsPortAndStillForms) {
  std::unique_ptr<TcpStoreServer> store = startStore();
  std::vector<std::unique_ptr<TcpStoreClient>> clients;
  for (int r = 0; r < 3; ++r) clients.push_back(storeClient(store->port()));
  std::vector<std::unique_ptr<TcpProcessGroup>> groups(2);
  std::vector<Status> errors(2);
  auto joinRank = [&](int r) {
    auto g = TcpProcessGroup::join(*clients[r], r, 2, groupOptions(milliseconds(10000)));
    if (g.ok()) groups[r] = std::move(g).value();
    else errors[r] = g.status();
  };
  std::thread rank0(joinRank, 0);
  // A stray HTTP request line is exactly one 16-byte hello long; a port scan sends less.
  const char http[] = "GET / HTTP/1.1\r\n";
  static_assert(sizeof(http) - 1 == 16, "the request line fills a join hello");
  const int stray = connectToRank(*clients[2], 0);
  ASSERT_GE(stray, 0);
  EXPECT_TRUE(sendAndSeeClosed(stray, http, 16)) << "rank 0 did not drop the HTTP client";
  ::close(stray);
  std::mt19937 rng(ingot::testing::testSeed());
  uint8_t noise[7];
  for (uint8_t& b : noise) b = static_cast<uint8_t>(rng());
  const int scan = connectToRank(*clients[2], 0);
  ASSERT_GE(scan, 0);
  ASSERT_TRUE(tcp_socket::writeFully(scan, noise, sizeof(noise), Clock::now() + milliseconds(5000)).ok());
  ::close(scan);  // a short hello, then gone

  std::thread rank1(joinRank, 1);
  rank0.join();
  rank1.join();
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(errors[r].ok()) << "rank " << r << ": " << errors[r].message();
  const float a = static_cast<float>(rng() % 1000), b = static_cast<float>(rng() % 1000);
  onRanks(2, [&](int r) { return groups[r].get(); }, [&](int r, Communicator& g) {
    float x = r == 0 ? a : b;
    ASSERT_TRUE(g.allReduceSum(&x, 1).ok()) << r;
    EXPECT_EQ(x, a + b);
  });
}

TEST(TcpProcessGroup, JoinRefusesAnIngotRankOfAnotherWorldSizeNamingBoth) {
  std::unique_ptr<TcpStoreServer> store = startStore();
  auto rank0_store = storeClient(store->port());
  auto probe_store = storeClient(store->port());
  Status error;
  std::thread rank0([&] {
    auto g = TcpProcessGroup::join(*rank0_store, 0, 2, groupOptions(milliseconds(10000)));
    error = g.ok() ? internalError("joined") : g.status();
  });
  // A well-formed hello (the protocol's magic "IGTP") from rank 1 of a group of 3.
  struct {
    uint32_t magic = 0x50544749u;
    int32_t rank = 1;
    int32_t world_size = 3;
    uint32_t reserved = 0;
  } hello;
  const int fd = connectToRank(*probe_store, 0);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(tcp_socket::writeFully(fd, &hello, sizeof(hello), Clock::now() + milliseconds(5000)).ok());
  const auto start = Clock::now();
  rank0.join();
  ::close(fd);
  EXPECT_LT(msSince(start), 5000.0) << "the join waited for its timeout";
  EXPECT_EQ(error.code(), StatusCode::kInvalidArgument) << error.message();
  EXPECT_NE(error.message().find("rank 1 of a group of 3, but this group has 2 ranks"),
            std::string::npos) << error.message();
}

TEST(TcpSocket, KeepAliveTimesFollowTheTimeout) {
  auto times = [](int64_t ms) {
    const tcp_socket::KeepAliveTimes t = tcp_socket::keepAliveWithin(std::chrono::milliseconds(ms));
    return std::to_string(t.idle_s) + "+" + std::to_string(t.count) + "x" +
           std::to_string(t.interval_s);
  };
  EXPECT_EQ(times(30000), "15+3x5");  // the default --dist-timeout: ~30 s
  EXPECT_EQ(times(600000), "300+3x100");
  EXPECT_EQ(times(45000), "23+3x8");
  EXPECT_EQ(times(86400000), "32767+3x14400");  // the longest --dist-timeout: Linux's cap
  EXPECT_EQ(times(300), "1+3x1");  // TCP's floor: whole seconds
  EXPECT_EQ(times(0), "1+3x1");
  // The kernel takes the extremes.
  for (int64_t ms : {int64_t{0}, int64_t{86400000}}) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    const tcp_socket::KeepAliveTimes t = tcp_socket::keepAliveWithin(std::chrono::milliseconds(ms));
    const Status s = tcp_socket::enableKeepAlive(fd, t.idle_s, t.interval_s, t.count);
    EXPECT_TRUE(s.ok()) << ms << " ms: " << s.message();
    ::close(fd);
  }
}

TEST(TcpSocket, KeepAliveSetsTheProbeTimes) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(tcp_socket::enableKeepAlive(fd, 15, 5, 3).ok());
  auto get = [&](int level, int name) {
    int v = -1;
    socklen_t len = sizeof(v);
    EXPECT_EQ(::getsockopt(fd, level, name, &v, &len), 0);
    return v;
  };
  EXPECT_EQ(get(SOL_SOCKET, SO_KEEPALIVE), 1);
  EXPECT_EQ(get(IPPROTO_TCP, TCP_KEEPIDLE), 15);
  EXPECT_EQ(get(IPPROTO_TCP, TCP_KEEPINTVL), 5);
  EXPECT_EQ(get(IPPROTO_TCP, TCP_KEEPCNT), 3);
  ::close(fd);
  Status bad = tcp_socket::enableKeepAlive(-1, 15, 5, 3);
  EXPECT_NE(bad.message().find("SO_KEEPALIVE"), std::string::npos) << bad.message();
}

}  // namespace
}  // namespace ingot
