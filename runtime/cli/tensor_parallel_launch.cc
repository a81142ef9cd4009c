// `--tp-mode` and the multi-node flags: checks, and the factory for ranks as processes.
#include "runtime/cli/tensor_parallel_launch.h"

#include <arpa/inet.h>

#include <cstdlib>

#include <iostream>

#include "runtime/backend/tp/multi_process_tp_backend.h"
#include "runtime/backend/tp/rank_backend.h"
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
  if (launch.nnodes > 1)
    return unimplemented("--nnodes " + std::to_string(launch.nnodes) +
                         ": tensor parallelism over several hosts is not built yet; CPU ranks "
                         "share memory on one host and CUDA ranks use the GPUs of one host "
                         "(docs/tensor-parallel.md)");
  in_addr numeric{};
  if (!launch.master_addr.empty() && ::inet_pton(AF_INET, launch.master_addr.c_str(), &numeric) != 1)
    return invalidArgument("--master-addr must be a numeric IPv4 address of this host (e.g. "
                           "127.0.0.1), got '" + launch.master_addr + "'");
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

}  // namespace ingot
