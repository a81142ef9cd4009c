// StepPlanner: what an op definition's plan function checks and reads a step with.
#pragma once

#include <cstdint>
#include <string>

#include "core/artifact/artifact_reader.h"
#include "core/base/status.h"
#include "runtime/backend/cpu/program_plan.h"
#include "runtime/backend/cpu/weight_store.h"

namespace ingot {

/// One step of a program being planned: its definition in the artifact, the plan so far
/// (buffers, KV layout, world size) and the weights. Errors it makes start with
/// "step N (op): ".
class StepPlanner {
 public:
  StepPlanner(const Artifact& artifact, WeightStore& weights, ProgramPlan& plan)
      : artifact_(artifact), weights_(weights), plan_(plan) {}

  /// Checks and lowers `def` into `step` through its op's definition (op_definition.h).
  Status plan(const schema::ProgramStepDef& def, PlannedStep& step);

  const Artifact& artifact() const { return artifact_; }
  WeightStore& weights() { return weights_; }
  ProgramPlan& programPlan() { return plan_; }
  const schema::ProgramStepDef& def() const { return *def_; }
  /// "step N (op): ", the prefix of this step's errors.
  const std::string& where() const { return where_; }

  /// invalidArgument with where() in front.
  Status fail(const std::string& message) const { return invalidArgument(where_ + message); }
  /// unimplemented with where() in front.
  Status unsupported(const std::string& message) const { return unimplemented(where_ + message); }
  /// A step parameter, or `fallback` when the step has none of that name.
  int64_t paramInt(const char* name, int64_t fallback) const;
  double paramFloat(const char* name, double fallback) const;
  bool hasParam(const char* name) const;
  /// Weights the step lists.
  size_t numWeights() const;
  int32_t weight(size_t i) const { return def_->weights()->Get(static_cast<uint32_t>(i)); }

  /// Exactly `inputs` inputs and `outputs` outputs, and minWeights..maxWeights weights.
  Status needCounts(size_t inputs, size_t outputs, size_t minWeights, size_t maxWeights) const;
  /// `buffer` must be an activation of `width` floats per row (0: any).
  Status needActivation(int32_t buffer, int64_t width, const char* what) const;
  /// `buffer` must be program input `expected` (ProgramInput).
  Status needInput(int32_t buffer, int32_t expected, const char* what) const;
  /// The step's i-th weight as an unquantized matrix.
  StatusOr<WeightView> matrix(size_t i) const;


 private:
  const Artifact& artifact_;
  WeightStore& weights_;
  ProgramPlan& plan_;
  const schema::ProgramStepDef* def_ = nullptr;
  PlannedStep* step_ = nullptr;
  std::string where_;
};

}  // namespace ingot
