// ProgramPlan: programs[0] checked and lowered once at load, ready for CpuBackend::step.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/artifact/artifact_reader.h"
#include "core/region/region_program.h"
#include "runtime/backend/cpu/cpu_ops.h"
#include "runtime/backend/cpu/paged_attention.h"
#include "runtime/backend/cpu/weight_store.h"
#include "runtime/backend/kv_dtype.h"
#include "runtime/backend/step_inputs.h"
#include "core/base/status.h"

namespace ingot {

class Communicator;
struct OpDefinition;

/// The program inputs by buffer index (the serving-step contract).
enum ProgramInput : int32_t {
  kInputTokens = 0,
  kInputPositions = 1,
  kInputKvCache = 2,
  kInputBlockTables = 3,
  kInputSeqLens = 4,
  kInputQueryStart = 5,
  kInputSlotMapping = 6,
  kInputLogitRows = 7,
  kNumStepInputs = 8,
};

/// How a step binds one buffer.
struct PlannedBuffer {
  schema::BufferKind kind = schema::BufferKind::Activation;
  /// Elements per token row (product of the static dimensions after the first).
  int64_t width = 0;
  /// Activations: index of the storage slot they live in (shared by buffers whose
  /// lifetimes do not overlap). -1 otherwise.
  int32_t slot = -1;
  /// Rows are the step's logit rows (L), not its tokens (T): a vocab-parallel head's
  /// slice of the logits, which only an all_gather (or all_reduce) may read.
  bool logit_rows = false;
};

/// One step with its weights resolved and parameters decoded.
struct PlannedStep {
  schema::OpKind op = schema::OpKind::Invalid;
  /// The op's definition (runtime/backend/ops/op_definition.h): how backends run it.
  const OpDefinition* definition = nullptr;
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;
  WeightView weight;              ///< linear / embedding / logits matrix
  /// A linear layer with a quantized weight: read through `quant` (weight has its shape only).
  bool quantized = false;
  QuantMatrix quant;
  const float* bias = nullptr;    ///< linear bias, layer_norm beta
  const float* norm = nullptr;    ///< rms_norm / layer_norm gamma
  /// rms_norm / layer_norm: features one gamma spans, the row or (a per-head rms_norm) one
  /// head; each row is width / norm_width groups normalized on their own.
  int64_t norm_width = 0;
  float epsilon = 1e-5f;
  float factor = 1.0f;            ///< scale: the constant
  std::vector<float> inv_freq;    ///< rope
  int64_t num_heads = 0;
  int64_t head_dim = 0;
  int64_t layer = 0;
  AttentionParams attention;      ///< variant programs point into ProgramPlan::regions
  /// Indices into StepInputs::extra_inputs of the attention step's extra operands.
  std::vector<int32_t> extra_inputs;
  /// An rms_norm, add_rms_norm or silu_mul whose rows fp8 (W8A8) linears read: the CUDA
  /// backend has it write them as fp8 codes too (the step's fp8_rows param, which
  /// ingot-select-kernels decides).
  bool fp8_rows = false;
  /// Vocab-parallel embedding: row i of the table is token vocab_start + i, other tokens
  /// give zeros. -1: the table covers the whole vocabulary.
  int64_t vocab_start = -1;
  /// gated_linear: its gate and up products, planned as linear steps (weight, quant; no
  /// bias), and its activation (silu, or gelu's tanh form). `weight` is the gate's.
  std::vector<PlannedStep> parts;
  bool gelu = false;
};

struct ProgramPlan {
  std::vector<PlannedBuffer> buffers;
  std::vector<PlannedStep> steps;
  /// Row width (floats per token) of each activation slot.
  std::vector<int64_t> slot_widths;
  KvCacheLayout kv_layout;
  /// The kv_cache buffer's dtype (F32 or F8E4M3FN): the pool's default element type.
  KvDtype kv_dtype = KvDtype::kF32;
  int64_t vocab_size = 0;
  /// Tensor parallelism: the ranks the program's all_reduce / all_gather steps span
  /// (TensorParallelDef.world_size; 1 for an unsharded artifact).
  int32_t world_size = 1;
  /// Number of program inputs after the eight (extra attention operands).
  int32_t num_extra_inputs = 0;
  /// Decoded attention-variant regions (stable addresses).
  std::vector<std::unique_ptr<RegionProgram>> regions;
  /// Bytes of weights one decode token reads: every linear and logits matrix.
  uint64_t matrix_bytes = 0;
};

/// Checks programs[0] against the serving-step contract and the model config (buffer
/// kinds, widths, weight shapes, params, that every activation is written before it is
/// read) and lowers it. Errors name the step; quantized embeddings or output heads,
/// quantization schemes the kernels lack, KV caches neither f32 nor fp8 and unknown ops are "not
/// supported (yet)".
/// Checks a step's extra inputs against the plan before anything runs, so a bad one leaves
/// the KV pool as it was: there are at least plan.num_extra_inputs of them, and each
/// attention variant's mask and score regions accept the operands they read.
Status checkExtraInputs(const ProgramPlan& plan, const StepInputs& inputs);

/// Whether `program`'s extra inputs (`num_extra` of them) are the speculative tree pair the
/// compiler emits: i32 tree_start [R] and i32 tree_bits [R, nodes, words] (buffers 8, 9).
bool programTakesTreeInputs(const schema::ProgramDef& program, int32_t num_extra);

StatusOr<ProgramPlan> planProgram(const Artifact& artifact, WeightStore& weights,
                                  int32_t program_index = 0);

/// Which of the artifact's programs a backend runs (shared by every backend):
/// programs[program] of an unsharded artifact, or the main program of rank `tp_rank` of an
/// artifact sharded over N > 1 ranks, whose collectives go through `communicator` (its
/// world size must be N and its rank `tp_rank`; draft programs are not sharded yet).
/// Errors name both sides of a disagreement.
StatusOr<int32_t> selectProgram(const Artifact& artifact, int32_t program, int32_t tp_rank,
                                const Communicator* communicator);

}  // namespace ingot
