// MultiProcessTpBackend: start the worker processes, broadcast each call, collect the answers.
#include "runtime/backend/tp/multi_process_tp_backend.h"

#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "runtime/backend/cpu/tp_cpu_backend.h"
#include "runtime/backend/tp/channel_watch.h"
#include "runtime/backend/tp/worker_node.h"
#include "runtime/backend/tp/worker_process.h"
#include "runtime/dist/tcp_store.h"

namespace ingot {
namespace {

using Clock = StepChannel::Clock;

/// After the group breaks, how long a call still waits for the workers' answers (each
/// fails at its next collective at once, unless it is the one that stopped answering).
constexpr std::chrono::milliseconds kBrokenGrace{200};
/// How often a waiting call looks at the group and the worker processes.
constexpr std::chrono::milliseconds kPollSlice{20};
/// How long the destructor lets the workers exit after shutdown before killing them.
constexpr std::chrono::milliseconds kShutdownGrace{2000};

}  // namespace

MultiProcessTpBackend::MultiProcessTpBackend() = default;

StatusOr<std::unique_ptr<MultiProcessTpBackend>> MultiProcessTpBackend::create(
    const Artifact& artifact, const MultiProcessTpOptions& options) {
  const int world = tensorParallelWorldSize(artifact);
  if (world < 2)
    return invalidArgument(artifact.source() + " is not sharded (tensor-parallel world size " +
                           std::to_string(world) +
                           "): ranks as processes need an artifact from `ingot compile --tp N`, "
                           "N >= 2");
  if (options.artifact_path.empty())
    return invalidArgument("tp processes: the workers need the artifact's file path");
  if (options.timeout.count() <= 0)
    return invalidArgument("tp processes: the timeout must be positive");
  if (options.nnodes < 1 || world % options.nnodes != 0)
    return invalidArgument("--nnodes " + std::to_string(options.nnodes) + " does not divide the " +
                           std::to_string(world) + " tensor-parallel ranks of " +
                           artifact.source() + " (every node runs the same number of ranks)");
  if (options.first_gpu >= 0)
    INGOT_RETURN_IF_ERROR(checkGpusForRanks(options.first_gpu, world / options.nnodes));
  std::unique_ptr<MultiProcessTpBackend> b(new MultiProcessTpBackend());
  b->workers_.resize(world - 1);
  INGOT_RETURN_IF_ERROR(b->start(artifact, options));
  return b;
}

Status MultiProcessTpBackend::start(const Artifact& artifact, const MultiProcessTpOptions& o) {
  const int world = worldSize();
  const int local = world / o.nnodes;  // ranks 0..local-1 run on this node
  ranks_per_node_ = local;
  timeout_ = o.timeout;
  INGOT_ASSIGN_OR_RETURN(store_server_, TcpStoreServer::start(o.master_addr, o.master_port));
  INGOT_ASSIGN_OR_RETURN(store_,
                         TcpStoreClient::connect(o.master_addr, store_server_->port(), timeout_));
  INGOT_ASSIGN_OR_RETURN(listener_, StepChannelListener::listen(o.master_addr));
  const std::string port = std::to_string(listener_->port());
  const std::string group_name = "tp";
  INGOT_RETURN_IF_ERROR(store_->set(group_name + "/step_channel_port",
                                    std::vector<uint8_t>(port.begin(), port.end()), timeout_));

  int threads = o.cpu.num_threads;
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto threadsOf = [&](int r) { return std::max(1, threads / local + (r < threads % local ? 1 : 0)); };
  for (int r = 1; r < world; ++r) {
    TpWorkerOptions w;
    w.artifact = o.artifact_path;
    w.rank = r;
    w.world_size = world;
    w.master_addr = o.master_addr;
    w.master_port = store_server_->port();
    w.group = group_name;
    w.num_threads = threadsOf(r);
    w.num_kv_blocks = o.cpu.num_kv_blocks;
    w.kv_dtype = o.cpu.kv_dtype ? kvDtypeName(*o.cpu.kv_dtype) : "";
    w.timeout = timeout_;
    w.chunk_floats = o.chunk_floats;
    w.gpu = o.first_gpu < 0 ? -1 : o.first_gpu + r;
    w.gpu_memory_utilization = o.gpu_memory_utilization;
    w.max_model_len = o.max_model_len;
    w.nnodes = o.nnodes;
    // Other nodes start their ranks themselves (runWorkerNode) from this spec.
    if (r == 1 && o.nnodes > 1)
      INGOT_RETURN_IF_ERROR(store_->set(workerSpecKey(group_name), encodeWorkerSpec(w), timeout_));
    if (r >= local) continue;
    StatusOr<pid_t> pid = o.launch_worker
                              ? o.launch_worker(w)
                              : forkExecWorker(o.worker_executable, tpWorkerArguments(w));
    if (!pid.ok()) return pid.status().withPrefix("tp rank " + std::to_string(r));
    workers_[r - 1].pid = *pid;
  }

  RankOptions g;
  g.rank = 0;
  g.world_size = world;
  g.group = group_name;
  g.timeout = timeout_;
  g.chunk_floats = o.chunk_floats;
  g.gpu = o.first_gpu;
  g.cpu = o.cpu;
  g.cpu.num_threads = threadsOf(0);
  g.gpu_memory_utilization = o.gpu_memory_utilization;
  g.max_model_len = o.max_model_len;
  g.nnodes = o.nnodes;
  g.wrap_communicator = o.wrap_rank0_communicator;
  watch_workers_ = o.watch_workers.value_or(o.first_gpu >= 0);
  if (watch_workers_) watcher_ = std::make_unique<ChannelWatcher>();
  // A worker that exits before joining (a bad binary, a bad flag, a crash on another
  // node) fails the join at once.
  g.join_probe = [this, &artifact] { return joinProbe(artifact); };
  INGOT_ASSIGN_OR_RETURN(rank0_, RankBackend::join(*store_, g));
  const Status loaded = loadWatchingWorkers(artifact, o.after_rank0_load);
  if (!loaded.ok()) return loaded;
  // Each worker connects its channel and says hello once its shard is loaded.
  return finishHellos(artifact);
}

MultiProcessTpBackend::~MultiProcessTpBackend() {
  const auto deadline = Clock::now() + std::chrono::milliseconds(500);
  for (Worker& w : workers_)
    if (w.channel) (void)w.channel->send(StepCommand::kShutdown, {}, deadline);
  const auto give_up = Clock::now() + kShutdownGrace;
  for (int r = 1; r < worldSize(); ++r) {
    Worker& w = workers_[r - 1];
    if (w.pid <= 0) continue;
    // A worker that never got a channel is still starting: it has nothing to finish.
    while (w.channel && reapIfExited(r).empty() && Clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (!w.reaped) {
      ::kill(w.pid, SIGKILL);
      int status = 0;
      ::waitpid(w.pid, &status, 0);
      w.reaped = true;
    }
    w.channel.reset();
  }
}

std::string MultiProcessTpBackend::reapIfExited(int r) {
  Worker& w = workers_[r - 1];
  if (w.reaped || w.pid <= 0) return w.ended;
  int status = 0;
  if (::waitpid(w.pid, &status, WNOHANG) != w.pid) return "";
  w.reaped = true;
  w.ended = describeExit(status);
  return w.ended;
}

Status MultiProcessTpBackend::workerLost(int r, const Status& cause) {
  // A closed channel usually means the process is exiting: give it a moment to be reaped,
  // so the error can say how it ended (a rank of another node is not this process's child).
  std::string ended = reapIfExited(r);
  for (int i = 0; ended.empty() && workers_[r - 1].pid > 0 && i < 50; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ended = reapIfExited(r);
  }
  if (!ended.empty()) return failedPrecondition(who(r) + " " + ended + ": " + cause.message());
  return cause.withPrefix(who(r));
}

std::string MultiProcessTpBackend::who(int r) const {
  const std::string rank = "tp rank " + std::to_string(r);
  if (workers_[r - 1].pid > 0) return rank + " (pid " + std::to_string(workers_[r - 1].pid) + ")";
  return rank + " (node " + std::to_string(r / ranks_per_node_) + ")";
}

Status MultiProcessTpBackend::groupStatus() const {
  return rank0_->communicator().groupStatus();
}

Status MultiProcessTpBackend::fail(const Status& error) {
  rank0_->communicator().abort(error);  // no-op when broken already: the first error stays
  failure_ = rank0_->communicator().groupStatus();
  return failure_;
}

Status MultiProcessTpBackend::runEverywhere(StepCommand command,
                                            const std::vector<uint8_t>& payload,
                                            const std::function<Status()>& own) {
  if (!failure_.ok()) return failure_;
  const int workers = worldSize() - 1;
  auto deadline = Clock::now() + timeout_;
  for (int r = 1; r <= workers; ++r) {
    Status sent = workers_[r - 1].channel->send(command, payload, deadline);
    if (!sent.ok()) return fail(workerLost(r, sent));
  }
  // Every worker answers right after its last collective, which rank 0 has passed too.
  std::vector<Status> answers(workers);
  std::vector<bool> answered(workers, false);
  int pending = workers;
  // Reads worker r's answer. A channel that fails, or an answer saying the worker's step
  // broke the group, aborts rank 0's communicator: with NCCL nothing else would end rank 0's
  // collectives before their timeout. Returns the error to fail the call with at once (a
  // worker lost while the group was healthy), else ok.
  // On the watch thread `stop_fd` is the watch's stop pipe: once rank 0's own part is done
  // the read gives way (keeping a partly read frame) and the loop below finishes it.
  auto collect = [&](int r, int stop_fd) -> Status {
    StepCommand got{};
    std::vector<uint8_t> reply;
    bool stopped = false;
    Status received = workers_[r - 1].channel->receiveUnlessStopped(
        &got, &reply, Clock::now() + timeout_, stop_fd, &stopped);
    if (received.ok() && stopped) return okStatus();  // not answered yet
    if (received.ok() && got != StepCommand::kResult && got != StepCommand::kGroupBroken)
      received = dataLoss("unexpected frame from the worker");
    if (received.ok()) received = decodeStatus(reply, &answers[r - 1]);
    answered[r - 1] = true;
    --pending;
    if (!received.ok()) {
      const Status lost = workerLost(r, received);
      const bool healthy = rank0_->communicator().groupStatus().ok();
      answers[r - 1] = lost;  // when broken already, the group's first error is reported
      rank0_->communicator().abort(lost);
      return healthy ? lost : okStatus();
    }
    if (got == StepCommand::kGroupBroken)
      rank0_->communicator().abort(answers[r - 1].ok()
                                       ? internalError(who(r) + " broke the group")
                                       : answers[r - 1]);
    return okStatus();
  };
  // While rank 0 runs its own part, the answers are read as they arrive (ChannelWatch), so a
  // worker that fails or dies mid-step ends rank 0's collectives within milliseconds.
  Status mine, lostEarly;
  if (watch_workers_) {
    std::vector<int> channels;
    for (int r = 1; r <= workers; ++r) channels.push_back(workers_[r - 1].channel->fd());
    // `ready` runs on the kept watcher's thread, only while `watch` lives.
    ChannelWatch watch(*watcher_, channels, POLLIN, [&](size_t i, short) {
      const Status lost = collect(static_cast<int>(i) + 1, watch.stopFd());
      if (!lost.ok() && lostEarly.ok()) lostEarly = lost;
      return false;  // one answer per worker and call
    });
    mine = own();
  } else {
    mine = own();
  }
  if (!lostEarly.ok()) return fail(lostEarly);
  bool broken = false;
  deadline = Clock::now() + timeout_;
  std::vector<pollfd> fds;
  std::vector<int> ranks;
  while (pending > 0) {
    fds.clear();
    ranks.clear();
    for (int r = 1; r <= workers; ++r)
      if (!answered[r - 1]) {
        fds.push_back({workers_[r - 1].channel->fd(), POLLIN, 0});
        ranks.push_back(r);
      }
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    const int wait_ms = static_cast<int>(std::max<int64_t>(0, std::min(left, kPollSlice).count()));
    ::poll(fds.data(), fds.size(), wait_ms);
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const Status lost = collect(ranks[i], -1);
      if (!lost.ok()) return fail(lost);
    }
    if (pending == 0) break;
    if (!broken && !rank0_->communicator().groupStatus().ok()) {
      broken = true;
      deadline = std::min(deadline, Clock::now() + kBrokenGrace);
    }
    if (Clock::now() >= deadline) {
      if (broken) break;
      const int r = ranks.front();
      return fail(failedPrecondition(who(r) + " did not answer within " +
                                     std::to_string(timeout_.count()) + " ms"));
    }
  }
  const Status group = rank0_->communicator().groupStatus();
  if (!group.ok()) return fail(group);
  for (const Status& a : answers)
    if (!a.ok()) return a;  // an input every rank rejected before running
  return mine;
}

Status MultiProcessTpBackend::step(const StepInputs& inputs, std::vector<float>* logits) {
  return runEverywhere(StepCommand::kStep, encodeStep(inputs), [&]() -> Status {
    Status st = rank0_->backend().step(inputs, logits);
    if (!st.ok() && rank0_->stepStarted())
      rank0_->communicator().abort(st.withPrefix("tp rank 0"));
    return st;
  });
}

Status MultiProcessTpBackend::copyKvBlocks(int64_t src, int64_t dst) {
  return runEverywhere(StepCommand::kCopyKvBlocks, encodeKvBlockCopy(src, dst),
                       [&] { return rank0_->backend().copyKvBlocks(src, dst); });
}

Status MultiProcessTpBackend::copyKvSlots(const std::vector<std::pair<int32_t, int32_t>>& moves) {
  return runEverywhere(StepCommand::kCopyKvSlots, encodeKvSlotMoves(moves),
                       [&] { return rank0_->backend().copyKvSlots(moves); });
}

}  // namespace ingot
