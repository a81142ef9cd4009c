// `--device` on the runtime commands: the CPU backend, or the CUDA backend on GPU N.
#include "runtime/cli/device_flag.h"

#include <cstdlib>
#include <iostream>

#include "runtime/backend/cpu/tp_cpu_backend.h"

#ifdef INGOT_HAVE_CUDA_BACKEND
#include "runtime/backend/cuda/cuda_backend.h"
#endif

namespace ingot {

bool cudaBackendBuilt() {
#ifdef INGOT_HAVE_CUDA_BACKEND
  return true;
#else
  return false;
#endif
}

StatusOr<BackendFactory> backendFactoryFor(const DeviceFlags& flags) {
  INGOT_RETURN_IF_ERROR(checkTensorParallelLaunch(flags.tp_launch, flags.device));
  if (flags.tp_launch.mode == "processes" && flags.device == "cpu")
    return processRanksFactory(flags.tp_launch);
  if (flags.device == "cpu") return BackendFactory();
  int ordinal = 0;
  if (flags.device != "cuda") {
    const std::string prefix = "cuda:";
    char* end = nullptr;
    const char* number = flags.device.c_str() + prefix.size();
    if (flags.device.compare(0, prefix.size(), prefix) != 0 || *number == '\0' ||
        (ordinal = static_cast<int>(std::strtol(number, &end, 10)), *end != '\0') || ordinal < 0)
      return invalidArgument("--device: expected cpu, cuda or cuda:N, got '" + flags.device + "'");
  }
  if (!(flags.gpu_memory_utilization > 0.0 && flags.gpu_memory_utilization <= 1.0))
    return invalidArgument("--gpu-memory-utilization must be in (0, 1], got " +
                           std::to_string(flags.gpu_memory_utilization));
  // CUDA ranks of a sharded artifact: rank r on GPU ordinal + r, one process each.
  if (flags.tp_launch.mode == "processes")
    return processRanksFactory(flags.tp_launch, ordinal, flags.gpu_memory_utilization);
#ifdef INGOT_HAVE_CUDA_BACKEND
  const double utilization = flags.gpu_memory_utilization;
  return BackendFactory([ordinal, utilization](const Artifact& artifact, const BackendRequest& request)
                            -> StatusOr<std::unique_ptr<Backend>> {
    const int32_t world = tensorParallelWorldSize(artifact);
    if (world > 1)
      return invalidArgument("--device " + std::string(ordinal == 0 ? "cuda" : "cuda:" + std::to_string(ordinal)) +
                             ": " + artifact.source() + " is sharded over " + std::to_string(world) +
                             " tensor-parallel ranks; CUDA ranks run one process per GPU: add "
                             "--tp-mode processes (rank r on GPU " + std::to_string(ordinal) + " + r)");
    CudaBackendOptions options;
    options.device = ordinal;
    options.gpu_memory_utilization = utilization;
    options.num_kv_blocks = request.num_kv_blocks;
    options.max_model_len = request.max_model_len;
    options.kv_dtype = request.kv_dtype;
    StatusOr<std::unique_ptr<CudaBackend>> backend = CudaBackend::create(artifact, options);
    if (!backend.ok()) return backend.status();
    std::cerr << "ingot: cuda: " << (*backend)->describe() << "\n";
    return std::unique_ptr<Backend>(std::move(backend).value());
  });
#else
  (void)ordinal;
  return unimplemented("--device " + flags.device +
                       ": this ingot was built without the CUDA backend (INGOT_ENABLE_CUDA=OFF)");
#endif
}

}  // namespace ingot
