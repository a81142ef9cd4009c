// RankBackend: one rank of a process group — its communicator and its backend, CPU or CUDA.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/artifact/artifact_reader.h"
#include "runtime/backend/backend.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "core/base/status.h"
#include "runtime/dist/communicator.h"

namespace ingot {

class TcpStoreClient;

/// What one rank of a process group runs on. Every rank of a group runs on the same kind.
struct RankOptions {
  int32_t rank = 0;
  int32_t world_size = 1;
  /// Store key prefix of the group (and of its NCCL unique id).
  std::string group = "tp";
  /// Bound on the join and on every collective.
  std::chrono::milliseconds timeout{30000};
  /// -1: a CPU rank, collectives through a ShmProcessGroup (TcpProcessGroup across hosts,
  /// see nnodes). >= 0: a CUDA rank on this GPU
  /// (one per rank: NCCL refuses two ranks of a group on one device), collectives through an
  /// NcclCommunicator.
  int32_t gpu = -1;
  /// CPU ranks: threads, KV blocks, KV dtype (tp_rank and communicator are set here).
  /// CUDA ranks use num_kv_blocks (0: what the smallest GPU of the group has room for).
  CpuBackendOptions cpu;
  /// ShmProcessGroupOptions::chunk_floats (CPU ranks; the same on every rank).
  int64_t chunk_floats = int64_t{1} << 20;
  /// Hosts the group spans (world_size / nnodes ranks each, in rank order). CPU ranks sum
  /// through a ShmProcessGroup on one host and a TcpProcessGroup across hosts.
  int32_t nnodes = 1;
  /// CUDA ranks: CudaBackendOptions::gpu_memory_utilization and max_model_len.
  double gpu_memory_utilization = 0.9;
  int64_t max_model_len = 0;
  /// Called while rank 0 waits for the others to join: the CPU groups' join and the NCCL
  /// init (ShmProcessGroupOptions, TcpProcessGroupOptions, NcclGroupOptions).
  std::function<Status()> join_probe;
  /// Tests: wraps the rank's communicator for fault injection; must forward to `inner`.
  std::function<std::unique_ptr<Communicator>(Communicator* inner)> wrap_communicator;
};

/// One rank of a tensor-parallel process group, in two phases because joining is a
/// collective of the whole group while loading may fail on one rank alone (a worker then
/// still reports its error to rank 0 through the step channel): join() forms the group,
/// load() creates this rank's backend on its shard of the artifact.
class RankBackend {
 public:
  /// Joins the group through `store`; every rank of the group calls this at once.
  static StatusOr<std::unique_ptr<RankBackend>> join(TcpStoreClient& store,
                                                     const RankOptions& options);
  ~RankBackend();
  RankBackend(const RankBackend&) = delete;
  RankBackend& operator=(const RankBackend&) = delete;

  /// Creates the backend of this rank (the artifact must outlive it). CUDA ranks agree on
  /// their KV pool size here, a collective: every rank loads at once.
  Status load(const Artifact& artifact);

  /// The group (wrapped, in tests); valid after join().
  Communicator& communicator() { return *communicator_; }
  /// The rank's backend; valid after a successful load().
  Backend& backend() { return *backend_; }
  const Backend& backend() const { return *backend_; }
  /// Whether the last step got past its input checks (then a failure must break the group).
  bool stepStarted() const;
  /// "cpu" or "cuda:N", for messages.
  std::string deviceName() const;
  /// CUDA ranks: the backend's startup line; "" for CPU ranks.
  std::string describe() const;

 private:
  struct Cuda;  // the driver, the NcclCommunicator and the CudaBackend (CUDA builds)
  RankBackend();

  RankOptions options_;
  std::unique_ptr<Communicator> group_;    // Shm- or TcpProcessGroup; null for CUDA ranks
  std::unique_ptr<Cuda> cuda_;
  std::unique_ptr<Communicator> wrapped_;
  Communicator* communicator_ = nullptr;
  std::unique_ptr<Backend> backend_;
  const CpuBackend* cpu_backend_ = nullptr;  // backend_ for CPU ranks
};

/// Whether this build can run CUDA ranks (the CUDA backend and NCCL were found).
bool cudaRanksBuilt();

/// Checks that GPUs first_gpu .. first_gpu + world_size - 1 exist: ok, or an error naming
/// the ranks, the GPUs they need and the GPUs present (or why there is no GPU at all).
Status checkGpusForRanks(int32_t first_gpu, int32_t world_size);

}  // namespace ingot
