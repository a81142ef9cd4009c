// A tensor-parallel worker rank in its own process: `ingot tp-worker`, driven by rank 0.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "runtime/dist/communicator.h"

namespace ingot {

/// Everything a worker process needs to find its group and run its rank; rank 0 fills it
/// and passes it on the worker's command line (tpWorkerArguments()).
struct TpWorkerOptions {
  /// The sharded artifact (every rank maps the same file, only its own tensors).
  std::string artifact;
  int32_t rank = -1;
  int32_t world_size = 0;
  /// Rank 0's TcpStore (numeric IPv4; node 0's address); the step channel's port is in the
  /// store under "<group>/step_channel_port".
  std::string master_addr = "127.0.0.1";
  uint16_t master_port = 0;
  std::string group = "tp";
  /// This rank's compute threads (at least 1).
  int32_t num_threads = 1;
  /// KV pool blocks: the same on every rank (0 = the CPU backend's default).
  int64_t num_kv_blocks = 0;
  /// --kv-dtype: empty = the artifact's.
  std::string kv_dtype;
  /// Bound on every collective and on the join.
  std::chrono::milliseconds timeout{30000};
  /// ShmProcessGroupOptions::chunk_floats; the same on every rank.
  int64_t chunk_floats = int64_t{1} << 20;
  /// Hosts the group spans (RankOptions::nnodes): above 1, CPU ranks sum over TCP.
  int32_t nnodes = 1;
  /// -1: a CPU rank. >= 0: a CUDA rank on this GPU, collectives through NCCL (RankBackend).
  int32_t gpu = -1;
  /// CUDA ranks: the fraction of the GPU's memory the rank may fill, and the longest
  /// sequence (0 = the model's context).
  double gpu_memory_utilization = 0.9;
  int64_t max_model_len = 0;
  /// Tests (a worker forked in-process, not from the command line): wraps the rank's
  /// communicator for fault injection; the result must forward to `inner`.
  std::function<std::unique_ptr<Communicator>(Communicator* inner)> wrap_communicator;
  /// Whether the worker watches rank 0's channel during each command and aborts its group
  /// when it closes (rank 0 died). Unset: on for CUDA ranks (NCCL would keep this rank in a
  /// collective until the timeout), off for CPU ranks (the shared-memory group notices).
  std::optional<bool> watch_rank0;
};

/// The arguments after the executable that make `ingot tp-worker` run `options`.
std::vector<std::string> tpWorkerArguments(const TpWorkerOptions& options);

/// Runs worker rank `options.rank`: joins the process group, loads its shard of the
/// artifact, connects its step channel to rank 0 and says hello (with its backend's error,
/// if it has one), then executes rank 0's commands until rank 0 sends shutdown (ok) or
/// goes away (an error saying so). A step that fails after it started breaks the group
/// with the error prefixed "tp rank r", so the other ranks stop at their next collective.
Status runTpWorker(const TpWorkerOptions& options);

}  // namespace ingot
