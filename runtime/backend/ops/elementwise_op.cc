// silu_mul, gelu_mul and add: two activations of one width into a third; scale: one
// activation times a constant.
#include <cmath>
#include <string>

#include "runtime/backend/cpu/cpu_ops.h"
#include "runtime/backend/cpu/cpu_step.h"
#include "runtime/backend/ops/op_functions.h"
#include "runtime/backend/ops/step_planner.h"

namespace ingot {

Status planElementwise(StepPlanner& p, PlannedStep& step) {
  INGOT_RETURN_IF_ERROR(p.needCounts(2, 1, 0, 0));
  const int64_t width = p.programPlan().buffers[step.outputs[0]].width;
  INGOT_RETURN_IF_ERROR(p.needActivation(step.outputs[0], 0, "output"));
  INGOT_RETURN_IF_ERROR(p.needActivation(step.inputs[0], width, "lhs"));
  return p.needActivation(step.inputs[1], width, "rhs");
}

Status runElementwiseCpu(CpuStep& cpu, const PlannedStep& s) {
  const float* a = cpu.buffer(s.inputs[0]);
  const float* b = cpu.buffer(s.inputs[1]);
  float* out = cpu.buffer(s.outputs[0]);
  const int64_t W = cpu.plan->buffers[s.outputs[0]].width;
  const schema::OpKind op = s.op;
  cpu.rows(W, [&](int64_t t0, int64_t t1) {
    if (op == schema::OpKind::SiluMul) siluMulRange(a, b, out, t0 * W, t1 * W);
    else if (op == schema::OpKind::GeluMul) geluMulRange(a, b, out, t0 * W, t1 * W);
    else addRange(a, b, out, t0 * W, t1 * W);
  });
  return okStatus();
}

Status planScale(StepPlanner& p, PlannedStep& step) {
  INGOT_RETURN_IF_ERROR(p.needCounts(1, 1, 0, 0));
  const int64_t width = p.programPlan().buffers[step.outputs[0]].width;
  INGOT_RETURN_IF_ERROR(p.needActivation(step.outputs[0], 0, "output"));
  INGOT_RETURN_IF_ERROR(p.needActivation(step.inputs[0], width, "input"));
  if (!p.hasParam("factor")) return p.fail("has no 'factor' param");
  const double factor = p.paramFloat("factor", 1.0);
  if (!std::isfinite(static_cast<float>(factor)))
    return p.fail("its factor " + std::to_string(factor) + " is not a finite f32");
  step.factor = static_cast<float>(factor);
  return okStatus();
}

Status runScaleCpu(CpuStep& cpu, const PlannedStep& s) {
  const float* in = cpu.buffer(s.inputs[0]);
  float* out = cpu.buffer(s.outputs[0]);
  const int64_t W = cpu.plan->buffers[s.outputs[0]].width;
  cpu.rows(W, [&](int64_t t0, int64_t t1) { scaleRange(in, s.factor, out, t0 * W, t1 * W); });
  return okStatus();
}

}  // namespace ingot
