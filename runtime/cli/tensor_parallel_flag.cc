// `--tp N` on the runtime commands: the artifact's tensor-parallel world size, checked.
#include "runtime/cli/tensor_parallel_flag.h"

#include "runtime/backend/cpu/tp_cpu_backend.h"

namespace ingot {

Status checkTensorParallelFlag(int32_t tp, const Artifact& artifact, const std::string& path) {
  if (tp < 0) return invalidArgument("--tp must be >= 0 (0 = any), not " + std::to_string(tp));
  const int32_t world = tensorParallelWorldSize(artifact);
  if (tp == 0 || tp == world) return okStatus();
  return invalidArgument("--tp " + std::to_string(tp) + " disagrees with " + path +
                         ", compiled for tensor-parallel world size " + std::to_string(world) +
                         " (ingot compile --tp N sets it)");
}

}  // namespace ingot
