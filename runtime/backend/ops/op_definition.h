// OpDefinition: everything the runtime knows about one op kind, found in one table.
#pragma once

#include <cstdint>
#include <vector>

#include "core/base/status.h"
#include "schemas/artifact_generated.h"

namespace ingot {

class StepPlanner;
class CpuStep;
struct PlannedStep;

/// One op kind of the step program: how a step of it is checked and lowered at load (the
/// plan every backend runs from), and how the CPU backend runs it. The CUDA backend's launch
/// and weight upload of each kind are in its own table (runtime/backend/cuda/cuda_ops.h),
/// whose test checks it against this one. Adding an op: one file in runtime/backend/ops with
/// both functions, one row in op_table.cc. Which outputs may overwrite which inputs is part
/// of the artifact contract (core/artifact/slot_plan.h: inPlacePairs): the compiler plans
/// the slots, and the kernels take an output and its input in one slot.
struct OpDefinition {
  schema::OpKind kind;
  /// Checks the step against the program, the model config and its weights, and fills the
  /// planned step. Errors name the step (StepPlanner::fail).
  Status (*plan)(StepPlanner& planner, PlannedStep& step);
  /// Runs a planned step on the CPU backend.
  Status (*run_cpu)(CpuStep& cpu, const PlannedStep& step);
};

/// The definition of `kind`, or null for a kind the runtime does not know.
const OpDefinition* findOpDefinition(schema::OpKind kind);

/// Every op kind the runtime runs, in OpKind order.
const std::vector<OpDefinition>& opDefinitions();

}  // namespace ingot
