// rms_norm and layer_norm over each token row, and add_rms_norm (a residual add and the
// rms_norm of its sum).
#include "runtime/backend/cpu/cpu_ops.h"
#include "runtime/backend/cpu/cpu_step.h"
#include "runtime/backend/ops/op_functions.h"
#include "runtime/backend/ops/step_planner.h"

namespace ingot {

Status planNorm(StepPlanner& p, PlannedStep& step) {
  const bool layer = step.op == schema::OpKind::LayerNorm;
  INGOT_RETURN_IF_ERROR(p.needCounts(1, 1, layer ? 2 : 1, layer ? 2 : 1));
  const int64_t width = p.programPlan().buffers[step.inputs[0]].width;
  INGOT_RETURN_IF_ERROR(p.needActivation(step.inputs[0], 0, "input"));
  INGOT_RETURN_IF_ERROR(p.needActivation(step.outputs[0], width, "output"));
  step.norm_width = width;
  for (size_t i = 0; i < (layer ? 2u : 1u); ++i) {
    INGOT_ASSIGN_OR_RETURN(WeightView w, p.weights().dense(p.weight(i)));
    // An rms_norm's gamma may span one group of the row (per-head q/k norm).
    const bool grouped = !layer && w.elements() > 0 && width % w.elements() == 0;
    if (w.elements() != width && !grouped)
      return p.fail("weight '" + w.name + "' has " + std::to_string(w.elements()) +
                    " elements for rows of " + std::to_string(width) +
                    (layer ? "" : " (nor does it divide them into groups)"));
    if (i == 0) step.norm_width = w.elements();
    INGOT_ASSIGN_OR_RETURN(const float* f, p.weights().asF32(p.weight(i)));
    (i == 0 ? step.norm : step.bias) = f;
  }
  step.epsilon = static_cast<float>(
      p.paramFloat("epsilon", p.artifact().manifest().config()->rms_norm_eps()));
  return okStatus();
}

Status runNormCpu(CpuStep& cpu, const PlannedStep& s) {
  const float* x = cpu.buffer(s.inputs[0]);
  float* out = cpu.buffer(s.outputs[0]);
  const int64_t D = cpu.plan->buffers[s.inputs[0]].width;
  const bool layer = s.op == schema::OpKind::LayerNorm;
  // A row of G groups is G rows of norm_width features: rows [t0, t1) are groups
  // [t0 * G, t1 * G).
  const int64_t G = D / s.norm_width;
  cpu.rows(D, [&](int64_t t0, int64_t t1) {
    if (layer) layerNormRows(x, s.norm, s.bias, D, s.epsilon, out, t0, t1);
    else rmsNormRows(x, s.norm, s.norm_width, s.epsilon, out, t0 * G, t1 * G);
  });
  return okStatus();
}

Status planAddRmsNorm(StepPlanner& p, PlannedStep& step) {
  INGOT_RETURN_IF_ERROR(p.needCounts(2, 2, 1, 1));
  const int64_t width = p.programPlan().buffers[step.inputs[0]].width;
  INGOT_RETURN_IF_ERROR(p.needActivation(step.inputs[0], 0, "input"));
  INGOT_RETURN_IF_ERROR(p.needActivation(step.inputs[1], width, "residual"));
  INGOT_RETURN_IF_ERROR(p.needActivation(step.outputs[0], width, "sum"));
  INGOT_RETURN_IF_ERROR(p.needActivation(step.outputs[1], width, "output"));
  INGOT_ASSIGN_OR_RETURN(WeightView w, p.weights().dense(p.weight(0)));
  if (w.elements() != width)
    return p.fail("weight '" + w.name + "' has " + std::to_string(w.elements()) +
                  " elements for rows of " + std::to_string(width));
  INGOT_ASSIGN_OR_RETURN(step.norm, p.weights().asF32(p.weight(0)));
  step.norm_width = width;
  step.epsilon = static_cast<float>(
      p.paramFloat("epsilon", p.artifact().manifest().config()->rms_norm_eps()));
  return okStatus();
}

Status runAddRmsNormCpu(CpuStep& cpu, const PlannedStep& s) {
  const float* x = cpu.buffer(s.inputs[0]);
  const float* residual = cpu.buffer(s.inputs[1]);
  float* sum = cpu.buffer(s.outputs[0]);  // may be the residual's own storage
  float* out = cpu.buffer(s.outputs[1]);
  const int64_t D = cpu.plan->buffers[s.inputs[0]].width;
  cpu.rows(D, [&](int64_t t0, int64_t t1) {
    addRange(residual, x, sum, t0 * D, t1 * D);
    rmsNormRows(sum, s.norm, D, s.epsilon, out, t0, t1);
  });
  return okStatus();
}

}  // namespace ingot
