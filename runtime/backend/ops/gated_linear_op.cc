// gated_linear: a gated MLP's gate and up linears and their silu / gelu, one step.
#include <algorithm>

#include "runtime/backend/cpu/cpu_step.h"
#include "runtime/backend/ops/op_functions.h"
#include "runtime/backend/ops/step_planner.h"

namespace ingot {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

/// Both weights quantized: every other weight must be a scale of one of them, and they must
/// share the format, shape and block (one preparation of x serves both on the CPU).
Status planQuantizedParts(StepPlanner& p, PlannedStep& step) {
  std::vector<int32_t> scales;
  for (int i = 0; i < 2; ++i) {
    StatusOr<QuantizedWeight> q = p.weights().quantized(p.weight(i));
    if (!q.ok()) return q.status().withPrefix(p.where().substr(0, p.where().size() - 2));
    PlannedStep& part = step.parts[i];
    part.quantized = true;
    part.quant = q->matrix;
    part.weight.name = q->name;
    part.weight.shape = {q->matrix.N, q->matrix.K};
    for (int32_t t : {q->scale_tensor, q->zero_tensor, q->global_scale_tensor})
      if (t >= 0) scales.push_back(t);
  }
  for (size_t i = 2; i < p.numWeights(); ++i)
    if (std::find(scales.begin(), scales.end(), p.weight(i)) == scales.end())
      return p.fail("weight #" + str(p.weight(i)) + " is not a scale of '" +
                    step.parts[0].weight.name + "' or '" + step.parts[1].weight.name + "'");
  const QuantMatrix& g = step.parts[0].quant;
  const QuantMatrix& u = step.parts[1].quant;
  if (g.format != u.format || g.block != u.block || g.scale_type != u.scale_type)
    return p.fail("gate '" + step.parts[0].weight.name + "' and up '" +
                  step.parts[1].weight.name + "' are quantized differently");
  return okStatus();
}

}  // namespace

Status planGatedLinear(StepPlanner& p, PlannedStep& step) {
  // gate, up, and up to three scale tensors of each
  INGOT_RETURN_IF_ERROR(p.needCounts(1, 1, 2, 8));
  const int64_t activation = p.paramInt("activation", -1);
  if (activation != 0 && activation != 1)
    return p.fail("param activation must be 0 (silu) or 1 (gelu), found " + str(activation));
  step.gelu = activation == 1;
  const bool gateQuantized = p.weights().isQuantized(p.weight(0));
  if (gateQuantized != p.weights().isQuantized(p.weight(1)))
    return p.fail("the gate and up weights must both be quantized or both not");
  step.parts.resize(2);
  if (gateQuantized) {
    INGOT_RETURN_IF_ERROR(planQuantizedParts(p, step));
  } else {
    if (p.numWeights() != 2)
      return p.fail("unquantized gate and up weights take no scales, found " +
                    str(p.numWeights()) + " weights");
    for (int i = 0; i < 2; ++i) {
      INGOT_ASSIGN_OR_RETURN(step.parts[i].weight, p.matrix(i));
    }
    if (step.parts[0].weight.type != step.parts[1].weight.type)
      return p.fail("the gate and up weights differ in element type");
  }
  const WeightView& gate = step.parts[0].weight;
  const WeightView& up = step.parts[1].weight;
  if (gate.shape != up.shape)
    return p.fail("gate '" + gate.name + "' is [" + str(gate.rows()) + ", " + str(gate.cols()) +
                  "] but up '" + up.name + "' is [" + str(up.rows()) + ", " + str(up.cols()) +
                  "]");
  for (PlannedStep& part : step.parts) {
    part.op = schema::OpKind::Linear;
    part.inputs = step.inputs;
    part.outputs = step.outputs;
    p.programPlan().matrix_bytes += part.quantized ? part.quant.bytes() : part.weight.bytes();
  }
  step.weight = gate;  // for messages and buffer sizing; the products read `parts`
  INGOT_RETURN_IF_ERROR(p.needActivation(step.inputs[0], gate.cols(), "input"));
  return p.needActivation(step.outputs[0], gate.rows(), "output");
}

Status runGatedLinearCpu(CpuStep& cpu, const PlannedStep& s) {
  const float* x = cpu.buffer(s.inputs[0]);
  if (*cpu.linear_observer)
    for (const PlannedStep& part : s.parts)
      (*cpu.linear_observer)(part.weight.name, x, cpu.tokens, part.weight.cols());
  cpu.gatedLinear(s.parts[0], s.parts[1], s.gelu, x, cpu.buffer(s.outputs[0]));
  return okStatus();
}

}  // namespace ingot
