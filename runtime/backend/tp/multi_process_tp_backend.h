// MultiProcessTpBackend: rank 0 of a tensor-parallel group whose other ranks are processes.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/artifact/artifact_reader.h"
#include "runtime/backend/backend.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/tp/rank_backend.h"
#include "runtime/backend/tp/step_channel.h"
#include "runtime/backend/tp/tp_worker.h"

namespace ingot {

class ChannelWatcher;

class TcpStoreServer;
class TcpStoreClient;

struct MultiProcessTpOptions {
  /// Applied to every rank: num_threads is the total, shared out over the ranks as
  /// TpCpuBackend does (at least one each); num_kv_blocks and kv_dtype as given (0 blocks:
  /// the CPU backend's default, the same on every rank).
  CpuBackendOptions cpu;
  /// The artifact's file: every worker maps it itself.
  std::string artifact_path;
  /// Bound on every collective, on the start-up of the workers, and on each answer.
  std::chrono::milliseconds timeout{30000};
  /// Where rank 0 serves the group's TcpStore and step channel (numeric IPv4 on this host;
  /// port 0 = a free one).
  std::string master_addr = "127.0.0.1";
  uint16_t master_port = 0;
  /// Hosts the group spans (--nnodes; it must divide the world size): this node runs
  /// ranks 0..N/nnodes-1 and publishes the worker spec (worker_node.h) in the store; the
  /// other nodes start their ranks with runWorkerNode. Above 1, CPU ranks sum through a
  /// TcpProcessGroup, and master_addr must be an address of this host the others reach
  /// (the store, the step listener and rank 0's collectives listen on it).
  int32_t nnodes = 1;
  /// The program each worker runs: `<worker_executable> tp-worker ...` (tpWorkerArguments).
  /// Default: this process's own binary.
  std::string worker_executable = "/proc/self/exe";
  /// ShmProcessGroupOptions::chunk_floats.
  int64_t chunk_floats = int64_t{1} << 20;
  /// -1: CPU ranks (shared-memory collectives). >= 0: CUDA ranks, rank r on GPU
  /// first_gpu + r, collectives through NCCL bootstrapped over the group's store; every
  /// step runs eagerly on each GPU (docs/tensor-parallel.md, "CUDA ranks").
  int32_t first_gpu = -1;
  /// CUDA ranks: each rank's CudaBackendOptions::gpu_memory_utilization and max_model_len.
  /// Their KV pools take cpu.num_kv_blocks blocks, or (0) what the fullest GPU leaves.
  double gpu_memory_utilization = 0.9;
  int64_t max_model_len = 0;
  /// Tests: starts worker `options.rank` some other way (e.g. fork and call runTpWorker)
  /// and returns its pid, a child of this process. Unset: fork + exec of worker_executable,
  /// with the parent-death signal set so a worker never outlives rank 0.
  std::function<StatusOr<pid_t>(const TpWorkerOptions& options)> launch_worker;
  /// Tests: wraps rank 0's communicator (RankOptions::wrap_communicator), e.g. to make it
  /// behave as NCCL does when a peer fails: deaf to the peer until aborted.
  std::function<std::unique_ptr<Communicator>(Communicator* inner)> wrap_rank0_communicator;
  /// Whether rank 0 reads the workers' answers on a watch thread while it runs its own part
  /// of a call, aborting its communicator the moment a worker's step breaks the group or a
  /// worker's channel closes. Unset: on for CUDA ranks (NCCL does not pass one rank's abort
  /// to the others), off for CPU ranks (their shared-memory group does, and the thread costs
  /// ~0.1 ms per step on a busy CPU host).
  std::optional<bool> watch_workers;
  /// Tests: runs on rank 0 right after its backend loaded, while the workers are still
  /// watched (the window of CUDA ranks' KV-pool agreement, a collective); e.g. a collective
  /// that only an abort ends, as NCCL's when a peer failed. Its error fails the start.
  std::function<Status(Communicator& rank0)> after_rank0_load;
};

/// Runs an artifact sharded over N ranks (docs/tensor-parallel.md) as N processes on one
/// host or several (nnodes): this process is rank 0 (the engine, scheduler and server stay
/// here) and starts the other ranks of its node as worker processes. CPU ranks sum and
/// gather through a ShmProcessGroup on one host (a TcpProcessGroup across hosts), CUDA
/// ranks (one GPU each) through NCCL;
/// rank 0 sends each call (a step's inputs with its extra operands, KV block and slot
/// copies) over one step channel per worker, runs its own rank, then collects every
/// worker's ok or error. Results are the same bits as TpCpuBackend's.
///
/// Failures: a worker whose step fails after it started breaks the group with its error
/// ("tp rank r: ..."); a worker process that exits breaks it with "... rank r (pid p)
/// exited ..." within ~10 ms; one that hangs, after the timeout. The call then fails with
/// the group's first error, and every later call fails at once with the same error.
/// Inputs every rank rejects before running fail the call without breaking the group.
/// Start-up fails the same way: while rank 0 loads (CUDA ranks agree on their KV pool
/// there, a collective) the workers' hellos and processes are watched, and a worker whose
/// load failed, that opened another artifact, or that exited aborts rank 0's communicator
/// at once; create() then returns that worker's error, not a timeout.
/// The destructor tells the workers to stop and reaps them (killing any that linger).
class MultiProcessTpBackend final : public Backend {
 public:
  static StatusOr<std::unique_ptr<MultiProcessTpBackend>> create(
      const Artifact& artifact, const MultiProcessTpOptions& options);
  ~MultiProcessTpBackend() override;
  MultiProcessTpBackend(const MultiProcessTpBackend&) = delete;
  MultiProcessTpBackend& operator=(const MultiProcessTpBackend&) = delete;

  Status step(const StepInputs& inputs, std::vector<float>* logits) override;
  Status copyKvBlocks(int64_t src, int64_t dst) override;
  Status copyKvSlots(const std::vector<std::pair<int32_t, int32_t>>& moves) override;

  int64_t numKvBlocks() const override { return rank0_->backend().numKvBlocks(); }
  int64_t vocabSize() const override { return rank0_->backend().vocabSize(); }
  int32_t numExtraInputs() const override { return rank0_->backend().numExtraInputs(); }
  bool takesTreeInputs() const override { return rank0_->backend().takesTreeInputs(); }
  double attentionMacCost() const override { return rank0_->backend().attentionMacCost(); }
  /// Worker threads of all ranks together.
  int numThreads() const override { return num_threads_; }
  /// Weight-matrix bytes one decode token reads, summed over the ranks.
  uint64_t matrixBytes() const override { return matrix_bytes_; }
  KvDtype kvDtype() const override { return rank0_->backend().kvDtype(); }
  int worldSize() const override { return static_cast<int>(workers_.size()) + 1; }

  /// Rank 0's own backend (a CpuBackend, or a CudaBackend for CUDA ranks).
  const Backend& rank0() const { return rank0_->backend(); }
  /// CUDA ranks: rank 0's CudaBackend startup line; "" for CPU ranks.
  std::string describeRank0() const { return rank0_->describe(); }
  /// Worker rank r's process id (1 <= r < worldSize()); -1 for a rank on another node.
  pid_t workerPid(int r) const { return workers_[r - 1].pid; }
  /// The group's first error; ok while it is healthy.
  Status groupStatus() const;

 private:
  struct Worker {
    pid_t pid = -1;
    bool reaped = false;
    std::string ended;  // how it exited, once reaped
    std::unique_ptr<StepChannel> channel;  // set with its hello
    WorkerHello hello;
  };
  using Clock = StepChannel::Clock;

  MultiProcessTpBackend();
  Status start(const Artifact& artifact, const MultiProcessTpOptions& options);
  /// Rank 0's load (then `after_load`, a test hook, if set) under a ChannelWatch on the
  /// step listener and the workers' pidfds: hellos are read as they arrive, and a hello
  /// with an error or another artifact, or a worker's exit, aborts rank 0's communicator
  /// (ending a collective inside the load) and is the error returned (worker_hellos.cc).
  Status loadWatchingWorkers(const Artifact& artifact,
                             const std::function<Status(Communicator&)>& after_load);
  /// Reads the hellos still missing after the load, within the timeout, and checks every
  /// worker's backend against rank 0's.
  Status finishHellos(const Artifact& artifact);
  /// Accepts every worker connection waiting now and reads its hello (until `deadline`;
  /// a hello cut short by `stop_fd` is kept in unhelloed_ and finished later).
  Status acceptHellos(const Artifact& artifact, Clock::time_point deadline, int stop_fd);
  /// Reads and checks the hello on `channel`, then keeps the channel as its rank's.
  Status readHello(const Artifact& artifact, std::unique_ptr<StepChannel> channel,
                   Clock::time_point deadline, int stop_fd);
  /// The error for the first worker of this node found exited (`when`: "while the group
  /// formed"), or ok while all run.
  Status exitedWorker(const std::string& when);
  /// RankOptions::join_probe of rank 0: a worker of this node that exited, or a hello with
  /// an error already waiting on the step listener (another node's notice that one of its
  /// ranks exited: runWorkerNode), fails the join at once.
  Status joinProbe(const Artifact& artifact);
  /// Reaps worker r if it exited; returns how it ended ("exited with status 2", "killed by
  /// signal 9"), or "" while it runs.
  std::string reapIfExited(int r);
  /// "tp rank r (pid p)", or "tp rank r (node k)" for a rank on another node.
  std::string who(int r) const;
  /// The error for worker rank r's channel failing with `cause`.
  Status workerLost(int r, const Status& cause);
  /// Sends `command` to every worker, runs `own` on rank 0, and collects the answers.
  Status runEverywhere(StepCommand command, const std::vector<uint8_t>& payload,
                       const std::function<Status()>& own);
  /// Breaks the group with `error` and makes every later call fail with it.
  Status fail(const Status& error);

  std::chrono::milliseconds timeout_{30000};
  int ranks_per_node_ = 1;
  std::unique_ptr<TcpStoreServer> store_server_;
  std::unique_ptr<TcpStoreClient> store_;
  std::unique_ptr<StepChannelListener> listener_;
  std::unique_ptr<RankBackend> rank0_;  // its communicator is the group's (rank 0's end)
  std::vector<Worker> workers_;  // ranks 1..N-1
  std::vector<std::unique_ptr<StepChannel>> unhelloed_;  // accepted, hello not read in full
  int num_threads_ = 0;
  uint64_t matrix_bytes_ = 0;
  Status failure_;
  bool watch_workers_ = false;  // MultiProcessTpOptions::watch_workers, resolved
  std::unique_ptr<ChannelWatcher> watcher_;  // the steps' watch thread, when watch_workers_
};

}  // namespace ingot
