// linear (y = x w^T + bias, w dense or quantized) and logits (the output head over the
// step's logit rows).
#include <cstring>

#include "runtime/backend/cpu/cpu_step.h"
#include "runtime/backend/ops/op_functions.h"
#include "runtime/backend/ops/step_planner.h"

namespace ingot {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

/// A linear step whose first weight is quantized: the others are its scale tensors (as the
/// compiler lists them after the matrix) and at most one bias.
Status planQuantizedLinear(StepPlanner& p, PlannedStep& step) {
  StatusOr<QuantizedWeight> q = p.weights().quantized(p.weight(0));
  if (!q.ok()) return q.status().withPrefix(p.where().substr(0, p.where().size() - 2));
  const QuantMatrix& m = q->matrix;
  step.quantized = true;
  step.quant = m;
  step.weight.name = q->name;
  step.weight.shape = {m.N, m.K};
  INGOT_RETURN_IF_ERROR(p.needActivation(step.inputs[0], m.K, "input"));
  INGOT_RETURN_IF_ERROR(p.needActivation(step.outputs[0], m.N, "output"));
  for (size_t i = 1; i < p.numWeights(); ++i) {
    const int32_t t = p.weight(i);
    if (t == q->scale_tensor || t == q->zero_tensor || t == q->global_scale_tensor) continue;
    if (step.bias)
      return p.fail("weight #" + str(t) + " is neither a scale of '" + q->name + "' nor its bias");
    INGOT_ASSIGN_OR_RETURN(WeightView b, p.weights().dense(t));
    if (b.elements() != m.N)
      return p.fail("bias '" + b.name + "' has " + str(b.elements()) + " elements for " +
                    str(m.N) + " outputs");
    INGOT_ASSIGN_OR_RETURN(step.bias, p.weights().asF32(t));
  }
  p.programPlan().matrix_bytes += m.bytes();
  return okStatus();
}

}  // namespace

Status planLinear(StepPlanner& p, PlannedStep& step) {
  const size_t w = p.numWeights();
  INGOT_RETURN_IF_ERROR(p.needCounts(1, 1, 1, 4));  // weight, bias, up to two scales
  if (p.weights().isQuantized(p.weight(0))) return planQuantizedLinear(p, step);
  if (w > 2)
    return p.fail("an unquantized linear takes a weight and a bias, found " + str(w) +
                  " weights");
  INGOT_ASSIGN_OR_RETURN(step.weight, p.matrix(0));
  INGOT_RETURN_IF_ERROR(p.needActivation(step.inputs[0], step.weight.cols(), "input"));
  INGOT_RETURN_IF_ERROR(p.needActivation(step.outputs[0], step.weight.rows(), "output"));
  if (w == 2) {
    INGOT_ASSIGN_OR_RETURN(WeightView b, p.weights().dense(p.weight(1)));
    if (b.elements() != step.weight.rows())
      return p.fail("bias '" + b.name + "' has " + str(b.elements()) + " elements for " +
                    str(step.weight.rows()) + " outputs");
    INGOT_ASSIGN_OR_RETURN(step.bias, p.weights().asF32(p.weight(1)));
  }
  p.programPlan().matrix_bytes += step.weight.bytes();
  return okStatus();
}

Status runLinearCpu(CpuStep& cpu, const PlannedStep& s) {
  if (*cpu.linear_observer)
    (*cpu.linear_observer)(s.weight.name, cpu.buffer(s.inputs[0]), cpu.tokens, s.weight.cols());
  if (s.quantized) {
    cpu.quantizedLinear(s.quant, cpu.buffer(s.inputs[0]), s.bias, cpu.buffer(s.outputs[0]));
    return okStatus();
  }
  LinearArgs a;
  a.K = s.weight.cols();
  a.x = cpu.buffer(s.inputs[0]);
  a.x_stride = a.K;
  a.w = s.weight.data;
  a.w_type = s.weight.type;
  a.bias = s.bias;
  a.y = cpu.buffer(s.outputs[0]);
  a.y_stride = s.weight.rows();
  a.T = cpu.tokens;
  cpu.linear(a, s.weight.rows());
  return okStatus();
}

Status planLogits(StepPlanner& p, PlannedStep& step) {
  ProgramPlan& plan = p.programPlan();
  INGOT_RETURN_IF_ERROR(p.needCounts(2, 1, 1, 1));
  INGOT_RETURN_IF_ERROR(p.needInput(step.inputs[1], kInputLogitRows, "rows"));
  INGOT_ASSIGN_OR_RETURN(step.weight, p.matrix(0));
  INGOT_RETURN_IF_ERROR(p.needActivation(step.inputs[0], step.weight.cols(), "hidden"));
  PlannedBuffer& out = plan.buffers[step.outputs[0]];
  if (out.kind == schema::BufferKind::Activation && plan.world_size > 1 &&
      out.width == step.weight.rows()) {
    // A vocab-parallel head: this rank's slice of the logits, gathered by a later step.
    out.logit_rows = true;
  } else if (out.kind != schema::BufferKind::Output || out.width != step.weight.rows()) {
    return p.fail("output must be the program's logits output of width " +
                  str(step.weight.rows()) +
                  (plan.world_size > 1 ? " (or, sharded, an activation of that width)" : ""));
  }
  plan.matrix_bytes += step.weight.bytes();
  return okStatus();
}

Status runLogitsCpu(CpuStep& cpu, const PlannedStep& s) {
  const float* hidden = cpu.buffer(s.inputs[0]);
  const int64_t D = s.weight.cols(), V = s.weight.rows();
  const std::vector<int32_t>& logitRows = cpu.in->logit_rows;
  const int64_t L = static_cast<int64_t>(logitRows.size());
  if (L == 0) return okStatus();
  std::vector<float>& gathered = *cpu.gathered;
  if (static_cast<int64_t>(gathered.size()) < L * D) gathered.resize(L * D);
  for (int64_t r = 0; r < L; ++r)
    std::memcpy(gathered.data() + r * D, hidden + logitRows[r] * D, D * sizeof(float));
  LinearArgs a;
  a.x = gathered.data();
  a.x_stride = D;
  a.w = s.weight.data;
  a.w_type = s.weight.type;
  // The full logits, or (vocab-parallel head) this rank's slice for an all_gather.
  const bool slice = cpu.plan->buffers[s.outputs[0]].kind != schema::BufferKind::Output;
  a.y = slice ? cpu.buffer(s.outputs[0]) : cpu.logits->data();
  a.y_stride = V;
  a.T = L;
  a.K = D;
  cpu.linear(a, V);
  return okStatus();
}

}  // namespace ingot
