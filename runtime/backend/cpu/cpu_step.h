// CpuStep: what an op definition's CPU function runs a step with (runtime/backend/ops).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "runtime/backend/cpu/kernels.h"
#include "runtime/backend/cpu/kv_fp8.h"
#include "runtime/backend/cpu/paged_attention.h"
#include "runtime/backend/cpu/program_plan.h"
#include "runtime/backend/cpu/quant_linear.h"
#include "runtime/backend/cpu/thread_pool.h"
#include "runtime/backend/kv_dtype.h"
#include "runtime/backend/step_inputs.h"

namespace ingot {

class Communicator;

/// One CpuBackend::step in progress: the plan, the batch, the activation slots, the KV pool,
/// the kernels and the scratch space they share. The backend fills it; op definitions read
/// it and call its helpers, which split work over the thread pool.
class CpuStep {
 public:
  using LinearObserver = std::function<void(const std::string& weight, const float* x,
                                            int64_t rows, int64_t cols)>;

  /// Below this much work (multiply-adds or elements) a loop runs on the calling thread:
  /// waking the workers costs more than it saves.
  static constexpr int64_t kMinParallelMacs = 1 << 16;
  static constexpr int64_t kMinParallelElements = 1 << 14;
  /// Linear layers split their output rows in multiples of the kernels' row tile.
  static constexpr int64_t kRowGrain = 4;

  const ProgramPlan* plan = nullptr;
  const StepInputs* in = nullptr;
  std::vector<float>* logits = nullptr;
  /// Tokens of the step (T) and the index of the step being run (for errors).
  int64_t tokens = 0;
  size_t index = 0;
  ThreadPool* pool = nullptr;
  const CpuKernels* kernels = nullptr;
  const QuantKernels* quant_kernels = nullptr;
  std::vector<std::vector<float>>* slots = nullptr;
  /// The KV pool: f32 elements, or fp8 codes and scales.
  KvDtype kv_dtype = KvDtype::kF32;
  float* kv_pool = nullptr;
  uint8_t* kv_codes = nullptr;
  float* kv_scales = nullptr;
  AttentionScratch* attention_scratch = nullptr;
  /// Null in a group of one.
  Communicator* comm = nullptr;
  const LinearObserver* linear_observer = nullptr;
  /// Scratch the ops keep between steps: bf16 activations, prepared quantized activations,
  /// the logits' gathered hidden rows, an all_gather's ranks' slices.
  std::vector<uint16_t>* x_bf16 = nullptr;
  std::vector<float>* xq = nullptr;
  std::vector<float>* gathered = nullptr;
  std::vector<float>* gather_scratch = nullptr;
  /// A gated linear's gate rows [T, N] until its activation folds them in.
  std::vector<float>* gate_rows = nullptr;

  /// The activation slot that holds `buffer`.
  float* buffer(int32_t buffer) const { return (*slots)[plan->buffers[buffer].slot].data(); }
  /// "step N", the prefix of this step's errors.
  std::string where() const { return "step " + std::to_string(index); }
  /// fn(t0, t1) over the step's token rows, split over the pool unless rows of `width`
  /// elements make too little work.
  void rows(int64_t width, const std::function<void(int64_t, int64_t)>& fn) const;
  /// y = x w^T + bias for an unquantized w of N rows (args describes the rest); bf16
  /// kernels get x rounded to bf16 once.
  void linear(LinearArgs args, int64_t N) const;
  /// y [T, N] = x [T, K] w^T + bias for a quantized w: activations prepared once per call,
  /// then rows split over the pool.
  void quantizedLinear(const QuantMatrix& w, const float* x, const float* bias, float* y) const;
  /// y [T, N] = act(x gate^T) * (x up^T), gate and up [N, K] both unquantized of one type or
  /// both quantized in one format and block: x prepared once, and each pool task takes a
  /// range of output columns through both products and the activation (silu, or gelu's tanh
  /// form), so the gate rows are still in cache when they are folded in.
  void gatedLinear(const PlannedStep& gate, const PlannedStep& up, bool gelu, const float* x,
                   float* y) const;

 private:
  /// Rounds args.x to bf16 once (into x_bf16) when the kernels take bf16 activations and
  /// w is bf16.
  void roundInputsToBf16(LinearArgs& args) const;
  /// x [T, K] prepared for w's kernels (into xq): the args of a product by w, less y.
  QuantLinearArgs prepareQuantized(const QuantMatrix& w, const float* x) const;
  /// fn(n0, n1) over [0, N) in kRowGrain multiples, on the pool unless `macs` is too little.
  void columns(int64_t N, int64_t macs, const std::function<void(int64_t, int64_t)>& fn) const;
};

}  // namespace ingot
