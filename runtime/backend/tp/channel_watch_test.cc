// Tests of ChannelWatch with a step channel: a peer that sends part of a frame and stalls
// does not hold the watch's destructor (nor rank 0's call), and the frame survives the
// interrupted read.
#include "runtime/backend/tp/channel_watch.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "testing/llama_program.h"
#include "testing/step_builder.h"
#include "runtime/backend/tp/multi_process_tp_backend.h"
#include "runtime/backend/tp/rank_backend.h"
#include "runtime/backend/tp/step_channel.h"
#include "runtime/backend/tp/tp_process_test_util.h"
#include "testing/test_seed.h"
#include "runtime/dist/tcp_store.h"

namespace ingot {
namespace {

using Clock = StepChannel::Clock;

/// The bytes StepChannel::send puts on the wire for (command, payload).
std::vector<uint8_t> frameBytes(StepCommand command, const std::vector<uint8_t>& payload) {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  std::vector<uint8_t> wire;
  std::thread reader([&] {
    uint8_t buf[4096];
    for (ssize_t n; (n = ::read(fds[1], buf, sizeof(buf))) > 0;) wire.insert(wire.end(), buf, buf + n);
  });
  {
    StepChannel writer(fds[0], "test");
    EXPECT_TRUE(writer.send(command, payload, Clock::now() + std::chrono::seconds(5)).ok());
  }  // closes fds[0]: the reader sees end of stream
  reader.join();
  ::close(fds[1]);
  return wire;
}

void writeAllBytes(int fd, const uint8_t* data, size_t n) {
  while (n > 0) {
    const ssize_t k = ::write(fd, data, n);
    ASSERT_GT(k, 0);
    data += k;
    n -= static_cast<size_t>(k);
  }
}

/// Waits (up to 2 s) for `count` to reach `want`; returns the count then.
int countReaching(const std::atomic<int>& count, int want) {
  const auto give_up = Clock::now() + std::chrono::seconds(2);
  while (count.load() < want && Clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  return count.load();
}

TEST(ChannelWatcher, OneThreadServesManyWatchesAndNoneIsCalledAfterItEnds) {
  int a[2], b[2];
  ASSERT_EQ(::pipe2(a, O_CLOEXEC | O_NONBLOCK), 0);
  ASSERT_EQ(::pipe2(b, O_CLOEXEC | O_NONBLOCK), 0);
  ChannelWatcher watcher;
  std::atomic<int> calls{0};
  std::atomic<int> late{0};
  std::atomic<bool> in_scope{false};
  for (int step = 0; step < 300; ++step) {
    // Alternate the watched descriptor; a byte written before the watch starts is seen.
    const int watched = step % 2 == 0 ? a[0] : b[0];
    const int writer = step % 2 == 0 ? a[1] : b[1];
    if (step % 3 == 0) ASSERT_EQ(::write(writer, "x", 1), 1);
    const int before = calls.load();
    {
      in_scope = true;
      ChannelWatch watch(watcher, {watched}, POLLIN, [&](size_t i, short) {
        if (!in_scope.load()) ++late;
        EXPECT_EQ(i, 0u);
        char byte;
        EXPECT_EQ(::read(watched, &byte, 1), 1);
        ++calls;
        return true;  // consumed: keep watching
      });
      if (step % 3 != 0) ASSERT_EQ(::write(writer, "y", 1), 1);
      ASSERT_EQ(countReaching(calls, before + 1), before + 1) << "step " << step;
      in_scope = false;
    }
    // Between watches: bytes on either descriptor reach nobody.
    ASSERT_EQ(::write(a[1], "z", 1), 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    char drained[8];
    EXPECT_EQ(::read(a[0], drained, sizeof(drained)), 1) << "step " << step;
  }
  EXPECT_EQ(calls.load(), 300);
  EXPECT_EQ(late.load(), 0);
  for (int fd : {a[0], a[1], b[0], b[1]}) ::close(fd);
}

TEST(ChannelWatcher, EndingAWatchStopsAReadyThatWaitsOnAPeer) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
  ChannelWatcher watcher;
  for (int round = 0; round < 3; ++round) {
    std::atomic<bool> entered{false};
    std::atomic<bool> saw_stop{false};
    Clock::time_point ended;
    {
      ChannelWatch watch(watcher, {p[0]}, POLLIN, [&](size_t, short) {
        entered = true;
        // A peer that never finishes its frame: only the stop descriptor ends the wait.
        pollfd stop{watch.stopFd(), POLLIN, 0};
        saw_stop = ::poll(&stop, 1, 10000) == 1 && watch.stopping();
        return false;
      });
      ASSERT_EQ(::write(p[1], "x", 1), 1);
      const auto give_up = Clock::now() + std::chrono::seconds(2);
      while (!entered.load() && Clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      ASSERT_TRUE(entered.load());
      ended = Clock::now();
    }
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - ended).count();
    EXPECT_TRUE(saw_stop.load()) << "round " << round;
    EXPECT_LT(ms, 1000.0) << "the watch's end must not wait for the peer";
    char byte;
    ASSERT_EQ(::read(p[0], &byte, 1), 1);
  }
  ::close(p[0]);
  ::close(p[1]);
}

TEST(ChannelWatch, PartialFrameThenStallDoesNotHoldTheDestructorAndTheFrameSurvives) {
  std::mt19937 rng(ingot::testing::testSeed());
  std::vector<uint8_t> payload(1 + rng() % 5000);
  for (uint8_t& b : payload) b = static_cast<uint8_t>(rng());
  const std::vector<uint8_t> frame = frameBytes(StepCommand::kResult, payload);
  ASSERT_EQ(frame.size(), 16 + payload.size());

  for (int trial = 0; trial < 4; ++trial) {
    int fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    StepChannel channel(fds[0], "tp rank 1");
    // Cut inside the header (trial 0, 1) or inside the payload (trial 2, 3).
    const size_t cut = trial < 2 ? 1 + rng() % 15 : 16 + rng() % payload.size();
    writeAllBytes(fds[1], frame.data(), cut);

    std::atomic<bool> entered{false}, stopped_seen{false};
    Status in_watch = internalError("ready never ran");
    Clock::time_point asked;
    {
      ChannelWatch watch({channel.fd()}, POLLIN, [&](size_t, short) {
        entered = true;
        StepCommand command{};
        std::vector<uint8_t> got;
        bool stopped = false;
        // A 30 s deadline, as rank 0's collect uses: only the stop pipe can end this early.
        in_watch = channel.receiveUnlessStopped(&command, &got, Clock::now() + std::chrono::seconds(30),
                                                watch.stopFd(), &stopped);
        stopped_seen = stopped;
        return false;
      });
      while (!entered) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::this_thread::sleep_for(std::chrono::milliseconds(30));  // now blocked on the stall
      asked = Clock::now();
    }
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - asked).count();
    EXPECT_LT(ms, 100.0) << "the watch's destructor waited on a stalled peer (cut " << cut << ")";
    EXPECT_TRUE(in_watch.ok()) << in_watch.message();
    EXPECT_TRUE(stopped_seen) << "the read did not give way to the stop request";

    // The rest arrives later: the next receive completes the same frame, byte for byte.
    writeAllBytes(fds[1], frame.data() + cut, frame.size() - cut);
    StepCommand command{};
    std::vector<uint8_t> got(7, 0xEE);  // poison
    Status s = channel.receive(&command, &got, Clock::now() + std::chrono::seconds(5));
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(command, StepCommand::kResult);
    EXPECT_EQ(got, payload) << "cut " << cut;
    ::close(fds[1]);
  }
}

TEST(ChannelWatch, AStopRequestDoesNotCutAFrameThatIsAlreadyThere) {
  std::mt19937 rng(ingot::testing::testSeed());
  std::vector<uint8_t> payload(rng() % 300);
  for (uint8_t& b : payload) b = static_cast<uint8_t>(rng());
  const std::vector<uint8_t> frame = frameBytes(StepCommand::kGroupBroken, payload);
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  StepChannel channel(fds[0], "tp rank 2");
  writeAllBytes(fds[1], frame.data(), frame.size());
  int stop[2];
  ASSERT_EQ(::pipe(stop), 0);
  ASSERT_EQ(::write(stop[1], "x", 1), 1);  // stop already requested
  StepCommand command{};
  std::vector<uint8_t> got;
  bool stopped = true;
  Status s = channel.receiveUnlessStopped(&command, &got, Clock::now() + std::chrono::seconds(5),
                                          stop[0], &stopped);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(stopped) << "a whole frame was waiting; reading it needs no wait";
  EXPECT_EQ(command, StepCommand::kGroupBroken);
  EXPECT_EQ(got, payload);
  // Nothing more to read: now the stop request ends the wait at once, with no frame.
  const auto start = Clock::now();
  s = channel.receiveUnlessStopped(&command, &got, Clock::now() + std::chrono::seconds(30),
                                   stop[0], &stopped);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(stopped);
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(100));
  ::close(stop[0]);
  ::close(stop[1]);
  ::close(fds[1]);
}

/// A worker rank that joins, loads and says hello as runTpWorker does, then answers its
/// first command with only part of a kResult frame and stalls (until killed).
Status stallMidAnswer(const TpWorkerOptions& w) {
  INGOT_ASSIGN_OR_RETURN(std::unique_ptr<TcpStoreClient> store,
                         TcpStoreClient::connect(w.master_addr, w.master_port, w.timeout));
  RankOptions r;
  r.rank = w.rank;
  r.world_size = w.world_size;
  r.group = w.group;
  r.timeout = w.timeout;
  r.cpu.num_threads = w.num_threads;
  r.cpu.num_kv_blocks = w.num_kv_blocks;
  r.chunk_floats = w.chunk_floats;
  r.nnodes = w.nnodes;
  INGOT_ASSIGN_OR_RETURN(std::unique_ptr<RankBackend> self, RankBackend::join(*store, r));
  INGOT_ASSIGN_OR_RETURN(Artifact artifact, Artifact::open(w.artifact));
  INGOT_RETURN_IF_ERROR(self->load(artifact));
  WorkerHello hello;
  hello.rank = w.rank;
  hello.num_kv_blocks = self->backend().numKvBlocks();
  hello.vocab_size = self->backend().vocabSize();
  hello.num_threads = self->backend().numThreads();
  hello.artifact_id = artifact.header().manifest_xxh64;
  INGOT_ASSIGN_OR_RETURN(std::vector<uint8_t> port, store->get(w.group + "/step_channel_port", w.timeout));
  const auto port_number = static_cast<uint16_t>(std::stoi(std::string(port.begin(), port.end())));
  INGOT_ASSIGN_OR_RETURN(std::unique_ptr<StepChannel> channel,
                         connectStepChannel(w.master_addr, port_number, Clock::now() + w.timeout));
  INGOT_RETURN_IF_ERROR(channel->send(StepCommand::kHello, encodeHello(hello), Clock::now() + w.timeout));
  StepCommand command{};
  std::vector<uint8_t> payload;
  INGOT_RETURN_IF_ERROR(channel->receive(&command, &payload, Clock::now() + w.timeout));
  const std::vector<uint8_t> answer = frameBytes(StepCommand::kResult, encodeStatus(okStatus()));
  if (::send(channel->fd(), answer.data(), answer.size() / 2, MSG_NOSIGNAL) <= 0)
    return ioError("could not send half an answer");
  std::this_thread::sleep_for(std::chrono::seconds(60));  // rank 0's destructor kills it first
  return okStatus();
}

TEST(ChannelWatch, WorkerStalledMidAnswerDoesNotHoldRankZerosFailedCall) {
  testing::LlamaProgramOptions lo;
  lo.tp = 2;
  lo.seed = ingot::testing::testSeed();
  lo.block_size = 16;
  StatusOr<std::vector<uint8_t>> bytes = testing::buildLlamaArtifact(lo);
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  const std::string path = ::testing::TempDir() + "stall-" + std::to_string(::getpid()) + ".ingot";
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes->data()), static_cast<std::streamsize>(bytes->size()));
  StatusOr<Artifact> artifact = Artifact::open(path);
  ASSERT_TRUE(artifact.ok()) << artifact.status().message();

  MultiProcessTpOptions o;
  o.artifact_path = path;
  o.cpu.num_threads = 1;
  o.cpu.num_kv_blocks = 32;
  o.timeout = std::chrono::seconds(20);
  o.watch_workers = true;
  o.launch_worker = [](const TpWorkerOptions& w) -> StatusOr<pid_t> {
    const pid_t pid = ::fork();
    if (pid < 0) return ioError("fork failed");
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      const Status s = stallMidAnswer(w);
      if (!s.ok()) std::fprintf(stderr, "stalling worker: %s\n", s.message().c_str());
      ::_exit(s.ok() ? 0 : 1);
    }
    return pid;
  };
  testing::DeafCommunicator* hanging = nullptr;
  o.wrap_rank0_communicator = [&](Communicator* inner) {
    // Rank 0's first all_reduce blocks until abort(), as an NCCL collective whose peer
    // does not come.
    auto c = std::make_unique<testing::DeafCommunicator>(inner, 0, std::chrono::seconds(15));
    hanging = c.get();
    return c;
  };
  auto processes = MultiProcessTpBackend::create(*artifact, o);
  ASSERT_TRUE(processes.ok()) << processes.status().message();
  ASSERT_NE(hanging, nullptr);
  // Rank 0's own part fails (its group aborted) once the worker's half answer is in the watch's read.
  Clock::time_point aborted{};
  hanging->on_hang = [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    aborted = Clock::now();
    hanging->abort(internalError("rank 0's own part failed"));
  };
  testing::Sequence seq;
  seq.tokens = {1, 2, 3};
  seq.blocks = {0};
  std::vector<testing::Sequence*> one = {&seq};
  std::vector<float> logits;
  const Status st = (*processes)->step(testing::makeStep(one, {3}, 16), &logits);
  ASSERT_FALSE(st.ok());
  ASSERT_NE(aborted, Clock::time_point{}) << "rank 0 never reached its first sum: " << st.message();
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - aborted).count();
  EXPECT_NE(st.message().find("rank 0's own part failed"), std::string::npos) << st.message();
  // The broken group's grace (200 ms) bounds the wait for the stalled answer, not the 20 s
  // timeout that a watch read blocked on the half frame would impose.
  EXPECT_LT(ms, 1500.0) << "the stalled half answer held rank 0's call";
  std::printf("[ measured ] rank 0's failed call returned %.1f ms after its abort, a worker "
              "stalled mid-answer (timeout 20000 ms)\n", ms);
  processes->reset();
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ingot
