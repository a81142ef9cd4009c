// StepPlanner: the checks every op definition's plan function shares.
#include "runtime/backend/ops/step_planner.h"

#include "core/artifact/manifest_checks.h"
#include "runtime/backend/ops/op_definition.h"

namespace ingot {
namespace {

using schema::BufferKind;

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

Status StepPlanner::plan(const schema::ProgramStepDef& def, PlannedStep& step) {
  def_ = &def;
  step_ = &step;
  where_ = "step " + str(&step - plan_.steps.data()) + " (" +
           schema::EnumNameOpKind(def.op()) + "): ";
  step.op = def.op();
  if (def.inputs()) step.inputs.assign(def.inputs()->begin(), def.inputs()->end());
  if (def.outputs()) step.outputs.assign(def.outputs()->begin(), def.outputs()->end());
  const OpDefinition* op = findOpDefinition(def.op());
  if (!op) return unsupported("op is not supported by the CPU backend yet");
  step.definition = op;
  step.fp8_rows = paramInt("fp8_rows", 0) != 0;
  return op->plan(*this, step);
}

int64_t StepPlanner::paramInt(const char* name, int64_t fallback) const {
  const schema::ParamDef* p = findStepParam(*def_, name);
  return p ? p->i() : fallback;
}

double StepPlanner::paramFloat(const char* name, double fallback) const {
  const schema::ParamDef* p = findStepParam(*def_, name);
  return p ? p->f() : fallback;
}

bool StepPlanner::hasParam(const char* name) const { return findStepParam(*def_, name) != nullptr; }

size_t StepPlanner::numWeights() const { return def_->weights() ? def_->weights()->size() : 0; }

Status StepPlanner::needCounts(size_t inputs, size_t outputs, size_t minWeights,
                               size_t maxWeights) const {
  if (step_->inputs.size() != inputs)
    return fail("expected " + str(inputs) + " inputs, found " + str(step_->inputs.size()));
  if (step_->outputs.size() != outputs)
    return fail("expected " + str(outputs) + " outputs, found " + str(step_->outputs.size()));
  const size_t w = numWeights();
  if (w < minWeights || w > maxWeights)
    return fail("unexpected number of weights (" + str(w) + ")");
  return okStatus();
}

Status StepPlanner::needActivation(int32_t buffer, int64_t width, const char* what) const {
  const PlannedBuffer& b = plan_.buffers[buffer];
  if (b.kind != BufferKind::Activation)
    return fail(std::string(what) + " (buffer %" + str(buffer) + ") is not an activation");
  if (width > 0 && b.width != width)
    return fail(std::string(what) + " (buffer %" + str(buffer) + ") has width " + str(b.width) +
                ", expected " + str(width));
  return okStatus();
}

Status StepPlanner::needInput(int32_t buffer, int32_t expected, const char* what) const {
  if (buffer != expected)
    return fail(std::string(what) + " must be program input %" + str(expected) + ", found %" +
                str(buffer));
  return okStatus();
}

StatusOr<WeightView> StepPlanner::matrix(size_t i) const {
  const int32_t index = weight(i);
  if (weights_.isQuantized(index)) {
    const schema::TensorDef& t = artifact_.tensor(index);
    return unimplemented(where_ + "weight '" + t.name()->str() + "' is quantized (" +
                         schema::EnumNameQuantKind(t.quant()->kind()) +
                         "): the CPU backend runs quantized weights only in linear layers "
                         "(embeddings and the output head stay unquantized)");
  }
  StatusOr<WeightView> w = weights_.dense(index);
  if (!w.ok()) return w.status().withPrefix(where_.substr(0, where_.size() - 2));
  if (w->shape.size() != 2) return fail("weight '" + w->name + "' is not a matrix");
  return w;
}

}  // namespace ingot
