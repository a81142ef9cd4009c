// `--device cpu|cuda` and `--gpu-memory-utilization` on run, chat and serve: which backend
// the engine runs on.
#pragma once

#include <string>

#include "runtime/backend/backend.h"
#include "core/base/status.h"
#include "runtime/cli/tensor_parallel_launch.h"

namespace ingot {

struct DeviceFlags {
  /// "cpu" (the default) or "cuda" (GPU 0; "cuda:N" for GPU N).
  std::string device = "cpu";
  /// CUDA: the fraction of GPU memory this process may fill (weights, buffers, KV pool).
  double gpu_memory_utilization = 0.9;
  /// --tp-mode, --nnodes, --node-rank, --master-addr, --master-port.
  TensorParallelLaunch tp_launch;
};

/// The backend factory for `flags`: empty for the CPU (the engine's default), the CUDA
/// backend for cuda[:N], which prints its startup line (GPU, weights, KV blocks, kernels)
/// to stderr when created. A build without the CUDA backend, an unknown device or a
/// utilization outside (0, 1] is an error naming the flag. With --tp-mode processes (after
/// checkTensorParallelLaunch()): rank 0 of ranks as processes (processRanksFactory()), CPU
/// ranks, or CUDA ranks from GPU N on. A sharded artifact on --device cuda without
/// --tp-mode processes is an error saying to add it.
StatusOr<BackendFactory> backendFactoryFor(const DeviceFlags& flags);

/// Whether this build has the CUDA backend.
bool cudaBackendBuilt();

}  // namespace ingot
