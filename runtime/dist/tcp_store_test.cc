// TcpStore over loopback: clients exchanging values, waits, timeouts and failing peers.
#include "runtime/dist/tcp_store.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <future>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "testing/test_seed.h"

namespace ingot {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

std::unique_ptr<TcpStoreServer> startServer() {
  auto server = TcpStoreServer::start("127.0.0.1", 0);
  EXPECT_TRUE(server.ok()) << server.status().message();
  return std::move(server).value();
}

std::unique_ptr<TcpStoreClient> connectTo(uint16_t port) {
  auto client = TcpStoreClient::connect("127.0.0.1", port, milliseconds(5000));
  EXPECT_TRUE(client.ok()) << client.status().message();
  return std::move(client).value();
}

std::vector<uint8_t> randomBytes(std::mt19937& rng, size_t size) {
  std::vector<uint8_t> v(size);
  for (uint8_t& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

/// A port nobody listens on right now (taken from the kernel, then released).
uint16_t freePort() {
  auto server = startServer();
  uint16_t port = server->port();
  server->stop();
  return port;
}

long long msSince(Clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - t).count();
}

/// A fake server: accepts one connection, reads one request's first bytes, answers with
/// `reply` verbatim and closes. For replies the real server never sends.
class FakeServer {
 public:
  explicit FakeServer(std::vector<uint8_t> reply) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(fd_, 1), 0);
    socklen_t len = sizeof(addr);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this, reply = std::move(reply)] {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      uint8_t buf[256];
      (void)!::recv(c, buf, sizeof(buf), 0);
      (void)!::send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
      ::close(c);
    });
  }
  ~FakeServer() {
    thread_.join();
    ::close(fd_);
  }
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
};

TEST(TcpStore, ManyClientsExchangeRandomValuesThroughOneServer) {
  auto server = startServer();
  constexpr int kRanks = 8;
  std::mt19937 rng(ingot::testing::testSeed());
  std::vector<std::vector<uint8_t>> sent(kRanks);
  // Small values, and one of a MiB that takes many socket reads.
  for (int r = 0; r < kRanks; ++r)
    sent[r] = randomBytes(rng, rng() % 3000 + (r == 3 ? 1 << 20 : 0));
  // received[r][s]: what rank r read under rank s's key; poisoned so an unwritten slot fails.
  std::vector<std::vector<std::vector<uint8_t>>> received(
      kRanks, std::vector<std::vector<uint8_t>>(kRanks, std::vector<uint8_t>(7, 0xAB)));
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      auto client = TcpStoreClient::connect("127.0.0.1", server->port(), milliseconds(5000));
      if (!client.ok()) { errors[r] = client.status().message(); return; }
      Status s = (*client)->set("rank/" + std::to_string(r), sent[r]);
      if (!s.ok()) { errors[r] = s.message(); return; }
      // Read in a rank-dependent order so some gets wait for keys not yet set.
      for (int i = 0; i < kRanks; ++i) {
        int from = (r + i) % kRanks;
        auto value = (*client)->get("rank/" + std::to_string(from), milliseconds(10000));
        if (!value.ok()) { errors[r] = value.status().message(); return; }
        received[r][from] = std::move(value).value();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    for (int s = 0; s < kRanks; ++s) EXPECT_EQ(received[r][s], sent[s]) << r << " from " << s;
  }
}

TEST(TcpStore, GetWaitsForAKeySetLaterAndSetReplacesValues) {
  auto server = startServer();
  auto reader = connectTo(server->port());
  auto writer = connectTo(server->port());
  std::mt19937 rng(ingot::testing::testSeed());
  std::vector<uint8_t> first = randomBytes(rng, 128), second = randomBytes(rng, 100);
  auto start = Clock::now();
  auto pending = std::async(std::launch::async,
                            [&] { return reader->get("nccl/unique_id", milliseconds(10000)); });
  std::this_thread::sleep_for(milliseconds(200));
  ASSERT_TRUE(writer->set("nccl/unique_id", first).ok());
  StatusOr<std::vector<uint8_t>> got = pending.get();
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, first);
  EXPECT_GE(msSince(start), 190);
  ASSERT_TRUE(writer->set("nccl/unique_id", second).ok());
  got = reader->get("nccl/unique_id", milliseconds(0));
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, second);
  ASSERT_TRUE(writer->set("empty", {}).ok());
  got = reader->get("empty", milliseconds(1000));
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_TRUE(got->empty());
}

TEST(TcpStore, GetOfAMissingKeyTimesOutNamingKeyAndAddress) {
  auto server = startServer();
  auto client = connectTo(server->port());
  auto start = Clock::now();
  auto got = client->get("never/set", milliseconds(300));
  long long elapsed = msSince(start);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound);
  const std::string& m = got.status().message();
  EXPECT_NE(m.find("'never/set'"), std::string::npos) << m;
  EXPECT_NE(m.find("127.0.0.1:" + std::to_string(server->port())), std::string::npos) << m;
  EXPECT_NE(m.find("300 ms"), std::string::npos) << m;
  EXPECT_GE(elapsed, 290);
  EXPECT_LT(elapsed, 3000);
  // A timeout is an answer, not a broken connection: the client keeps working.
  ASSERT_TRUE(client->set("k", {1, 2, 3}).ok());
  auto again = client->get("k", milliseconds(1000));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(*again, (std::vector<uint8_t>{1, 2, 3}));
}

TEST(TcpStore, ServerGoingAwayMidGetFailsTheGetPromptly) {
  auto server = startServer();
  auto client = connectTo(server->port());
  auto start = Clock::now();
  auto pending = std::async(std::launch::async,
                            [&] { return client->get("rank/1/ready", milliseconds(30000)); });
  std::this_thread::sleep_for(milliseconds(200));
  server->stop();
  StatusOr<std::vector<uint8_t>> got = pending.get();
  ASSERT_FALSE(got.ok());
  EXPECT_LT(msSince(start), 5000);
  EXPECT_EQ(got.status().code(), StatusCode::kIoError);
  const std::string& m = got.status().message();
  EXPECT_NE(m.find("closed the connection"), std::string::npos) << m;
  EXPECT_NE(m.find("'rank/1/ready'"), std::string::npos) << m;
  auto later = client->get("rank/1/ready", milliseconds(100));
  ASSERT_FALSE(later.ok());
  EXPECT_EQ(later.status().code(), StatusCode::kFailedPrecondition) << later.status().message();
}

TEST(TcpStore, ServerProcessKilledMidGetFailsTheGetPromptly) {
  // Rank 0's process dies (SIGKILL: no clean shutdown); the kernel closes its sockets.
  int pipeFds[2];
  ASSERT_EQ(::pipe(pipeFds), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto server = TcpStoreServer::start("127.0.0.1", 0);
    uint16_t port = server.ok() ? (*server)->port() : 0;
    (void)!::write(pipeFds[1], &port, sizeof(port));
    for (;;) ::pause();
  }
  uint16_t port = 0;
  ASSERT_EQ(::read(pipeFds[0], &port, sizeof(port)), ssize_t(sizeof(port)));
  ::close(pipeFds[0]);
  ::close(pipeFds[1]);
  ASSERT_NE(port, 0);
  auto client = connectTo(port);
  ASSERT_TRUE(client->set("rank/0/alive", {1}).ok());
  auto start = Clock::now();
  auto pending = std::async(std::launch::async,
                            [&] { return client->get("rank/0/plan", milliseconds(30000)); });
  std::this_thread::sleep_for(milliseconds(200));
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  StatusOr<std::vector<uint8_t>> got = pending.get();
  ASSERT_FALSE(got.ok());
  EXPECT_LT(msSince(start), 5000);
  EXPECT_NE(got.status().message().find("closed the connection"), std::string::npos)
      << got.status().message();
  EXPECT_NE(got.status().message().find("'rank/0/plan'"), std::string::npos)
      << got.status().message();
}

TEST(TcpStore, ConnectRetriesUntilTheServerComesUp) {
  uint16_t port = freePort();
  std::unique_ptr<TcpStoreServer> late;
  std::thread starter([&] {
    std::this_thread::sleep_for(milliseconds(300));
    auto s = TcpStoreServer::start("127.0.0.1", port);
    ASSERT_TRUE(s.ok()) << s.status().message();
    late = std::move(s).value();
  });
  auto client = TcpStoreClient::connect("127.0.0.1", port, milliseconds(10000));
  starter.join();
  ASSERT_TRUE(client.ok()) << client.status().message();
  ASSERT_TRUE((*client)->set("a", {42}).ok());
}

TEST(TcpStore, ConnectingToNoServerFailsAtTheDeadlineWithTheCause) {
  uint16_t port = freePort();
  auto start = Clock::now();
  auto client = TcpStoreClient::connect("127.0.0.1", port, milliseconds(400));
  ASSERT_FALSE(client.ok());
  EXPECT_GE(msSince(start), 390);
  EXPECT_LT(msSince(start), 3000);
  const std::string& m = client.status().message();
  EXPECT_NE(m.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << m;
  EXPECT_NE(m.find("refused"), std::string::npos) << m;
}

TEST(TcpStore, BadArgumentsAreRefusedWithTheirName) {
  auto server = startServer();
  auto client = connectTo(server->port());
  Status s = client->set("", {1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("empty key"), std::string::npos) << s.message();
  s = client->set("big", std::vector<uint8_t>(kTcpStoreMaxValueBytes + 1));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'big'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("exceeds the limit"), std::string::npos) << s.message();
  s = client->set(std::string(kTcpStoreMaxKeyBytes + 1, 'k'), {1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  EXPECT_FALSE(TcpStoreClient::connect("", 1234, milliseconds(100)).ok());
  EXPECT_FALSE(TcpStoreClient::connect("127.0.0.1", 0, milliseconds(100)).ok());
  // Refused arguments never touch the connection.
  ASSERT_TRUE(client->set("ok", {7}).ok());
}

TEST(TcpStore, OversizeReplyIsADataLossErrorNotAnAllocation) {
  std::vector<uint8_t> reply = {0, 0, 0, 0, 0, 0, 0, 0, 1};  // code ok, length 2^56
  FakeServer fake(reply);
  auto client = connectTo(fake.port());
  auto got = client->get("id", milliseconds(2000));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(got.status().message().find("oversize"), std::string::npos) << got.status().message();
  EXPECT_NE(got.status().message().find("'id'"), std::string::npos) << got.status().message();
}

TEST(TcpStore, ReplyCutShortIsAShortReadError) {
  std::vector<uint8_t> reply = {0, 10, 0, 0, 0, 0, 0, 0, 0, 'a', 'b', 'c'};  // 3 of 10 bytes
  FakeServer fake(reply);
  auto client = connectTo(fake.port());
  auto got = client->get("id", milliseconds(2000));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kIoError);
  EXPECT_NE(got.status().message().find("short read"), std::string::npos)
      << got.status().message();
  EXPECT_NE(got.status().message().find("3 of 10"), std::string::npos) << got.status().message();
}

TEST(TcpStore, ServerRefusesAnOversizeFrameAndKeepsServingOthers) {
  auto server = startServer();
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(server->port());
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  // SET 'k' claiming a 1 TiB value: the server must answer, not try to allocate it.
  std::vector<uint8_t> frame = {1, 1, 0, 0, 0, 'k', 0, 0, 0, 0, 0, 1, 0, 0};
  ASSERT_EQ(::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL), ssize_t(frame.size()));
  std::vector<uint8_t> reply(512, 0xEE);
  ssize_t got = 0, n = 0;
  while ((n = ::recv(fd, reply.data() + got, reply.size() - got, 0)) > 0) got += n;
  ::close(fd);
  ASSERT_GT(got, 9);
  EXPECT_EQ(reply[0], 2);  // bad request
  std::string message(reply.begin() + 9, reply.begin() + got);
  EXPECT_NE(message.find("exceeds the limit"), std::string::npos) << message;
  EXPECT_NE(message.find("'k'"), std::string::npos) << message;
  auto client = connectTo(server->port());
  ASSERT_TRUE(client->set("k", {5}).ok());
  auto value = client->get("k", milliseconds(1000));
  ASSERT_TRUE(value.ok()) << value.status().message();
  EXPECT_EQ(*value, std::vector<uint8_t>{5});
}

TEST(TcpStore, RanksJoinThroughTheMasterAddressWhicheverStartsFirst) {
  const uint16_t port = freePort();
  constexpr int kRanks = 4;
  std::vector<std::string> seen(kRanks, "poison");
  std::vector<std::thread> ranks;
  // Rank 0's store outlives every rank's thread: a server stopped as soon as the last key
  // arrives could cut off the reply to that very set.
  RankStore server_of_rank0;
  // Ranks 1..3 start first and wait for rank 0, which starts the server 200 ms later.
  for (int r = kRanks - 1; r >= 0; --r) {
    ranks.emplace_back([&, r] {
      if (r == 0) std::this_thread::sleep_for(milliseconds(200));
      auto joined = joinTcpStore(r, "127.0.0.1", port, milliseconds(10000));
      if (!joined.ok()) { seen[r] = joined.status().message(); return; }
      EXPECT_EQ(joined->server != nullptr, r == 0);
      if (r == 0) ASSERT_TRUE(joined->client->set("id", {'g', 'o'}).ok());
      auto id = joined->client->get("id", milliseconds(10000));
      seen[r] = id.ok() ? std::string(id->begin(), id->end()) : id.status().message();
      // Rank 0 keeps serving until every rank has read the id.
      if (r == 0) {
        for (int k = 1; k < kRanks; ++k)
          EXPECT_TRUE(joined->client->get("read/" + std::to_string(k), milliseconds(10000)).ok());
        server_of_rank0 = std::move(joined).value();
      } else {
        Status s = joined->client->set("read/" + std::to_string(r), {});
        EXPECT_TRUE(s.ok()) << s.message();
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(seen[r], "go") << "rank " << r;
  EXPECT_FALSE(joinTcpStore(1, "127.0.0.1", 0, milliseconds(100)).ok());
}

TEST(TcpStore, ServerBindFailureNamesTheAddress) {
  auto server = startServer();
  auto second = TcpStoreServer::start("127.0.0.1", server->port());
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find(std::to_string(server->port())), std::string::npos)
      << second.status().message();
}

}  // namespace
}  // namespace ingot
