// CpuBackend: runs an artifact's serving-step program on the CPU over a paged f32 or fp8 KV pool.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/artifact/artifact_reader.h"
#include "runtime/backend/backend.h"
#include "runtime/backend/cpu/kernels.h"
#include "runtime/backend/cpu/simd_level.h"
#include "runtime/backend/kv_dtype.h"
#include "runtime/backend/step_inputs.h"
#include "core/base/status.h"

namespace ingot {

class Communicator;

struct QuantKernels;

struct CpuBackendOptions {
  /// Worker threads including the caller; 0 = std::thread::hardware_concurrency().
  int num_threads = 0;
  /// Blocks in the KV pool; 0 = enough for one sequence of the model's max_context.
  int64_t num_kv_blocks = 0;
  /// Kernel flavour; unset = the best the CPU supports (detectSimdLevel()). A level the
  /// CPU lacks is an error.
  std::optional<SimdLevel> simd;
  /// Which of the artifact's programs to run: 0 = the main one; a draft program (built
  /// from a subset of the layers for self-speculation) is 1 or more.
  int32_t program = 0;
  /// Tensor parallelism (docs/tensor-parallel.md): for an artifact sharded over N > 1
  /// ranks, the rank to run (its main program, tp_rank == rank, and only its tensors) and
  /// the group's communicator for its all_reduce / all_gather steps (not owned; rank and
  /// world size must agree with it). An unsharded artifact needs neither.
  int32_t tp_rank = 0;
  Communicator* communicator = nullptr;
  /// Element type of the KV pool; unset = the program's kv_cache buffer dtype (F32, or
  /// F8E4M3FN for an artifact compiled with an fp8 KV cache). fp8 stores E4M3 codes with
  /// per-block-head scales (kv_fp8.h): a quarter of the bytes per token.
  std::optional<KvDtype> kv_dtype;
  /// Quantized-linear kernels to use instead of the SIMD level's (not owned; must outlive
  /// the backend): for measurements such as the W8A8 emulation of
  /// bench/cpu/w8a8_accuracy.cc. Null = quantKernels(simd).
  const QuantKernels* quant_kernels = nullptr;
};

struct ProgramPlan;
struct QuantKernels;
class ThreadPool;
class WeightStore;
struct AttentionScratch;

/// The reference backend. Executes programs[0] step by step (embedding, rms_norm,
/// layer_norm, linear with f32/f16/bf16 weights or quantized ones read from their packed
/// bytes (u4 int4 group, fp8 per-channel/per-tensor, nvfp4, mxfp4), rope, kv_write, paged
/// attention with the variant's mask/score bytecode, silu_mul, gelu_mul, add, logits).
/// Weights are read straight from the artifact's mapping: the artifact must outlive the
/// backend.
/// One query token or many, alone or batched, give bitwise-identical logits for a request.
/// Not thread-safe: one step at a time.
class CpuBackend final : public Backend {
 public:
  /// Checks and lowers the program, maps the weights (or fills dummy ones) and allocates
  /// the KV pool [num_blocks, layers, 2, block_size, kv_heads, head_dim] (zeroed; f32, or
  /// fp8 codes plus scales). Quantized embeddings or heads, malformed or unsupported
  /// quantization schemes, KV dtypes other than f32/F8E4M3FN and unknown ops are reported
  /// here, not at step().
  static StatusOr<std::unique_ptr<CpuBackend>> create(const Artifact& artifact,
                                                      const CpuBackendOptions& options);
  ~CpuBackend() override;
  CpuBackend(const CpuBackend&) = delete;
  CpuBackend& operator=(const CpuBackend&) = delete;

  /// Runs one batched step: writes the new tokens' K/V into the pool and sets `logits` to
  /// [inputs.logit_rows.size(), vocab] row-major. A program compiled with the speculative
  /// tree inputs (tree_start, tree_bits) may be given no extra inputs: it then runs as
  /// plain causal attention, as if no request had a tree. Invalid inputs (StepInputs::validate,
  /// extra operands) are rejected before anything runs; a region that traps during
  /// attention fails the step after this step's K/V were written.
  Status step(const StepInputs& inputs, std::vector<float>* logits) override;

  /// Copies every layer's K and V of block `src` to block `dst` (copy-on-write).
  Status copyKvBlocks(int64_t src, int64_t dst) override;
  /// Copies every layer's K and V row of slot `from` to slot `to`, pair by pair in order
  /// (a verified speculative path compacted into place). Slots must be in the pool.
  Status copyKvSlots(const std::vector<std::pair<int32_t, int32_t>>& moves) override;

  const ModelShape& modelShape() const { return shape_; }
  int64_t numKvBlocks() const override { return num_kv_blocks_; }
  int64_t vocabSize() const override { return shape_.vocab_size; }
  SimdLevel simdLevel() const { return kernels_->level; }
  /// Program inputs after the eight (extra attention operands).
  int32_t numExtraInputs() const override;
  /// The extra inputs are the speculative tree pair the compiler emits: i32 tree_start [R]
  /// and i32 tree_bits [R, nodes, words].
  bool takesTreeInputs() const override { return tree_inputs_; }
  int numThreads() const override;
  /// Time of one attention multiply-add (q.k or p.v) over one linear-layer multiply-add,
  /// for the scheduler's prefill cost model: 2 where bf16 linears multiply bf16
  /// activations (twice the f32 rate) while attention stays f32, else 1.
  double attentionMacCost() const override;
  /// Bytes of every linear and logits weight matrix (for quantized ones the packed codes
  /// plus their scales): what one decode token must read.
  uint64_t matrixBytes() const override;
  /// Tensor parallelism: this backend's rank (-1 for an unsharded artifact) and the bytes
  /// of the weight tensors it reads (replicated ones plus its own shards).
  int32_t tpRank() const { return tp_rank_; }
  uint64_t weightBytes() const;
  /// Whether the last step() got past its input checks and ran steps (a tensor-parallel
  /// rank that failed after that point may have left the others inside a collective).
  bool stepStarted() const { return step_started_; }
  /// The KV pool (tests, debugging): f32 elements, or for fp8 the codes and the scales
  /// Sees the f32 input x [rows, cols] of every linear step (not the logits head) before
  /// the step runs, with the weight's name: how `ingot compile --calib` records activation
  /// statistics without a second model implementation. Empty = no observer (the default).
  using LinearObserver = std::function<void(const std::string& weight, const float* x,
                                            int64_t rows, int64_t cols)>;
  void setLinearObserver(LinearObserver observer) { linear_observer_ = std::move(observer); }
  /// [num_blocks, layers, 2, kv_heads] (the other pool is empty).
  const float* kvPool() const { return kv_pool_.data(); }
  size_t kvPoolFloats() const { return kv_pool_.size(); }
  const uint8_t* kvCodes() const { return kv_codes_.data(); }
  const float* kvScales() const { return kv_scales_.data(); }
  KvDtype kvDtype() const override { return kv_dtype_; }
  /// Bytes the KV pool holds (elements plus scales).
  uint64_t kvPoolBytes() const;

 private:
  CpuBackend();

  const Artifact* artifact_ = nullptr;
  int32_t tp_rank_ = -1;
  Communicator* comm_ = nullptr;        // null: world size 1
  std::vector<float> gather_scratch_;   // all_gather: the ranks' slices, rank-major
  std::vector<float> gate_rows_;        // gated_linear: the gate product [T, N]
  const CpuKernels* kernels_ = nullptr;
  std::unique_ptr<WeightStore> weights_;
  std::unique_ptr<ProgramPlan> plan_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<AttentionScratch> attention_scratch_;
  /// Activations rounded to bf16 for kernels with bf16_activations.
  std::vector<uint16_t> x_bf16_;
  /// Quantized linears: their kernels and the activations those prepare per call.
  const QuantKernels* quant_kernels_ = nullptr;
  std::vector<float> xq_;
  ModelShape shape_;
  int64_t num_kv_blocks_ = 0;
  std::vector<float> kv_pool_;
  /// fp8 pool: E4M3 codes in kv_pool_'s layout and one scale per block-head (kv_fp8.h).
  KvDtype kv_dtype_ = KvDtype::kF32;
  std::vector<uint8_t> kv_codes_;
  std::vector<float> kv_scales_;
  std::vector<std::vector<float>> slots_;  // activation storage, reused across steps
  std::vector<float> gathered_;            // logits: the gathered hidden rows
  int64_t num_tokens_ = 0;                 // T of the step in progress
  bool step_started_ = false;              // see stepStarted()
  /// The program takes tree_start / tree_bits; with their no-tree defaults for callers
  /// that pass none.
  bool tree_inputs_ = false;
  std::vector<int32_t> no_tree_start_, no_tree_bits_;
  LinearObserver linear_observer_;  // calibration hook, usually empty
  int64_t no_tree_shapes_[4] = {0, 0, 1, 1};
};

}  // namespace ingot
