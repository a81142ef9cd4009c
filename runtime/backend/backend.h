// Backend: what the engine needs from whatever executes an artifact's serving step — the
// CPU backend, the tensor-parallel group of CPU ranks, later CUDA.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/backend/step_inputs.h"
#include "runtime/base/status.h"

namespace ingot {

class Backend {
 public:
  virtual ~Backend() = default;

  /// Runs one batched step: writes the new tokens' K/V into the pool and sets `logits` to
  /// [inputs.logit_rows.size(), vocab] row-major. Invalid inputs are rejected before
  /// anything runs. A program with the speculative tree inputs may be given none: it then
  /// runs as plain causal attention.
  virtual Status step(const StepInputs& inputs, std::vector<float>* logits) = 0;
  /// Copies every layer's K and V of block `src` to block `dst` (copy-on-write).
  virtual Status copyKvBlocks(int64_t src, int64_t dst) = 0;
  /// Copies every layer's K and V row of slot `from` to slot `to`, pair by pair in order.
  virtual Status copyKvSlots(const std::vector<std::pair<int32_t, int32_t>>& moves) = 0;

  virtual int64_t numKvBlocks() const = 0;
  virtual int64_t vocabSize() const = 0;
  /// Program inputs after the eight (extra attention operands).
  virtual int32_t numExtraInputs() const = 0;
  /// The extra inputs are the speculative tree pair (tree_start, tree_bits).
  virtual bool takesTreeInputs() const = 0;
  /// Time of one attention multiply-add over one linear-layer multiply-add (the
  /// scheduler's prefill cost model).
  virtual double attentionMacCost() const = 0;
  /// Worker threads in all.
  virtual int numThreads() const = 0;
  /// Bytes of the weight matrices one decode token reads.
  virtual uint64_t matrixBytes() const = 0;
};

}  // namespace ingot
