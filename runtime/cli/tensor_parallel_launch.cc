// `--tp-mode` and the multi-node flags: checks, and the factory for ranks as processes.
#include "runtime/cli/tensor_parallel_launch.h"

#include <arpa/inet.h>

#include <cmath>
#include <cstdlib>

#include <iostream>
#include <sstream>

#include "runtime/backend/cpu/tp_cpu_backend.h"
#include "runtime/backend/tp/multi_process_tp_backend.h"
#include "runtime/backend/tp/rank_backend.h"
#include "runtime/backend/tp/worker_node.h"
#include "runtime/base/duration_text.h"
#include "runtime/engine/engine.h"

namespace ingot {

Status checkTensorParallelLaunch(const TensorParallelLaunch& launch, const std::string& device) {
  if (launch.mode != "threads" && launch.mode != "processes")
    return invalidArgument("--tp-mode must be threads or processes, got '" + launch.mode + "'");
  if (launch.nnodes < 1)
    return invalidArgument("--nnodes must be at least 1, got " + std::to_string(launch.nnodes));
  if (launch.node_rank < 0 || launch.node_rank >= launch.nnodes)
    return invalidArgument("--node-rank must be in [0, " + std::to_string(launch.nnodes) +
                           ") for --nnodes " + std::to_string(launch.nnodes) + ", got " +
                           std::to_string(launch.node_rank));
  if (launch.master_port < 0 || launch.master_port > 65535)
    return invalidArgument("--master-port must be in [0, 65535], got " +
                           std::to_string(launch.master_port));
  in_addr numeric{};
  if (!launch.master_addr.empty() && ::inet_pton(AF_INET, launch.master_addr.c_str(), &numeric) != 1)
    return invalidArgument("--master-addr must be a numeric IPv4 address of node 0 (e.g. "
                           "127.0.0.1, 10.0.0.1), got '" + launch.master_addr + "'");
  if (launch.nnodes > 1) {
    const std::string nodes = "--nnodes " + std::to_string(launch.nnodes);
    if (launch.mode != "processes")
      return invalidArgument(nodes + " needs --tp-mode processes (every node runs its ranks as "
                             "processes)");
    if (launch.master_addr.empty())
      return invalidArgument(
          (launch.node_rank > 0 ? "--node-rank " + std::to_string(launch.node_rank) : nodes) +
          " needs --master-addr: node 0's address, which every node reaches (node 0 serves the "
          "group's store and step channels there)");
    if (launch.master_addr == "0.0.0.0")
      return invalidArgument(nodes + ": --master-addr 0.0.0.0 is not an address the other nodes "
                             "can reach; give node 0's address on the cluster's network");
    if (launch.master_port == 0)
      return invalidArgument(nodes + " needs a fixed --master-port (the other nodes must know it; "
                             "e.g. 29500)");
  }
  if (launch.dist_timeout_s) {
    const double s = *launch.dist_timeout_s;
    if (!(s >= 0.1 && s <= 86400.0)) {
      std::ostringstream got;
      got << s;
      return invalidArgument("--dist-timeout must be in [0.1, 86400] seconds, got " + got.str());
    }
    if (launch.mode != "processes")
      return invalidArgument("--dist-timeout needs --tp-mode processes (thread ranks share one "
                             "process and have no peer to lose)");
  }
  const bool master_given = !launch.master_addr.empty() || launch.master_port != 0;
  if (master_given && launch.mode != "processes")
    return invalidArgument("--master-addr / --master-port need --tp-mode processes (the "
                           "default, threads, has no store)");
  if (launch.mode == "processes" && device != "cpu" && !cudaRanksBuilt())
    return unimplemented("--tp-mode processes with --device " + device +
                         ": CUDA ranks (one GPU per process on NCCL) need a build with the CUDA "
                         "backend and NCCL; this one runs CPU ranks only");
  return okStatus();
}

std::chrono::milliseconds distTimeout(const TensorParallelLaunch& launch) {
  if (!launch.dist_timeout_s) return kDefaultDistTimeout;
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(*launch.dist_timeout_s * 1000.0)));
}

std::string distTimeoutText(const TensorParallelLaunch& launch) {
  return durationText(distTimeout(launch));
}

BackendFactory processRanksFactory(const TensorParallelLaunch& launch, int first_gpu,
                                   double gpu_memory_utilization) {
  return [launch, first_gpu, gpu_memory_utilization](
             const Artifact& artifact,
             const BackendRequest& request) -> StatusOr<std::unique_ptr<Backend>> {
    if (artifact.source() == "<memory>")
      return invalidArgument("--tp-mode processes needs an artifact file for its workers");
    MultiProcessTpOptions o;
    o.artifact_path = artifact.source();
    o.cpu.num_threads = request.num_threads;
    o.cpu.num_kv_blocks = request.num_kv_blocks;
    // CUDA ranks size their pools from the GPUs' free memory (the same on every rank).
    if (o.cpu.num_kv_blocks <= 0 && artifact.manifest().config() && first_gpu < 0)
      o.cpu.num_kv_blocks = Engine::defaultKvBlocks(*artifact.manifest().config());
    o.first_gpu = first_gpu;
    o.gpu_memory_utilization = gpu_memory_utilization;
    o.max_model_len = request.max_model_len;
    o.cpu.kv_dtype = request.kv_dtype;
    if (!launch.master_addr.empty()) o.master_addr = launch.master_addr;
    o.master_port = static_cast<uint16_t>(launch.master_port);
    o.nnodes = launch.nnodes;
    o.timeout = distTimeout(launch);
    if (launch.nnodes > 1 && tensorParallelWorldSize(artifact) % launch.nnodes == 0) {
      const int local = tensorParallelWorldSize(artifact) / launch.nnodes;
      std::cerr << "ingot: node 0 of " << launch.nnodes << ": rank 0 (engine and server)"
                << (local == 2   ? std::string(" and rank 1")
                    : local > 2 ? " and ranks 1.." + std::to_string(local - 1)
                                : std::string())
                << " here; waiting up to " << distTimeoutText(launch)
                << " for the other nodes' ranks at " << o.master_addr
                << ":" << o.master_port << "\n";
    }
    StatusOr<std::unique_ptr<MultiProcessTpBackend>> b = MultiProcessTpBackend::create(artifact, o);
    if (!b.ok()) return b.status();
    if (first_gpu >= 0)
      std::cerr << "ingot: cuda: " << (*b)->worldSize() << " ranks on GPUs " << first_gpu << ".."
                << first_gpu + (*b)->worldSize() - 1 << " (NCCL); rank 0: "
                << (*b)->describeRank0() << "\n";
    return std::unique_ptr<Backend>(std::move(b).value());
  };
}

int runTpWorkerCommand(TpWorkerOptions options, const std::string& master, std::ostream& err) {
  const size_t colon = master.rfind(':');
  char* end = nullptr;
  const long port = colon == std::string::npos ? 0 : std::strtol(master.c_str() + colon + 1, &end, 10);
  if (colon == std::string::npos || !end || *end != '\0' || port <= 0 || port > 65535) {
    err << "ingot tp-worker: error: --master must be HOST:PORT, got '" << master << "'\n";
    return 2;
  }
  options.master_addr = master.substr(0, colon);
  options.master_port = static_cast<uint16_t>(port);
  Status s = runTpWorker(options);
  if (s.ok()) return 0;
  err << "ingot tp-worker: error: " << s.message() << "\n";
  return 1;
}

bool isWorkerNode(const TensorParallelLaunch& launch) {
  return launch.nnodes > 1 && launch.node_rank > 0;
}

int runWorkerNodeCommand(const std::string& command, const TensorParallelLaunch& launch,
                         const std::string& device, const std::string& artifact, int num_threads,
                         int tp, std::ostream& err) {
  auto fail = [&](const Status& s) {
    err << "ingot " << command << ": error: " << s.message() << "\n";
    return 1;
  };
  Status flags = checkTensorParallelLaunch(launch, device);
  if (!flags.ok()) return fail(flags);
  WorkerNodeOptions o;
  o.artifact = artifact;
  o.nnodes = launch.nnodes;
  o.node_rank = launch.node_rank;
  o.master_addr = launch.master_addr;
  o.master_port = static_cast<uint16_t>(launch.master_port);
  o.num_threads = num_threads;
  o.timeout = distTimeout(launch);
  if (device != "cpu") {
    const std::string prefix = "cuda:";
    long gpu = 0;
    if (device != "cuda") {
      char* end = nullptr;
      const char* number = device.c_str() + prefix.size();
      if (device.compare(0, prefix.size(), prefix) == 0 && *number != '\0')
        gpu = std::strtol(number, &end, 10);
      if (!end || *end != '\0' || gpu < 0)
        return fail(invalidArgument("--device: expected cpu, cuda or cuda:N, got '" + device +
                                    "'"));
    }
    o.first_gpu = static_cast<int32_t>(gpu);
  }
  StatusOr<Artifact> opened = Artifact::open(artifact);
  if (!opened.ok()) return fail(opened.status());
  o.world_size = tensorParallelWorldSize(*opened);
  if (o.world_size < 2)
    return fail(invalidArgument(artifact + " is not sharded (tensor-parallel world size " +
                                std::to_string(o.world_size) + "): --nnodes needs an artifact from "
                                "`ingot compile --tp N`, N >= 2"));
  if (tp > 0 && tp != o.world_size)
    return fail(invalidArgument("--tp " + std::to_string(tp) + ": " + artifact +
                                " was compiled for " + std::to_string(o.world_size) +
                                " tensor-parallel ranks"));
  StatusOr<int> code = runWorkerNode(o, err);
  if (!code.ok()) return fail(code.status());
  return *code;
}

}  // namespace ingot
