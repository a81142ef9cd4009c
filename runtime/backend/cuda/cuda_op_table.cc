// The CUDA backend's op definitions, one row per op kind it runs, and the launch helpers
// they share.
#include <algorithm>

#include "core/kernels/fused_params.h"
#include "runtime/backend/cuda/cuda_ops.h"

namespace ingot {

using schema::OpKind;

const std::vector<CudaOpDefinition>& cudaOpDefinitions() {
  static const std::vector<CudaOpDefinition> table = {
      {OpKind::Embedding, nullptr, uploadEmbeddingCuda, enqueueEmbeddingCuda},
      {OpKind::RmsNorm, nullptr, uploadRmsNormCuda, enqueueRmsNormCuda},
      {OpKind::Linear, resolveLinearCuda, uploadLinearCuda, enqueueLinearCuda},
      {OpKind::Rope, nullptr, uploadRopeCuda, enqueueRopeKvCuda},
      {OpKind::KvWrite, nullptr, nullptr, enqueueRopeKvCuda},
      {OpKind::Attention, resolveAttentionCuda, nullptr, enqueueAttentionCuda},
      {OpKind::SiluMul, nullptr, nullptr, enqueueElementwiseCuda},
      {OpKind::Add, nullptr, nullptr, enqueueElementwiseCuda},
      {OpKind::Logits, nullptr, uploadLinearCuda, enqueueLogitsCuda},
      {OpKind::AllReduce, nullptr, nullptr, enqueueCollectiveCuda},
      {OpKind::AllGather, nullptr, nullptr, enqueueCollectiveCuda},
      {OpKind::AddRmsNorm, nullptr, uploadRmsNormCuda, enqueueAddRmsNormCuda},
      {OpKind::RopeKvWrite, nullptr, uploadRopeCuda, enqueueRopeKvWriteCuda},
      {OpKind::GatedLinear, resolveGatedLinearCuda, uploadGatedLinearCuda, enqueueGatedLinearCuda},
  };
  return table;
}

const CudaOpDefinition* findCudaOpDefinition(schema::OpKind kind) {
  for (const CudaOpDefinition& op : cudaOpDefinitions())
    if (op.kind == kind) return &op;
  return nullptr;
}

CUdeviceptr CudaLaunch::slot(int32_t buffer) const {
  return s->buffers.slots[s->plan->buffers[buffer].slot].ptr();
}

Status CudaLaunch::launch(const LoadedKernel& k, unsigned gx, unsigned gy, unsigned gz,
                          const KernelArgs& args, const std::string& what) const {
  INGOT_RETURN_IF_ERROR(checkKernelArgs(k, args, what));
  if (gx == 0 || gy == 0 || gz == 0) return okStatus();
  CUresult r = s->cu->launchKernel(k.function, gx, gy, gz, k.block[0], k.block[1], k.block[2],
                                   k.shared_bytes, s->stream, args.data(), nullptr);
  if (r != CUDA_SUCCESS) return internalError(what + ": " + s->cu->describe("cuLaunchKernel", r));
  return okStatus();
}

unsigned CudaLaunch::strideGrid(int64_t count) const {
  constexpr int64_t kThreads = fused::kFusedThreads;
  const int64_t ctas = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>(ctas, int64_t{s->sms} * 32)));
}

}  // namespace ingot
