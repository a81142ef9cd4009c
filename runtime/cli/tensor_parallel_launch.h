// `--tp-mode threads|processes` and the multi-node flags: how a sharded artifact's ranks run.
#pragma once

#include <chrono>
#include <optional>
#include <ostream>
#include <string>

#include "runtime/backend/backend.h"
#include "runtime/backend/tp/tp_worker.h"
#include "core/base/status.h"

namespace ingot {

/// The launch flags of serve, run, chat, bench and eval ppl (docs/tensor-parallel.md).
struct TensorParallelLaunch {
  /// "threads": the ranks run on threads of this process (TpCpuBackend, the default);
  /// "processes": rank 0 here, ranks 1..N-1 as `ingot tp-worker` processes it starts.
  std::string mode = "threads";
  /// --nnodes / --node-rank: hosts taking part and this host's index. Every host runs the
  /// same command with its own --node-rank: node 0 runs rank 0 (the engine, the server) and
  /// its local workers, node k > 0 only its local workers (isWorkerNode()).
  int nnodes = 1;
  int node_rank = 0;
  /// --master-addr / --master-port: where rank 0 serves the group's store (numeric IPv4;
  /// default 127.0.0.1 and a free port). Processes mode only. Several hosts: node 0's
  /// address that every host reaches, and a fixed port.
  std::string master_addr;
  int master_port = 0;
  /// --dist-timeout: the longest, in seconds, any rank waits for the others (forming the
  /// group, loading, each collective and step). A rank seen to die fails the others at
  /// once; this bounds a rank that hangs or a host that vanishes. Processes mode only;
  /// unset: kDefaultDistTimeout.
  std::optional<double> dist_timeout_s;
};

inline constexpr std::chrono::milliseconds kDefaultDistTimeout{30000};

/// TensorParallelLaunch::dist_timeout_s as a duration (the default when unset).
std::chrono::milliseconds distTimeout(const TensorParallelLaunch& launch);
/// distTimeout() for messages: "30 s", or "250 ms" when not whole seconds.
std::string distTimeoutText(const TensorParallelLaunch& launch);

/// Checks `launch` against the device: mode threads or processes; nnodes >= 1 and
/// node_rank in [0, nnodes); the master flags only with processes; several hosts only with
/// processes, --master-addr (not 0.0.0.0) and a fixed --master-port; --dist-timeout in
/// [0.1, 86400] s and only with processes; processes on CUDA only
/// in a build with CUDA ranks (cudaRanksBuilt()). Whether nnodes divides the world size is
/// checked once the artifact is open.
Status checkTensorParallelLaunch(const TensorParallelLaunch& launch, const std::string& device);

/// Whether this host is a worker node of a multi-host group (nnodes > 1, node_rank > 0):
/// it runs runWorkerNodeCommand() instead of the command's engine and server.
bool isWorkerNode(const TensorParallelLaunch& launch);

/// A runtime command (serve, run, chat, bench, eval ppl) on a worker node: checks the
/// flags, opens `artifact` for its world size (`tp` > 0 must match it), and runs this
/// node's ranks (runWorkerNode) with `num_threads` threads in all and, for --device
/// cuda[:F], local rank i on GPU F + i. Returns the exit code; errors go to `err` as
/// "ingot <command>: error: ...".
int runWorkerNodeCommand(const std::string& command, const TensorParallelLaunch& launch,
                         const std::string& device,
                         const std::string& artifact, int num_threads, int tp, std::ostream& err);

/// The factory for mode processes: MultiProcessTpBackend over the artifact's file, its
/// workers this binary (`ingot tp-worker`). first_gpu < 0: CPU ranks, and a request without
/// a KV pool size gets the engine's default on every rank. first_gpu >= 0: CUDA ranks, rank
/// r on GPU first_gpu + r with gpu_memory_utilization each, pools sized from free memory
/// (the least any rank has room for); prints the ranks' startup line to stderr.
BackendFactory processRanksFactory(const TensorParallelLaunch& launch, int first_gpu = -1,
                                   double gpu_memory_utilization = 0.9);

/// `ingot tp-worker` (hidden; rank 0 starts it): `master` is "host:port". Returns the exit
/// code; errors go to `err` prefixed with the rank.
int runTpWorkerCommand(TpWorkerOptions options, const std::string& master, std::ostream& err);

}  // namespace ingot
