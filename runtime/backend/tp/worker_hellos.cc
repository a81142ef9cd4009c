// MultiProcessTpBackend start-up: rank 0 loads while the workers' hellos and processes are watched.
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "runtime/backend/tp/channel_watch.h"
#include "runtime/backend/tp/multi_process_tp_backend.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434  // the same number on every Linux architecture
#endif

namespace ingot {
namespace {

/// How often the wait for the last hellos after rank 0's load looks at the worker processes.
constexpr std::chrono::milliseconds kHelloPollSlice{20};
/// How long a channel that closed before its hello waits for its process to be reaped, so
/// the error can say which rank it was and how it ended (a process exiting closes its
/// sockets just before it becomes a zombie).
constexpr std::chrono::milliseconds kReapGrace{100};

/// An artifact identity as errors print it: 0x and 16 hex digits.
std::string hex64(uint64_t v) {
  char text[19];
  std::snprintf(text, sizeof(text), "0x%016llx", static_cast<unsigned long long>(v));
  return text;
}

/// Descriptors closed when it goes (the workers' pidfds).
struct OwnedFds {
  std::vector<int> fds;
  ~OwnedFds() {
    for (int fd : fds) ::close(fd);
  }
};

}  // namespace

Status MultiProcessTpBackend::exitedWorker(const std::string& when) {
  for (int r = 1; r < worldSize(); ++r) {
    const std::string ended = reapIfExited(r);
    if (ended.empty()) continue;
    // A worker that exits on its own prints its error first; a signal leaves none.
    const bool said_why = ended.rfind("exited", 0) == 0;
    return failedPrecondition(who(r) + " " + ended + " " + when +
                              (said_why ? " (its error is printed above)" : ""));
  }
  return okStatus();
}

Status MultiProcessTpBackend::joinProbe(const Artifact& artifact) {
  INGOT_RETURN_IF_ERROR(exitedWorker("while the group formed"));
  // A connection waiting now is most likely another node's notice of a rank's exit, sent
  // whole right after connecting; but a CPU rank that finished its own join may already be
  // saying its hello. A hello is read only once bytes are there: a channel still silent
  // after kReapGrace is kept for finishHellos, never failed here.
  for (;;) {
    StatusOr<std::unique_ptr<StepChannel>> channel = listener_->accept(Clock::now());
    if (!channel.ok()) return okStatus();
    pollfd data{(*channel)->fd(), POLLIN, 0};
    if (::poll(&data, 1, static_cast<int>(kReapGrace.count())) <= 0) {
      unhelloed_.push_back(std::move(channel).value());
      continue;
    }
    INGOT_RETURN_IF_ERROR(readHello(artifact, std::move(channel).value(), Clock::now() + timeout_, -1));
  }
}

Status MultiProcessTpBackend::readHello(const Artifact& artifact,
                                        std::unique_ptr<StepChannel> channel,
                                        Clock::time_point deadline, int stop_fd) {
  StepCommand command{};
  std::vector<uint8_t> payload;
  bool stopped = false;
  const Status got = channel->receiveUnlessStopped(&command, &payload, deadline, stop_fd, &stopped);
  if (got.ok() && stopped) {
    unhelloed_.push_back(std::move(channel));
    return okStatus();
  }
  if (!got.ok()) {
    // Closed before its hello: the process is most likely exiting; name it if it did.
    const auto give_up = Clock::now() + kReapGrace;
    for (;;) {
      const Status exited = exitedWorker("before its hello");
      if (!exited.ok()) return exited;
      if (Clock::now() >= give_up) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return got.withPrefix("tp: a worker's step channel failed before its hello");
  }
  if (command != StepCommand::kHello) return dataLoss("tp: a worker did not start with hello");
  WorkerHello hello;
  INGOT_RETURN_IF_ERROR(decodeHello(payload, &hello));
  const int world = worldSize();
  if (hello.rank < 1 || hello.rank >= world)
    return dataLoss("tp: hello from an unexpected rank " + std::to_string(hello.rank));
  const std::string rank = "tp rank " + std::to_string(hello.rank) + " (node " +
                           std::to_string(hello.rank / ranks_per_node_) + ")";
  // Checked before the worker's own status: a load that failed on a different model
  // (mismatched shapes) reads better as the wrong file than as its symptom.
  const uint64_t artifact_id = artifact.header().manifest_xxh64;
  if (hello.artifact_id != 0 && hello.artifact_id != artifact_id)
    return failedPrecondition(rank + " opened a different artifact: its identity (manifest "
                              "xxh64) is " + hex64(hello.artifact_id) + ", rank 0's (" +
                              artifact.source() + ") is " + hex64(artifact_id) +
                              "; every node must serve the same .ingot file");
  // Also from a rank already connected: its node's notice that its process exited.
  if (!hello.status.ok()) return hello.status.withPrefix(rank);
  if (workers_[hello.rank - 1].channel)
    return dataLoss("tp: a second hello from " + rank);
  workers_[hello.rank - 1].channel = std::move(channel);
  workers_[hello.rank - 1].hello = std::move(hello);
  return okStatus();
}

Status MultiProcessTpBackend::acceptHellos(const Artifact& artifact, Clock::time_point deadline,
                                           int stop_fd) {
  for (;;) {
    // A deadline of now: only connections already waiting (an error once there are none;
    // a listener that really failed fails the wait after the load too).
    StatusOr<std::unique_ptr<StepChannel>> channel = listener_->accept(Clock::now());
    if (!channel.ok()) return okStatus();
    INGOT_RETURN_IF_ERROR(readHello(artifact, std::move(channel).value(), deadline, stop_fd));
  }
}

Status MultiProcessTpBackend::loadWatchingWorkers(
    const Artifact& artifact, const std::function<Status(Communicator&)>& after_load) {
  // Watched: the step listener (index 0; a worker connects and says hello once its backend
  // is up, or failed) and a pidfd per worker of this node (readable once it exits). A
  // kernel without pidfds (before Linux 5.3) leaves exits to the hello wait after the load.
  OwnedFds pidfds;
  std::vector<int> fds = {listener_->fd()};
  for (int r = 1; r < worldSize(); ++r) {
    if (workers_[r - 1].pid <= 0) continue;  // a rank of another node
    const int fd = static_cast<int>(::syscall(SYS_pidfd_open, workers_[r - 1].pid, 0));
    if (fd < 0) continue;
    pidfds.fds.push_back(fd);
    fds.push_back(fd);
  }
  // Owned by the watch thread while it runs (it reads hellos, reaps workers); the caller's
  // thread only loads. Joined before either is read here.
  Status early;
  Status loaded;
  {
    ChannelWatch watch(fds, POLLIN, [&](size_t i, short) {
      if (!early.ok()) return false;
      // A worker that exits right after its hello (its load failed) has sent the hello
      // first: read it before looking at exits, so the error is the worker's own.
      Status st = acceptHellos(artifact, Clock::now() + timeout_, watch.stopFd());
      if (st.ok() && i > 0) st = exitedWorker("while the ranks loaded");
      if (st.ok()) return i == 0;  // a pidfd stays readable: watch it once
      early = st;
      rank0_->communicator().abort(st);  // returns at once (NCCL: aborts on its own thread)
      return false;
    });
    loaded = rank0_->load(artifact);
    if (loaded.ok() && after_load) loaded = after_load(rank0_->communicator());
  }
  if (!early.ok()) return early;  // the worker's error, not rank 0's aborted collective
  if (loaded.ok()) return okStatus();
  // A worker that failed on its own makes a collective of rank 0's load fail too (CUDA
  // ranks' KV-pool agreement): its hello, if already sent, or its exit says why.
  INGOT_RETURN_IF_ERROR(acceptHellos(artifact, Clock::now() + kReapGrace, -1));
  INGOT_RETURN_IF_ERROR(exitedWorker("while the ranks loaded"));
  const std::string device = rank0_->deviceName();
  return loaded.withPrefix("tp rank 0" + (device == "cpu" ? std::string() : " (" + device + ")"));
}

Status MultiProcessTpBackend::finishHellos(const Artifact& artifact) {
  const int world = worldSize();
  const auto deadline = Clock::now() + timeout_;
  // Hellos the watch began to read when rank 0's load ended.
  std::vector<std::unique_ptr<StepChannel>> partial = std::move(unhelloed_);
  unhelloed_.clear();
  for (std::unique_ptr<StepChannel>& channel : partial)
    INGOT_RETURN_IF_ERROR(readHello(artifact, std::move(channel), deadline, -1));
  auto connected = [&] {
    int n = 0;
    for (const Worker& w : workers_) n += w.channel ? 1 : 0;
    return n;
  };
  while (connected() < world - 1) {
    StatusOr<std::unique_ptr<StepChannel>> channel =
        listener_->accept(std::min(deadline, Clock::now() + kHelloPollSlice));
    if (channel.ok()) {
      INGOT_RETURN_IF_ERROR(readHello(artifact, std::move(channel).value(), deadline, -1));
      continue;
    }
    INGOT_RETURN_IF_ERROR(exitedWorker("while the ranks loaded"));
    if (Clock::now() >= deadline) {
      std::string missing;
      for (int r = 1; r < world; ++r)
        if (!workers_[r - 1].channel) missing += (missing.empty() ? "" : ", ") + who(r);
      return failedPrecondition("tp: no hello from " + missing + " within " +
                                std::to_string(timeout_.count()) + " ms (" +
                                channel.status().message() + ")");
    }
  }
  const Backend& mine = rank0_->backend();
  num_threads_ = mine.numThreads();
  matrix_bytes_ = mine.matrixBytes();
  for (int r = 1; r < world; ++r) {
    const WorkerHello& hello = workers_[r - 1].hello;
    if (hello.num_kv_blocks != mine.numKvBlocks() || hello.vocab_size != mine.vocabSize())
      return internalError("tp rank " + std::to_string(r) + " has " +
                           std::to_string(hello.num_kv_blocks) + " KV blocks and vocabulary " +
                           std::to_string(hello.vocab_size) + ", rank 0 " +
                           std::to_string(mine.numKvBlocks()) + " and " +
                           std::to_string(mine.vocabSize()));
    num_threads_ += hello.num_threads;
    matrix_bytes_ += hello.matrix_bytes;
  }
  return okStatus();
}

}  // namespace ingot
