// The CUDA backend's op definitions, one row per op kind it runs, and the launch helpers
// they share.
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
      {OpKind::GeluMul, resolveGeluMulCuda, nullptr, enqueueElementwiseCuda},
      {OpKind::Add, nullptr, nullptr, enqueueElementwiseCuda},
      {OpKind::Logits, nullptr, uploadLinearCuda, enqueueLogitsCuda},
      {OpKind::AllReduce, nullptr, nullptr, enqueueCollectiveCuda},
      {OpKind::AllGather, nullptr, nullptr, enqueueCollectiveCuda},
      {OpKind::AddRmsNorm, nullptr, uploadRmsNormCuda, enqueueAddRmsNormCuda},
      {OpKind::RopeKvWrite, nullptr, uploadRopeCuda, enqueueRopeKvWriteCuda},
      {OpKind::GatedLinear, resolveGatedLinearCuda, uploadGatedLinearCuda, enqueueGatedLinearCuda},
      {OpKind::Scale, resolveScaleCuda, nullptr, enqueueScaleCuda},
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

Status launchKernel(CudaBackendState& s, const LoadedKernel& k, const GridCounts& counts,
                    const KernelArgs& args, const std::string& what) {
  INGOT_RETURN_IF_ERROR(checkKernelArgs(k, args, what));
  INGOT_ASSIGN_OR_RETURN(const GridDims g, launchGrid(k, counts, s.sms, what));
  if (g.x == 0 || g.y == 0 || g.z == 0) return okStatus();
  CUresult r = s.cu->launchKernel(k.function, g.x, g.y, g.z, k.block[0], k.block[1], k.block[2],
                                  k.shared_bytes, s.stream, args.data(), nullptr);
  if (r != CUDA_SUCCESS) return internalError(what + ": " + s.cu->describe("cuLaunchKernel", r));
  return okStatus();
}

}  // namespace ingot
