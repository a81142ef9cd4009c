// rope: rotary position embedding of each head's first rotary_dim dims (no scaling, linear,
// llama3).
#include "runtime/backend/cpu/cpu_ops.h"
#include "runtime/backend/cpu/cpu_step.h"
#include "runtime/backend/ops/op_functions.h"
#include "runtime/backend/ops/step_planner.h"

namespace ingot {

Status planRope(StepPlanner& p, PlannedStep& step) {
  INGOT_RETURN_IF_ERROR(p.needCounts(2, 1, 0, 0));
  INGOT_RETURN_IF_ERROR(p.needInput(step.inputs[1], kInputPositions, "positions"));
  step.num_heads = p.paramInt("num_heads", 0);
  step.head_dim = p.paramInt("head_dim", 0);
  const int64_t rotary = p.paramInt("rotary_dim", step.head_dim);
  if (step.num_heads <= 0 || step.head_dim <= 0 || rotary <= 0 || rotary > step.head_dim ||
      rotary % 2 != 0)
    return p.fail("bad num_heads/head_dim/rotary_dim params");
  const int64_t width = step.num_heads * step.head_dim;
  INGOT_RETURN_IF_ERROR(p.needActivation(step.inputs[0], width, "input"));
  INGOT_RETURN_IF_ERROR(p.needActivation(step.outputs[0], width, "output"));
  RopeScalingParams scaling;
  scaling.kind = static_cast<RopeScaling>(p.paramInt("rope_scaling", 0));
  scaling.factor = p.paramFloat("rope_factor", 1.0);
  scaling.low_freq_factor = p.paramFloat("rope_low_freq_factor", 1.0);
  scaling.high_freq_factor = p.paramFloat("rope_high_freq_factor", 4.0);
  scaling.original_max_position = p.paramInt("rope_original_max_position", 0);
  if (scaling.kind == RopeScaling::kYarn)
    return p.unsupported("yarn rope scaling is not supported by the CPU backend yet");
  if (scaling.kind != RopeScaling::kNone && scaling.kind != RopeScaling::kLinear &&
      scaling.kind != RopeScaling::kLlama3)
    return p.fail("unknown rope_scaling kind " + std::to_string(static_cast<int>(scaling.kind)));
  if (scaling.kind == RopeScaling::kLlama3 &&
      (scaling.original_max_position <= 0 || scaling.factor <= 0 ||
       scaling.high_freq_factor == scaling.low_freq_factor))
    return p.fail("bad llama3 rope scaling params");
  const double theta = p.paramFloat("theta", 0.0);
  if (!(theta > 0)) return p.fail("theta must be positive");
  step.inv_freq = ropeInverseFrequencies(theta, rotary, scaling);
  return okStatus();
}

Status runRopeCpu(CpuStep& cpu, const PlannedStep& s) {
  const float* x = cpu.buffer(s.inputs[0]);
  float* out = cpu.buffer(s.outputs[0]);
  const int32_t* positions = cpu.in->positions.data();
  cpu.rows(s.num_heads * s.head_dim, [&](int64_t t0, int64_t t1) {
    ropeRows(x, positions, s.inv_freq, s.num_heads, s.head_dim, out, t0, t1);
  });
  return okStatus();
}

}  // namespace ingot
