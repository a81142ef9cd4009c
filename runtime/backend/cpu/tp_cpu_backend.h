// TpCpuBackend: a tensor-parallel artifact's N ranks as N CpuBackends on N threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "core/artifact/artifact_reader.h"
#include "runtime/backend/backend.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/dist/shared_memory_group.h"

namespace ingot {

/// The tensor-parallel world size of an artifact (TensorParallelDef.world_size; 1 when
/// unsharded).
int32_t tensorParallelWorldSize(const Artifact& artifact);

struct TpCpuBackendOptions {
  /// Applied to every rank, except: num_threads is the total, shared out over the ranks
  /// (at least one each); tp_rank and communicator are set per rank.
  CpuBackendOptions cpu;
  /// Bound on every wait inside a collective (SharedMemoryGroup).
  std::chrono::milliseconds collective_timeout = SharedMemoryGroup::kDefaultTimeout;
  /// Tests: wraps rank r's communicator (fault injection: a rank that stalls or leaves).
  /// Returns the communicator rank r uses; it must forward to `inner`.
  std::function<std::unique_ptr<Communicator>(int rank, Communicator* inner)> wrap_communicator;
};

/// Runs an artifact sharded over N ranks (docs/tensor-parallel.md) in one process: rank r
/// is a CpuBackend running its own program on its own thread with its share of the worker
/// threads, and the ranks sum and gather through a SharedMemoryGroup. Every call is
/// lock-step: step() hands the same inputs to every rank (the in-process equivalent of
/// broadcasting the step's plan) and returns rank 0's logits.
///
/// Failures: a rank that fails on its own breaks the group with its error (prefixed with
/// its rank), so the others fail at their next collective at once; a rank that stops
/// answering fails the others after the collective timeout. Either way step() returns the
/// group's first error without waiting for a rank that never returns, and from then on
/// every call fails at once with it. Inputs the ranks reject before running (alike on
/// every rank) fail the step without breaking the group.
class TpCpuBackend final : public Backend {
 public:
  /// `artifact` (which must outlive the backend) must be sharded over N >= 1 ranks.
  static StatusOr<std::unique_ptr<TpCpuBackend>> create(const Artifact& artifact,
                                                        const TpCpuBackendOptions& options);
  /// Stops the rank threads (waits for each to finish what it is running).
  ~TpCpuBackend() override;
  TpCpuBackend(const TpCpuBackend&) = delete;
  TpCpuBackend& operator=(const TpCpuBackend&) = delete;

  Status step(const StepInputs& inputs, std::vector<float>* logits) override;
  Status copyKvBlocks(int64_t src, int64_t dst) override;
  Status copyKvSlots(const std::vector<std::pair<int32_t, int32_t>>& moves) override;

  int64_t numKvBlocks() const override { return ranks_[0]->numKvBlocks(); }
  int64_t vocabSize() const override { return ranks_[0]->vocabSize(); }
  int32_t numExtraInputs() const override { return ranks_[0]->numExtraInputs(); }
  bool takesTreeInputs() const override { return ranks_[0]->takesTreeInputs(); }
  double attentionMacCost() const override { return ranks_[0]->attentionMacCost(); }
  /// Worker threads of all ranks together.
  int numThreads() const override;
  /// Weight-matrix bytes one decode token reads, summed over the ranks.
  uint64_t matrixBytes() const override;

  KvDtype kvDtype() const override { return ranks_[0]->kvDtype(); }
  int worldSize() const override { return static_cast<int>(ranks_.size()); }
  const CpuBackend& rank(int r) const { return *ranks_[r]; }
  /// The group's first error; ok while it is healthy.
  Status groupStatus() const { return group_->status(); }
  /// Each rank's result of the last step, or nullopt for a rank still running it (one
  /// that stopped answering).
  std::vector<std::optional<Status>> lastRankResults();

 private:
  TpCpuBackend() = default;
  void rankLoop(int rank);
  /// Runs job(rank) on every rank thread; returns when all finished, or when the group
  /// broke (then without waiting for ranks that do not come back).
  Status runOnRanks(std::function<Status(int)> job);
  /// A deep copy of `given` (extra operands included) that the ranks read, so a rank
  /// still running after a failed step never reads the caller's freed memory.
  void copyInputs(const StepInputs& given);

  std::unique_ptr<SharedMemoryGroup> group_;
  std::vector<std::unique_ptr<Communicator>> wrapped_;  // test hooks, if any
  std::vector<std::unique_ptr<CpuBackend>> ranks_;
  std::vector<std::vector<float>> logits_;  // per rank

  StepInputs inputs_;
  std::vector<std::vector<int64_t>> extra_shapes_;
  std::vector<std::vector<uint8_t>> extra_data_;

  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  /// The job in progress (kept here: a rank may still run it after a failed step
  /// returned); it may capture `this` only.
  std::function<Status(int)> job_;                   // guarded by mu_
  uint64_t job_seq_ = 0;                             // guarded by mu_
  std::vector<uint64_t> done_seq_;                   // guarded by mu_
  std::vector<Status> results_;                      // guarded by mu_
  bool stop_ = false;                                // guarded by mu_
  /// Set once a step failed with the group broken: every later call returns it.
  Status failure_;
};

/// The CPU backend for `artifact`: a CpuBackend, or a TpCpuBackend when the artifact is
/// sharded over more than one rank (num_threads is then the total).
StatusOr<std::unique_ptr<Backend>> createCpuServingBackend(const Artifact& artifact,
                                                           const CpuBackendOptions& options);

}  // namespace ingot
