// What a CudaBackend holds: device, kernels, weights, buffers and graphs (private to the
// backend's .cc files).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/artifact/artifact_reader.h"
#include "core/artifact/kernel_binary.h"
#include "runtime/backend/cpu/program_plan.h"
#include "runtime/backend/cpu/weight_store.h"
#include "runtime/backend/cuda/cublaslt.h"
#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/backend/cuda/cuda_driver.h"
#include "runtime/backend/cuda/kernel_modules.h"
#include "runtime/backend/cuda/step_pack.h"
#include "runtime/dist/stream_collectives.h"

namespace ingot {

/// Device memory freed on destruction (nothing when empty).
class DeviceMemory {
 public:
  DeviceMemory() = default;
  ~DeviceMemory() { reset(); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  DeviceMemory(DeviceMemory&& o) noexcept { *this = std::move(o); }
  DeviceMemory& operator=(DeviceMemory&& o) noexcept {
    if (this != &o) {
      reset();
      std::swap(cu_, o.cu_);
      std::swap(ptr_, o.ptr_);
      std::swap(bytes_, o.bytes_);
    }
    return *this;
  }
  /// Frees what it held and allocates `bytes` (at least 256); the error names `what`.
  Status allocate(CudaDriver& cu, size_t bytes, const std::string& what);
  void reset();
  CUdeviceptr ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  CudaDriver* cu_ = nullptr;
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

/// Page-locked host memory freed on destruction.
class PinnedMemory {
 public:
  PinnedMemory() = default;
  ~PinnedMemory() { reset(); }
  PinnedMemory(const PinnedMemory&) = delete;
  PinnedMemory& operator=(const PinnedMemory&) = delete;
  PinnedMemory(PinnedMemory&& o) noexcept { *this = std::move(o); }
  PinnedMemory& operator=(PinnedMemory&& o) noexcept {
    if (this != &o) {
      reset();
      std::swap(cu_, o.cu_);
      std::swap(data_, o.data_);
      std::swap(bytes_, o.bytes_);
    }
    return *this;
  }
  Status allocate(CudaDriver& cu, size_t bytes, const std::string& what);
  void reset();
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  CudaDriver* cu_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

/// One program step's device operands.
struct CudaOpDefinition;

struct DeviceStep {
  /// How the backend runs the step (cuda_ops.h), resolved at load.
  const CudaOpDefinition* op = nullptr;
  CUdeviceptr weight = 0;    ///< linear / logits: bf16 [N, K]; embedding: f32 table
  CUdeviceptr bias = 0;      ///< f32 [N] or 0
  CUdeviceptr norm = 0;      ///< rms_norm gamma, f32
  CUdeviceptr inv_freq = 0;  ///< rope, f32 [rotary_dim / 2]
  int64_t N = 0, K = 0;      ///< linear / logits shape
  /// A quantized linear: its packed codes and scales on the GPU as the artifact holds them
  /// (weight stays 0), multiplied by the GEMV kernel of its format.
  bool quantized = false;
  CUdeviceptr codes = 0, scales = 0, zeros = 0, channel_scales = 0;
  LoadedKernel gemv;
  /// Its tensor-core GEMM for prefill rows (ingot_quant_gemm_*); function null where the
  /// artifact predates it (the GEMV then serves every row count).
  LoadedKernel gemm;
  LoadedKernel attention;    ///< the step's decode kernel
  LoadedKernel combine;      ///< its split combine
  /// gated_linear: its gate and up linears, each as a linear step holds them.
  std::vector<DeviceStep> parts;
};

/// The fused kernels a step launches, by op.
struct FusedKernels {
  LoadedKernel embedding, rms_norm, rope_kv, silu_mul, add, add_bias, to_bf16, gather_rows;
  /// Token sampling (ingot_fused_sample_f32); absent from older artifacts (function null).
  LoadedKernel sample;
  /// The fp8 KV write (ingot_fused_kv_write_fp8_f32), resolved for an fp8 pool only.
  LoadedKernel kv_write_fp8;
  /// The scale (ingot_fused_scale_f32), in artifacts with a scale step only (function null
  /// otherwise; such a step is refused at load).
  LoadedKernel scale;
  /// gelu(gate) * up (ingot_fused_gelu_mul_f32), in artifacts with a GELU-gated MLP only
  /// (function null otherwise; such a step is refused at load).
  LoadedKernel gelu_mul;
};

/// Buffers sized for `dims` tokens, requests and logit rows (grown, never shrunk).
struct StepBuffers {
  StepDims dims;            ///< capacity
  int32_t max_splits = 1;   ///< split-KV partials capacity
  std::vector<DeviceMemory> slots;  ///< activation slots, f32 [tokens, width]
  DeviceMemory x_bf16;      ///< a linear's input rounded to bf16 [tokens, max K]
  DeviceMemory gate_rows;   ///< a gated linear's gate product, f32 [tokens, max N]
  DeviceMemory gathered;    ///< logits: the gathered hidden rows, f32 [logit_rows, D]
  DeviceMemory logits;      ///< f32 [logit_rows, vocab]
  DeviceMemory partial_out, partial_max, partial_sum;
  DeviceMemory inputs;      ///< the packed int32 step inputs
  DeviceMemory extra;       ///< extra attention operands (eager steps)
  DeviceMemory tree_bits;   ///< zeros: the no-tree default of a tree program
  DeviceMemory row_sampling;  ///< RowSampling [logit_rows] (stepAndSample)
  DeviceMemory tokens;      ///< int32 [logit_rows]: the sampled tokens
  DeviceMemory gathered_slices;  ///< all_gather: the ranks' [rows, W] slices, rank-major
  PinnedMemory inputs_host, logits_host, extra_host, row_sampling_host, tokens_host;
};

struct Fp8LinearState;  // cuda_fp8_linear.h

struct CudaBackendState {
  ~CudaBackendState();

  std::unique_ptr<CudaDriver> cu;
  CUdevice device = 0;
  CUcontext context = nullptr;
  bool context_retained = false;
  GpuTarget gpu;
  int sms = 1;
  CUstream stream = nullptr;
  std::unique_ptr<KernelModules> modules;
  std::unique_ptr<CublasLt> blas;
  DeviceMemory workspace;   ///< cuBLASLt
  /// Error words: u32 [0] embedding, [1] attention regions; u64 at byte 8: an fp8 KV
  /// write's non-finite row (kernels/kv_fp8.cuh, kvFp8ErrorKey; ~0 = none).
  DeviceMemory errors;
  PinnedMemory errors_host;

  const Artifact* artifact = nullptr;
  /// Tensor parallelism: the group (null for an unsharded artifact), its size, and whether
  /// the last step got past its input checks (CudaBackend::stepStarted()).
  Communicator* comm = nullptr;
  /// The same group when it can enqueue collectives on the compute stream (NCCL): then a
  /// rank's step is enqueued whole, decode steps replay graphs with the collectives inside,
  /// and the step's one host wait is stream_comm->waitStream (bounded by the group's
  /// timeout). Null: collectives are host calls between drained kernels, steps run eagerly.
  StreamCollectives* stream_comm = nullptr;
  int32_t world = 1;
  int32_t tp_rank = 0;
  bool step_started = false;
  std::unique_ptr<WeightStore> weights;
  std::unique_ptr<ProgramPlan> plan;
  ModelShape shape;
  int64_t max_model_len = 0;
  int32_t max_blocks_per_request = 0;  ///< block-table width of the decode graphs
  bool tree_inputs = false;
  int64_t max_linear_k = 0;
  int64_t max_heads = 0;   ///< query heads of the widest attention step
  int64_t head_dim = 0;

  std::vector<DeviceStep> steps;
  FusedKernels fused;
  /// Which fp8 linears run W8A8 (sm_90+ prefill) and their buffers (cuda_fp8_linear.h;
  /// a shared_ptr because the type is complete only there).
  std::shared_ptr<Fp8LinearState> fp8_linear;
  std::vector<std::unique_ptr<DeviceMemory>> weight_memory;
  uint64_t weight_device_bytes = 0;
  /// Bytes of each of the two pinned staging buffers of the weight upload.
  size_t staging_bytes = 64u << 20;
  double upload_seconds = 0.0;
  uint64_t upload_bytes = 0;

  /// The KV pool: f32 elements, or (kv_dtype fp8) E4M3 codes in the same layout with the
  /// block-head scales beside them in kv_scales (runtime/backend/cpu/kv_fp8.h's layout).
  KvDtype kv_dtype = KvDtype::kF32;
  DeviceMemory kv_pool;
  DeviceMemory kv_scales;
  int64_t num_kv_blocks = 0;
  StepBuffers buffers;

  std::vector<int32_t> buckets;
  bool capture_graphs = true;  ///< CudaBackendOptions::capture_decode_graphs
  /// Decode graphs by (bucket, whether the step samples): key 2 * bucket + sample.
  std::map<int32_t, CUgraphExec> graphs;
  /// Graph keys whose first (eager) step has run: the next one is captured.
  std::set<int32_t> warmed;
  int32_t last_bucket = 0;

  /// Makes the backend's context current on the calling thread.
  Status makeCurrent();
  /// Destroys every captured graph (their pointers are stale after buffers grow).
  void dropGraphs();
};

/// Uploads every weight the plan reads (bf16 matrices, f32 tables and vectors) through two
/// pinned staging buffers and fills s.steps' device pointers.
Status uploadWeights(CudaBackendState& s);

/// Grows s.buffers to hold `dims` and `splits` (dropping graphs when anything moves).
Status ensureBuffers(CudaBackendState& s, const StepDims& dims, int32_t splits);

/// Enqueues one whole step on s.stream for buffers laid out by `dims` (already packed in
/// s.buffers.inputs_host): input upload, every program step, logits and error words back
/// to pinned memory. The same calls whether captured into a graph or run eagerly.
/// `extra`: device operands of the attention regions (data pointers and shapes).
/// With `sample`, the logits stay on the GPU: the rows' RowSampling (already in
/// s.buffers.row_sampling_host) go up, the sampling kernel picks a token per logit row and the
/// tokens come back to s.buffers.tokens_host instead.
Status enqueueStep(CudaBackendState& s, const StepDims& dims, const SplitPlan& split,
                   const std::vector<std::pair<CUdeviceptr, std::vector<int64_t>>>& extra,
                   bool sample);

/// Bytes one KV block takes on the GPU: f32 elements, or fp8 codes plus their scales.
uint64_t kvBlockBytes(const CudaBackendState& s);

/// Allocates s.kv_pool (and s.kv_scales for fp8) for `blocks` blocks and clears them: zeros,
/// and every fp8 scale the minimum (a fresh pool reads back as zeros) (cuda_kv_pool.cc).
Status allocateKvPool(CudaBackendState& s, int64_t blocks);

/// Copies block `src` to `dst` (codes and scales for fp8), then waits.
Status copyKvBlock(CudaBackendState& s, int64_t src, int64_t dst);
/// Fills the K/V values (f32, bf16) or codes (fp8) of `blocks` with 0xFF bytes: NaN.
Status poisonKvBlocks(CudaBackendState& s, const std::vector<int32_t>& blocks);

/// Moves slot rows in order with the CPU backend's semantics (fp8: kvCopySlotsFp8, run on
/// a host copy of the touched blocks), then waits. Slots are already validated.
Status copyKvSlotRows(CudaBackendState& s, const std::vector<std::pair<int32_t, int32_t>>& moves);

/// The fp8 KV write's error word of the last step (in s.errors_host) as an error naming the
/// layer, the token and K or V, as the CPU backend's; ok for an f32 pool or no error.
Status kvWriteError(const CudaBackendState& s);

/// Program step `index`, an all_reduce or all_gather (cuda_collectives.cc) on the step's
/// device buffers (rows = the step's tokens, or its logit rows for a slice of the logits);
/// a gather then puts the ranks' [rows, W] slices side by side with strided copies. With
/// s.stream_comm the collective is enqueued on s.stream (no host wait: capturable); else
/// the stream is drained and the collective runs through s.comm (never inside a capture).
Status enqueueCollective(CudaBackendState& s, size_t index, const StepDims& dims);

/// The KV blocks every rank of s.comm's group can hold: the least of the ranks' `mine`
/// (all-gathered through device memory), so that every rank's pool has the same blocks.
/// A rank without room passes 0 (and reports its own error): the others fail naming it.
StatusOr<int64_t> agreeKvBlocks(CudaBackendState& s, int64_t mine);

}  // namespace ingot
