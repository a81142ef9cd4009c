// CudaOpDefinition: how the CUDA backend resolves, uploads and launches each op kind.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/backend/cuda/cuda_backend_state.h"
#include "runtime/backend/cuda/kernel_args.h"
#include "runtime/backend/cuda/step_pack.h"

namespace ingot {

/// Device copies of what the steps read, made once at load (cuda_upload.cc): one per (host
/// tensor, device dtype), so a tied embedding is an f32 table for the gather and a bf16
/// matrix for the head. The bytes move after every step has asked (uploadWeights).
class WeightUploads {
 public:
  explicit WeightUploads(CudaBackendState& s) : s_(s) {}
  const ProgramPlan& plan() const { return *s_.plan; }
  /// `count` elements of `src` (of `type`) as a new device buffer of bf16 or f32.
  StatusOr<CUdeviceptr> elements(const void* src, WeightType type, int64_t count, bool to_bf16,
                                 const std::string& what);
  /// An f32 vector.
  StatusOr<CUdeviceptr> vector(const float* src, int64_t count, const std::string& what) {
    return elements(src, WeightType::kF32, count, false, what);
  }
  /// Packed bytes as they are (a quantized weight's codes and scales); null or empty: 0.
  StatusOr<CUdeviceptr> raw(const void* src, int64_t bytes, const std::string& what);
  /// Copies every buffer asked for through two pinned staging buffers, then waits.
  Status copy();

 private:
  struct Item {
    const void* src = nullptr;
    WeightType type = WeightType::kF32;
    int64_t count = 0;  ///< elements; bytes for a raw item
    bool to_bf16 = false;
    bool raw = false;
    CUdeviceptr dst = 0;
  };
  StatusOr<CUdeviceptr> add(Item item, size_t bytes, uint64_t sourceBytes, const std::string& what);

  CudaBackendState& s_;
  std::vector<Item> items_;
  std::map<std::pair<const void*, bool>, CUdeviceptr> done_;
};

/// Launches `k` on the backend's stream, once `args` match the parameters the artifact
/// recorded for it (checkKernelArgs), over the grid its rule (KernelDef.grid) gives for
/// `counts` (nothing for an empty grid). Every kernel launch of the backend goes through it.
Status launchKernel(CudaBackendState& s, const LoadedKernel& k, const GridCounts& counts,
                    const KernelArgs& args, const std::string& what);

/// One enqueueStep in progress: the step's shape, its packed inputs and error words on the
/// device, and the launch helpers every op uses.
struct CudaLaunch {
  CudaBackendState* s = nullptr;
  const StepDims* dims = nullptr;
  const SplitPlan* split = nullptr;
  /// Device operands of the attention regions (data pointers and shapes).
  const std::vector<std::pair<CUdeviceptr, std::vector<int64_t>>>* extra = nullptr;
  StepLayout layout;
  CUdeviceptr inputs = 0;  ///< the packed int32 step inputs
  CUdeviceptr errors = 0;  ///< embedding word, region word, fp8 KV write key (8 bytes at +8)
  bool fp8_kv = false;
  /// The program step being enqueued and "step N", the prefix of its errors.
  size_t index = 0;
  std::string where;

  int tokens() const { return dims->tokens; }
  /// The packed input `words` int32 words in.
  CUdeviceptr at(int64_t words) const { return inputs + static_cast<CUdeviceptr>(words) * 4; }
  /// The activation slot that holds `buffer`.
  CUdeviceptr slot(int32_t buffer) const;
  /// launchKernel on this step's backend.
  Status launch(const LoadedKernel& k, const GridCounts& counts, const KernelArgs& args,
                const std::string& what) const {
    return launchKernel(*s, k, counts, args, what);
  }
  /// y [rows, N] = x [rows, K] . w^T (+ bias) for a bf16 w: x rounded to bf16 first, the
  /// product through cuBLASLt.
  Status linear(CUdeviceptr x, const DeviceStep& d, CUdeviceptr y, int64_t rows,
                const std::string& what) const;
  /// The same for a quantized w, straight from its packed bytes: the tensor-core GEMM from
  /// kQuantGemmMinRows rows where the artifact has it, else the GEMV.
  Status quantizedLinear(const PlannedStep& p, const DeviceStep& d, CUdeviceptr x, CUdeviceptr y,
                         int64_t rows, const std::string& what) const;
};

/// The counts of a launch over the step's `tokens`, or over `n` elements (a grid-stride
/// kernel), for the kernel's grid rule.
inline GridCounts perToken(int64_t tokens) {
  return GridCounts().set(schema::GridCount::Tokens, tokens);
}
inline GridCounts overElements(int64_t n) {
  return GridCounts().set(schema::GridCount::Elements, n);
}

/// One op kind on the CUDA backend. Every kind of the runtime's op table
/// (runtime/backend/ops/op_definition.h) the CUDA backend runs has a row here; a program
/// with another is refused at load, naming it. Null functions: nothing to do.
struct CudaOpDefinition {
  schema::OpKind kind;
  /// Finds the step's own kernels in the artifact (the fused ones are shared).
  Status (*resolve)(CudaBackendState& s, size_t index, const schema::ProgramStepDef& def);
  /// Asks for the device copies of what the step reads.
  Status (*upload)(WeightUploads& up, size_t index, const PlannedStep& p, DeviceStep& d);
  /// Enqueues the step's kernels on the stream.
  Status (*enqueue)(const CudaLaunch& launch, const PlannedStep& p, const DeviceStep& d);
};

/// The CUDA definition of `kind`, or null when the CUDA backend cannot run it.
const CudaOpDefinition* findCudaOpDefinition(schema::OpKind kind);
const std::vector<CudaOpDefinition>& cudaOpDefinitions();

// The definitions (cuda_ops_*.cc), for the table in cuda_op_table.cc.
Status enqueueEmbeddingCuda(const CudaLaunch& l, const PlannedStep& p, const DeviceStep& d);
Status uploadEmbeddingCuda(WeightUploads& up, size_t index, const PlannedStep& p, DeviceStep& d);
Status enqueueRmsNormCuda(const CudaLaunch& l, const PlannedStep& p, const DeviceStep& d);
Status uploadRmsNormCuda(WeightUploads& up, size_t index, const PlannedStep& p, DeviceStep& d);
Status enqueueAddRmsNormCuda(const CudaLaunch& l, const PlannedStep& p, const DeviceStep& d);
Status enqueueRopeKvWriteCuda(const CudaLaunch& l, const PlannedStep& p, const DeviceStep& d);
Status enqueueRopeKvCuda(const CudaLaunch& l, const PlannedStep& p, const DeviceStep& d);
Status uploadRopeCuda(WeightUploads& up, size_t index, const PlannedStep& p, DeviceStep& d);
Status enqueueElementwiseCuda(const CudaLaunch& l, const PlannedStep& p, const DeviceStep& d);
Status resolveScaleCuda(CudaBackendState& s, size_t index, const schema::ProgramStepDef& def);
/// A gelu_mul step (or a GELU-gated gated_linear, `what`) needs the artifact's gelu_mul
/// kernel, which only artifacts with such a step carry: found at load, or refused naming it.
Status requireGeluMulCuda(const CudaBackendState& s, size_t index, const std::string& what);
Status resolveGeluMulCuda(CudaBackendState& s, size_t index, const schema::ProgramStepDef& def);
Status enqueueScaleCuda(const CudaLaunch& l, const PlannedStep& p, const DeviceStep& d);
Status resolveLinearCuda(CudaBackendState& s, size_t index, const schema::ProgramStepDef& def);
Status uploadLinearCuda(WeightUploads& up, size_t index, const PlannedStep& p, DeviceStep& d);
Status enqueueLinearCuda(const CudaLaunch& l, const PlannedStep& p, const DeviceStep& d);
Status resolveGatedLinearCuda(CudaBackendState& s, size_t index, const schema::ProgramStepDef& def);
Status uploadGatedLinearCuda(WeightUploads& up, size_t index, const PlannedStep& p, DeviceStep& d);
Status enqueueGatedLinearCuda(const CudaLaunch& l, const PlannedStep& p, const DeviceStep& d);
Status enqueueLogitsCuda(const CudaLaunch& l, const PlannedStep& p, const DeviceStep& d);
Status resolveAttentionCuda(CudaBackendState& s, size_t index, const schema::ProgramStepDef& def);
Status enqueueAttentionCuda(const CudaLaunch& l, const PlannedStep& p, const DeviceStep& d);
Status enqueueCollectiveCuda(const CudaLaunch& l, const PlannedStep& p, const DeviceStep& d);

}  // namespace ingot
