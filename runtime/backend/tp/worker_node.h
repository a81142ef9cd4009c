// A worker node of a multi-host tensor-parallel group: its local ranks as processes, no engine.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "runtime/backend/tp/tp_worker.h"
#include "core/base/status.h"

namespace ingot {

/// What every worker of a group shares with rank 0 (KV blocks, KV dtype, timeout, chunk,
/// world and node counts, device kind and CUDA settings), as rank 0 publishes it in the
/// group's store under "<group>/worker_spec" so that worker nodes start their ranks exactly
/// as rank 0 starts its local ones. Per-host fields (artifact path, rank, threads, GPU,
/// master address) are not part of it. Text, one "key value" per line.
std::vector<uint8_t> encodeWorkerSpec(const TpWorkerOptions& options);
/// Fills the shared fields of `options` from a spec; errors name the missing or bad field.
Status decodeWorkerSpec(const std::vector<uint8_t>& spec, TpWorkerOptions* options);
/// The store key of the spec.
std::string workerSpecKey(const std::string& group);

struct WorkerNodeOptions {
  /// This host's path to the sharded artifact (the same file as node 0's).
  std::string artifact;
  /// The artifact's tensor-parallel world size (checked against rank 0's).
  int32_t world_size = 0;
  int32_t nnodes = 2;
  /// This node, in [1, nnodes): it runs ranks node_rank * L .. node_rank * L + L - 1,
  /// L = world_size / nnodes.
  int32_t node_rank = 1;
  /// Node 0's store (--master-addr / --master-port): numeric IPv4, a fixed port.
  std::string master_addr;
  uint16_t master_port = 0;
  std::string group = "tp";
  /// Compute threads of this host, shared out over its ranks (0 = all cores).
  int32_t num_threads = 0;
  /// CUDA ranks: the first of this host's GPUs (local rank i on first_gpu + i); -1: CPU.
  int32_t first_gpu = -1;
  /// How long to keep trying to reach node 0's store and read the spec (node 0 may start
  /// later than this node).
  std::chrono::milliseconds timeout{30000};
  /// The program each worker runs (`<exe> tp-worker ...`); default this binary.
  std::string worker_executable = "/proc/self/exe";
  /// Tests: starts a worker some other way; returns a child pid of this process.
  std::function<StatusOr<pid_t>(const TpWorkerOptions& options)> launch_worker;
};

/// Runs node `node_rank` of a multi-host group: reaches node 0's store (retrying until the
/// timeout), reads the worker spec, starts this node's ranks as `ingot tp-worker` processes
/// (they join the group and connect their step channels to rank 0 themselves), says on `log`
/// that this node runs no engine and no HTTP server, and waits for its ranks. Returns the
/// exit code for the command: 0 when every rank ended well (rank 0 shut the group down),
/// else the first failing rank's (its status, or 128 + signal); the other ranks of this
/// node are then stopped, since a broken group never recovers. Errors before any rank
/// started (bad options, node 0 unreachable, a spec that does not match) are a Status.
StatusOr<int> runWorkerNode(const WorkerNodeOptions& options, std::ostream& log);

}  // namespace ingot
