// Activation slots of a step program: which storage each activation buffer lives in.
//
// The compiler plans them (the ingot-plan-steps pass) and writes them into the artifact
// (BufferDef.slot); the runtime checks the plan before it allocates anything, and plans
// programs of artifacts older than format 1.3 itself, with the same function.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/base/status.h"
#include "schemas/artifact_generated.h"

namespace ingot {

/// Outputs an op may write over one of its inputs.
inline constexpr int kMaxInPlaceOutputs = 3;

/// For each output of an op kind, the input whose storage it may take when the step is that
/// input's last reader (the kernels then update the input in place); -1: never.
using InPlacePairs = std::array<int8_t, kMaxInPlaceOutputs>;
InPlacePairs inPlacePairs(schema::OpKind kind);

/// A program buffer as the slot planner sees it.
struct SlotBuffer {
  /// Only activations live in slots (inputs, outputs and the KV cache have their own).
  bool activation = false;
  /// Elements per token row.
  int64_t width = 0;
};

/// A step as the slot planner sees it: its op kind and its buffer indices.
struct SlotStep {
  schema::OpKind op = schema::OpKind::Invalid;
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;
};

/// One slot per activation buffer (-1 for the others), and how many slots there are.
struct SlotPlan {
  std::vector<int32_t> slot;
  int32_t num_slots = 0;
};

/// Plans slots for a program whose dataflow is well formed (every index in range, each
/// activation written by one step before any step reads it): a slot is reused once its
/// buffer's last reader ran, lowest-freed-last first, and an output takes the storage of
/// its in-place input (inPlacePairs) when that input is an activation of the same width
/// that no later step, and no other operand of the step, reads.
SlotPlan planSlots(const std::vector<SlotBuffer>& buffers, const std::vector<SlotStep>& steps);

/// Checks slots read from an artifact against the program: every activation a step writes
/// has one in [0, buffers) (one no step writes may have -1), every other buffer -1, the slots used are 0 .. k-1, and no step writes a slot whose buffer is still
/// to be read, except an output over its in-place input (inPlacePairs) read last by that
/// step. Errors name the step and both buffers.
Status checkSlots(const std::vector<SlotBuffer>& buffers, const std::vector<SlotStep>& steps,
                  const std::vector<int32_t>& slot);

}  // namespace ingot
