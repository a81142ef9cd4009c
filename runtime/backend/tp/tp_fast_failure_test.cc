// Fast failure of a process group whose ranks are deaf to each other, as NCCL ranks are.
//
// A rank's communicator is wrapped so that one collective blocks until it is aborted from
// outside (NCCL keeps waiting for a peer that failed or died: only ncclCommAbort ends it).
// A worker that fails its step after it started, or dies, must then end rank 0's step within
// milliseconds through the step channel (ChannelWatch), not at the collective timeout; a
// worker stuck so must leave its step as soon as rank 0's channel closes. Also ChannelWatch
// itself: a closed socket is seen at once, and the destructor stops the thread promptly.
// Start-up too: a worker that fails its load, or dies, while rank 0 is inside its load's
// collective ends that collective at once with the worker's error.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <cstdio>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

#include "runtime/backend/cpu/tp_cpu_backend.h"
#include "testing/llama_program.h"
#include "testing/step_builder.h"
#include "runtime/backend/tp/channel_watch.h"
#include "runtime/backend/tp/multi_process_tp_backend.h"
#include "runtime/backend/tp/rank_backend.h"
#include "runtime/backend/tp/step_channel.h"
#include "runtime/backend/tp/tp_process_test_util.h"
#include "testing/test_seed.h"
#include "runtime/dist/tcp_store.h"

namespace ingot {
namespace {

using testing::DeafCommunicator;
using testing::FailingCommunicator;
using testing::forkWorker;
using testing::makeStep;
using testing::Sequence;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kBlockSize = 16;
/// The tiny Llama sums 5 times per step (embedding, then o and down of 2 layers): sum 7 is
/// the second step's third.
constexpr int kSecondStepThirdSum = 7;
/// How long the deaf collective waits before giving up by itself: far beyond what the test
/// accepts, so only an abort from outside can make it pass.
constexpr milliseconds kDeafFor{15000};
/// How long a failing worker waits after the group formed before its load fails, so that
/// rank 0 is surely inside its load's collective by then (its own load takes a few ms).
constexpr milliseconds kWorkerLoadDelay{200};

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

class TpFastFailure : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::TinyTpModel m = testing::writeTinyTpModel(2, seed_, kBlockSize, "fast-failure");
    path_ = m.path;
    ASSERT_FALSE(HasFailure());
    artifact_ = std::make_unique<Artifact>(std::move(m.artifact));
  }
  void TearDown() override { std::remove(path_.c_str()); }

  /// CPU ranks as processes, rank 0 deaf at its sum number `hang_at` (kept in `deaf`;
  /// -1: never), by default the second step's third.
  MultiProcessTpOptions options(int hang_at = kSecondStepThirdSum) {
    MultiProcessTpOptions o;
    o.artifact_path = path_;
    o.cpu.num_threads = 2;
    o.cpu.num_kv_blocks = 32;
    o.timeout = std::chrono::seconds(20);
    o.launch_worker = forkWorker;
    o.watch_workers = true;  // CPU ranks: off by default (their shared group passes aborts)
    o.wrap_rank0_communicator = [this, hang_at](Communicator* inner) {
      auto wrapped = std::make_unique<DeafCommunicator>(inner, hang_at, kDeafFor);
      deaf = wrapped.get();
      return wrapped;
    };
    return o;
  }

  std::unique_ptr<Artifact> artifact_;
  DeafCommunicator* deaf = nullptr;
  /// The test's seed: the model's weights (seed_), its tokens (seed_ + 1).
  const uint32_t seed_ = ingot::testing::testSeed();
  std::string path_;
};

TEST_F(TpFastFailure, WorkerStepFailureEndsRankZerosStuckCollectiveWithinMilliseconds) {
  MultiProcessTpOptions o = options();
  o.launch_worker = [](const TpWorkerOptions& w) {
    TpWorkerOptions failing = w;
    failing.wrap_communicator = [](Communicator* inner) {
      return std::make_unique<FailingCommunicator>(inner, kSecondStepThirdSum);
    };
    return forkWorker(failing);
  };
  auto processes = MultiProcessTpBackend::create(*artifact_, o);
  ASSERT_TRUE(processes.ok()) << processes.status().message();
  ASSERT_NE(deaf, nullptr);
  Sequence s;
  s.tokens = {1, 2, 3, 4, 5};
  s.blocks = {0};
  std::vector<Sequence*> one = {&s};
  std::vector<float> logits;
  ASSERT_TRUE((*processes)->step(makeStep(one, {4}, kBlockSize), &logits).ok());
  std::atomic<bool> hung{false};
  deaf->on_hang = [&] { hung = true; };
  const auto start = Clock::now();
  Status st = (*processes)->step(makeStep(one, {1}, kBlockSize), &logits);
  const double ms = msSince(start);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(hung.load()) << "rank 0 never reached the collective the worker failed in";
  EXPECT_EQ(st.message().rfind("tp rank 1: ", 0), 0u) << st.message();
  EXPECT_NE(st.message().find("injected all_reduce failure"), std::string::npos) << st.message();
  EXPECT_LT(ms, 1000.0) << "only the worker's answer can end rank 0's deaf collective";
  std::printf("[ measured ] worker step failure ended rank 0's step after %.1f ms "
              "(collective timeout 20000 ms)\n", ms);
}

TEST_F(TpFastFailure, WorkerDeathEndsRankZerosStuckCollectiveWithinMilliseconds) {
  auto processes = MultiProcessTpBackend::create(*artifact_, options());
  ASSERT_TRUE(processes.ok()) << processes.status().message();
  ASSERT_NE(deaf, nullptr);
  Sequence s;
  s.tokens = {1, 2, 3, 4, 5};
  s.blocks = {0};
  std::vector<Sequence*> one = {&s};
  std::vector<float> logits;
  ASSERT_TRUE((*processes)->step(makeStep(one, {4}, kBlockSize), &logits).ok());
  const pid_t victim = (*processes)->workerPid(1);
  Clock::time_point killed{};
  deaf->on_hang = [&] {  // rank 0 is inside the collective: the worker dies now
    killed = Clock::now();
    ::kill(victim, SIGKILL);
  };
  Status st = (*processes)->step(makeStep(one, {1}, kBlockSize), &logits);
  ASSERT_FALSE(st.ok());
  ASSERT_NE(killed, Clock::time_point{}) << "rank 0 never reached the deaf collective";
  const double ms = msSince(killed);
  EXPECT_NE(st.message().find("tp rank 1 (pid " + std::to_string(victim) + ")"), std::string::npos)
      << st.message();
  EXPECT_LT(ms, 1000.0);
  std::printf("[ measured ] killed worker ended rank 0's step after %.1f ms: %s\n", ms,
              st.message().c_str());
  EXPECT_EQ((*processes)->copyKvBlocks(0, 1).message(), st.message()) << "broken for good";
}

TEST_F(TpFastFailure, WorkerLeavesItsStuckCollectiveWithinMillisecondsOfRankZerosChannelClosing) {
  // Rank 0 is played here: it joins the group, takes the worker's hello, sends one step and,
  // once the worker is stuck in its deaf first sum, closes the channel as a dying rank 0's
  // socket would close.
  auto server = TcpStoreServer::start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status().message();
  auto store = TcpStoreClient::connect("127.0.0.1", (*server)->port(), milliseconds(5000));
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto listener = StepChannelListener::listen("127.0.0.1");
  ASSERT_TRUE(listener.ok()) << listener.status().message();
  const std::string group = "worker-watch-" + std::to_string(::getpid());
  const std::string port = std::to_string((*listener)->port());
  const std::vector<uint8_t> portBytes(port.begin(), port.end());
  ASSERT_TRUE((*store)->set(group + "/step_channel_port", portBytes, milliseconds(5000)).ok());

  std::atomic<bool> hung{false};
  Status workerStatus;
  Clock::time_point workerEnded{};
  TpWorkerOptions w;
  w.artifact = path_;
  w.rank = 1;
  w.world_size = 2;
  w.master_port = (*server)->port();
  w.group = group;
  w.num_kv_blocks = 32;
  w.timeout = std::chrono::seconds(20);
  w.watch_rank0 = true;  // CPU ranks: off by default
  w.wrap_communicator = [&](Communicator* inner) {
    auto wrapped = std::make_unique<DeafCommunicator>(inner, 0, kDeafFor);
    wrapped->on_hang = [&] { hung = true; };
    return wrapped;
  };
  std::thread worker([&] {
    workerStatus = runTpWorker(w);
    workerEnded = Clock::now();
  });
  RankOptions r;
  r.rank = 0;
  r.world_size = 2;
  r.group = group;
  r.timeout = std::chrono::seconds(20);
  auto self = RankBackend::join(**store, r);
  ASSERT_TRUE(self.ok()) << self.status().message();
  auto channel = (*listener)->accept(Clock::now() + std::chrono::seconds(20));
  ASSERT_TRUE(channel.ok()) << channel.status().message();
  StepCommand command{};
  std::vector<uint8_t> hello;
  ASSERT_TRUE((*channel)->receive(&command, &hello, Clock::now() + std::chrono::seconds(20)).ok());
  ASSERT_EQ(command, StepCommand::kHello);

  Sequence s;
  s.tokens = {3, 1, 4, 1, 5};
  s.blocks = {0};
  std::vector<Sequence*> one = {&s};
  ASSERT_TRUE((*channel)->send(StepCommand::kStep, encodeStep(makeStep(one, {5}, kBlockSize)),
                               Clock::now() + std::chrono::seconds(5)).ok());
  for (int i = 0; i < 10000 && !hung.load(); ++i) std::this_thread::sleep_for(milliseconds(1));
  ASSERT_TRUE(hung.load()) << "the worker never reached its first sum";
  const auto closed = Clock::now();
  (*channel)->close();
  worker.join();
  const double ms = std::chrono::duration<double, std::milli>(workerEnded - closed).count();
  EXPECT_FALSE(workerStatus.ok());
  EXPECT_LT(ms, 1000.0) << workerStatus.message();
  std::printf("[ measured ] worker left its step %.1f ms after rank 0's channel closed: %s\n", ms,
              workerStatus.message().c_str());
}

// Start-up: rank 0's load may hold a collective (CUDA ranks agree on their KV pool there);
// `after_rank0_load` stands in for it with a sum only an abort ends, as NCCL's.

TEST_F(TpFastFailure, WorkerFailingItsLoadEndsRankZerosLoadCollectiveWithItsOwnError) {
  MultiProcessTpOptions o = options(/*hang_at=*/0);
  const std::string missing = path_ + ".missing-" + std::to_string(std::random_device{}());
  // When the worker's load starts failing, written by the worker process (shared page).
  void* page = ::mmap(nullptr, sizeof(int64_t), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  auto* failing_at = static_cast<int64_t*>(page);
  *failing_at = 0;
  o.launch_worker = [missing, failing_at](const TpWorkerOptions& w) {
    TpWorkerOptions bad = w;
    bad.artifact = missing;  // the worker joins, then cannot open it
    // Called once the group formed: the worker fails well after rank 0 began waiting.
    bad.wrap_communicator = [failing_at](Communicator*) -> std::unique_ptr<Communicator> {
      std::this_thread::sleep_for(kWorkerLoadDelay);
      *failing_at = Clock::now().time_since_epoch().count();  // steady: one clock per host
      return nullptr;
    };
    return forkWorker(bad);
  };
  Clock::time_point entered{};
  o.after_rank0_load = [&](Communicator& rank0) {
    entered = Clock::now();
    float x = 1.0f;
    return rank0.allReduceSum(&x, 1);
  };
  const auto start = Clock::now();
  auto processes = MultiProcessTpBackend::create(*artifact_, o);
  const auto returned = Clock::now();
  const double total = msSince(start);
  ASSERT_FALSE(processes.ok());
  ASSERT_NE(entered, Clock::time_point{}) << "rank 0 never reached its load's collective";
  ASSERT_NE(*failing_at, 0) << "the worker never began to fail";
  const Clock::time_point failed{Clock::duration(*failing_at)};
  ::munmap(page, sizeof(int64_t));
  const double ms = std::chrono::duration<double, std::milli>(returned - failed).count();
  const double waited = std::chrono::duration<double, std::milli>(failed - entered).count();
  const std::string& m = processes.status().message();
  EXPECT_EQ(m.rfind("tp rank 1 (node 0): ", 0), 0u) << m;
  EXPECT_NE(m.find(missing), std::string::npos) << "the worker's own error: " << m;
  EXPECT_EQ(m.find("deaf collective"), std::string::npos) << m;
  EXPECT_GT(waited, 0.0) << "rank 0 was not inside its collective when the worker failed";
  EXPECT_LT(ms, 1000.0) << "only the worker's hello can end rank 0's deaf collective: " << m;
  std::printf("[ measured ] worker load failure ended rank 0's load collective %.2f ms after "
              "the worker failed (rank 0 had waited %.1f ms; create %.1f ms; collective "
              "timeout 20000 ms): %s\n",
              ms, waited, total, m.c_str());
}

TEST_F(TpFastFailure, WorkerKilledWhileRanksLoadEndsRankZerosLoadCollective) {
  MultiProcessTpOptions o = options(/*hang_at=*/0);
  pid_t victim = -1;
  o.launch_worker = [&victim](const TpWorkerOptions& w) {
    StatusOr<pid_t> pid = forkWorker(w);
    if (pid.ok()) victim = *pid;
    return pid;
  };
  Clock::time_point killed{};
  o.after_rank0_load = [&](Communicator& rank0) {
    killed = Clock::now();  // rank 0 enters its load's collective as the worker dies
    ::kill(victim, SIGKILL);
    float x = 1.0f;
    return rank0.allReduceSum(&x, 1);
  };
  auto processes = MultiProcessTpBackend::create(*artifact_, o);
  ASSERT_FALSE(processes.ok());
  ASSERT_NE(killed, Clock::time_point{}) << "rank 0 never reached its load's collective";
  const double ms = msSince(killed);
  const std::string& m = processes.status().message();
  EXPECT_EQ(m.rfind("tp rank 1 (pid " + std::to_string(victim) + ") ", 0), 0u) << m;
  EXPECT_NE(m.find("signal 9"), std::string::npos) << m;
  EXPECT_NE(m.find("while the ranks loaded"), std::string::npos) << m;
  EXPECT_LT(ms, 1000.0) << m;
  std::printf("[ measured ] killed worker ended rank 0's load collective after %.1f ms: %s\n", ms,
              m.c_str());
}

TEST_F(TpFastFailure, HellosReadDuringRankZerosLoadLeaveTheGroupAsBefore) {
  MultiProcessTpOptions o = options(/*hang_at=*/-1);
  // Rank 0 lingers in its load window, so the workers' (good) hellos arrive under the watch.
  o.after_rank0_load = [](Communicator&) {
    std::this_thread::sleep_for(milliseconds(300));
    return okStatus();
  };
  auto processes = MultiProcessTpBackend::create(*artifact_, o);
  ASSERT_TRUE(processes.ok()) << processes.status().message();
  EXPECT_TRUE((*processes)->groupStatus().ok()) << (*processes)->groupStatus().message();
  TpCpuBackendOptions t;
  t.cpu.num_threads = 2;
  t.cpu.num_kv_blocks = 32;
  auto threads = TpCpuBackend::create(*artifact_, t);
  ASSERT_TRUE(threads.ok()) << threads.status().message();
  // The workers' hello facts were summed as before.
  EXPECT_EQ((*processes)->numKvBlocks(), (*threads)->numKvBlocks());
  EXPECT_EQ((*processes)->matrixBytes(), (*threads)->matrixBytes());
  EXPECT_EQ((*processes)->numThreads(), (*threads)->numThreads());
  std::mt19937 rng(seed_ + 1);
  const int vocab = static_cast<int>((*threads)->vocabSize());
  Sequence a, b;
  for (int i = 0; i < 7; ++i) a.tokens.push_back(static_cast<int32_t>(rng() % vocab));
  a.blocks = b.blocks = {1};
  b.tokens = a.tokens;
  std::vector<Sequence*> on_processes = {&a}, on_threads = {&b};
  for (int step = 0; step < 3; ++step) {
    const int count = step == 0 ? 7 : 1;
    std::vector<float> lp(static_cast<size_t>(count) * vocab,
                          std::numeric_limits<float>::quiet_NaN()),
        lt = lp;
    ASSERT_TRUE((*processes)->step(makeStep(on_processes, {count}, kBlockSize), &lp).ok());
    ASSERT_TRUE((*threads)->step(makeStep(on_threads, {count}, kBlockSize), &lt).ok());
    ASSERT_EQ(lp.size(), lt.size());
    for (size_t i = 0; i < lp.size(); ++i)
      ASSERT_EQ(std::memcmp(&lp[i], &lt[i], sizeof(float)), 0) << "step " << step << " logit " << i;
    const int32_t next = static_cast<int32_t>(rng() % vocab);
    a.tokens.push_back(next);
    b.tokens.push_back(next);
  }
}

TEST(ChannelWatch, SeesAClosedPeerAtOnceAndStopsPromptly) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  std::atomic<int> calls{0};
  std::atomic<int64_t> seen_ns{0};
  Clock::time_point closed;
  {
    ChannelWatch watch({pair[0]}, POLLRDHUP, [&](size_t i, short revents) {
      EXPECT_EQ(i, 0u);
      EXPECT_TRUE(revents & (POLLRDHUP | POLLHUP));
      seen_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - closed).count();
      ++calls;
      return false;
    });
    // Data alone is not a hang-up: POLLRDHUP is all the watch asked for.
    ASSERT_EQ(::write(pair[1], "x", 1), 1);
    std::this_thread::sleep_for(milliseconds(20));
    EXPECT_EQ(calls.load(), 0);
    closed = Clock::now();
    ::close(pair[1]);
    for (int i = 0; i < 1000 && calls.load() == 0; ++i)
      std::this_thread::sleep_for(milliseconds(1));
    EXPECT_EQ(calls.load(), 1);
    std::this_thread::sleep_for(milliseconds(10));
    EXPECT_EQ(calls.load(), 1) << "a descriptor whose callback returned false is not watched";
  }
  EXPECT_LT(seen_ns.load(), 100'000'000) << "seen within 100 ms of the close";
  ::close(pair[0]);
  // A watch with nothing to report ends at once when destroyed (a pipe wakes its poll).
  int quiet[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, quiet), 0);
  const auto start = Clock::now();
  { ChannelWatch idle({quiet[0]}, POLLIN, [](size_t, short) { return true; }); }
  EXPECT_LT(msSince(start), 50.0);
  ::close(quiet[0]);
  ::close(quiet[1]);
}

}  // namespace
}  // namespace ingot
