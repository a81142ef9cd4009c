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

std::string describeExit(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + (name ? std::string(" (") + name + ")" : "");
  }
  return "ended (wait status " + std::to_string(status) + ")";
}

/// fork + exec of `executable` with `args`; the child gets SIGKILL when this thread exits.
StatusOr<pid_t> forkExecWorker(const std::string& executable, const std::vector<std::string>& args) {
  std::string path = executable;
  char resolved[PATH_MAX];
  const ssize_t n = ::readlink(executable.c_str(), resolved, sizeof(resolved) - 1);
  if (n > 0) path.assign(resolved, static_cast<size_t>(n));
  // Everything the child touches is prepared before fork: after it, only async-signal-safe
  // calls (the parent has threads).
  std::vector<std::string> full = {path};
  full.insert(full.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : full) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string exec_failed = "ingot: tp worker: exec of " + path + " failed\n";
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return ioError(std::string("tp: fork of a worker failed: ") + std::strerror(errno));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);  // rank 0 is already gone
    ::execv(path.c_str(), argv.data());
    ssize_t ignored = ::write(2, exec_failed.data(), exec_failed.size());
    (void)ignored;
    ::_exit(127);
  }
  return pid;
}

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
  if (options.first_gpu >= 0) INGOT_RETURN_IF_ERROR(checkGpusForRanks(options.first_gpu, world));
  std::unique_ptr<MultiProcessTpBackend> b(new MultiProcessTpBackend());
  b->workers_.resize(world - 1);
  INGOT_RETURN_IF_ERROR(b->start(artifact, options));
  return b;
}

Status MultiProcessTpBackend::start(const Artifact& artifact, const MultiProcessTpOptions& o) {
  const int world = worldSize();
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
  auto threadsOf = [&](int r) { return std::max(1, threads / world + (r < threads % world ? 1 : 0)); };
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
  // A worker that exits before joining (a bad binary, a bad flag) fails the join at once.
  auto workerExited = [this]() -> Status {
    for (int r = 1; r < worldSize(); ++r) {
      const std::string ended = reapIfExited(r);
      if (!ended.empty())
        return failedPrecondition("tp rank " + std::to_string(r) + " (pid " +
                                  std::to_string(workers_[r - 1].pid) + ") " + ended +
                                  " while the group formed (its error is printed above)");
    }
    return okStatus();
  };
  g.join_probe = workerExited;
  INGOT_ASSIGN_OR_RETURN(rank0_, RankBackend::join(*store_, g));
  const Status loaded = rank0_->load(artifact);
  if (!loaded.ok()) {
    // CUDA ranks: a worker that failed on its own makes rank 0's KV-pool agreement fail
    // too; its hello, if it arrives in time, says why.
    const Status theirs = workerExited();
    if (!theirs.ok()) return theirs;
    return loaded.withPrefix("tp rank 0" + (o.first_gpu >= 0 ? " (" + rank0_->deviceName() + ")"
                                                              : std::string()));
  }
  const Backend& mine = rank0_->backend();
  num_threads_ = mine.numThreads();
  matrix_bytes_ = mine.matrixBytes();

  // Each worker connects its channel and says hello once its shard is loaded.
  const auto deadline = Clock::now() + timeout_;
  for (int connected = 0; connected < world - 1;) {
    StatusOr<std::unique_ptr<StepChannel>> channel =
        listener_->accept(std::min(deadline, Clock::now() + kPollSlice));
    if (!channel.ok()) {
      INGOT_RETURN_IF_ERROR(workerExited());
      if (Clock::now() >= deadline)
        return channel.status().withPrefix("tp: waiting " + std::to_string(timeout_.count()) +
                                           " ms for the workers' step channels");
      continue;
    }
    StepCommand command{};
    std::vector<uint8_t> payload;
    WorkerHello hello;
    INGOT_RETURN_IF_ERROR((*channel)->receive(&command, &payload, deadline));
    if (command != StepCommand::kHello) return dataLoss("tp: a worker did not start with hello");
    INGOT_RETURN_IF_ERROR(decodeHello(payload, &hello));
    if (hello.rank < 1 || hello.rank >= world || workers_[hello.rank - 1].channel)
      return dataLoss("tp: hello from an unexpected rank " + std::to_string(hello.rank));
    if (!hello.status.ok()) return hello.status.withPrefix("tp rank " + std::to_string(hello.rank));
    if (hello.num_kv_blocks != mine.numKvBlocks() || hello.vocab_size != mine.vocabSize())
      return internalError("tp rank " + std::to_string(hello.rank) + " has " +
                           std::to_string(hello.num_kv_blocks) + " KV blocks and vocabulary " +
                           std::to_string(hello.vocab_size) + ", rank 0 " +
                           std::to_string(mine.numKvBlocks()) + " and " +
                           std::to_string(mine.vocabSize()));
    num_threads_ += hello.num_threads;
    matrix_bytes_ += hello.matrix_bytes;
    workers_[hello.rank - 1].channel = std::move(channel).value();
    ++connected;
  }
  return okStatus();
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
  // so the error can say how it ended.
  std::string ended = reapIfExited(r);
  for (int i = 0; ended.empty() && i < 50; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ended = reapIfExited(r);
  }
  const std::string who =
      "tp rank " + std::to_string(r) + " (pid " + std::to_string(workers_[r - 1].pid) + ")";
  if (!ended.empty()) return failedPrecondition(who + " " + ended + ": " + cause.message());
  return cause.withPrefix(who);
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
  const Status mine = own();

  // Every worker answers right after its last collective, which rank 0 has passed too.
  std::vector<Status> answers(workers);
  std::vector<bool> answered(workers, false);
  int pending = workers;
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
      const int r = ranks[i];
      StepCommand got{};
      std::vector<uint8_t> reply;
      Status received = workers_[r - 1].channel->receive(&got, &reply, Clock::now() + timeout_);
      if (received.ok() && got != StepCommand::kResult)
        received = dataLoss("unexpected frame from the worker");
      if (received.ok()) received = decodeStatus(reply, &answers[r - 1]);
      if (!received.ok()) {
        const Status lost = workerLost(r, received);
        if (!rank0_->communicator().groupStatus().ok()) {
          answers[r - 1] = lost;  // the group's first error is what the call reports
        } else {
          return fail(lost);
        }
      }
      answered[r - 1] = true;
      --pending;
    }
    if (pending == 0) break;
    if (!broken && !rank0_->communicator().groupStatus().ok()) {
      broken = true;
      deadline = std::min(deadline, Clock::now() + kBrokenGrace);
    }
    if (Clock::now() >= deadline) {
      if (broken) break;
      const int r = ranks.front();
      return fail(failedPrecondition(
          "tp rank " + std::to_string(r) + " (pid " + std::to_string(workers_[r - 1].pid) +
          ") did not answer within " + std::to_string(timeout_.count()) + " ms"));
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
