// rope: rotary position embedding of each head's first rotary_dim dims (no scaling, linear,
// llama3); rope_kv_write: the queries' and keys' rope and the KV write of one layer.
#include <cmath>

#include "runtime/backend/cpu/cpu_ops.h"
#include "runtime/backend/cpu/cpu_step.h"
#include "runtime/backend/ops/op_functions.h"
#include "runtime/backend/ops/step_planner.h"

namespace ingot {

namespace {

/// The rope params every rope step has (head_dim, rotary_dim, scaling, theta) into
/// step.head_dim and step.inv_freq.
Status planRopeFrequencies(StepPlanner& p, PlannedStep& step) {
  step.head_dim = p.paramInt("head_dim", 0);
  const int64_t rotary = p.paramInt("rotary_dim", step.head_dim);
  if (step.head_dim <= 0 || rotary <= 0 || rotary > step.head_dim || rotary % 2 != 0)
    return p.fail("bad head_dim/rotary_dim params");
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
  // Frequency factors (Llama 3 GGUFs' rope_freqs), a weight: each divides one frequency.
  if (p.numWeights() == 1) {
    INGOT_ASSIGN_OR_RETURN(WeightView w, p.weights().dense(p.weight(0)));
    if (w.elements() != static_cast<int64_t>(step.inv_freq.size()))
      return p.fail("frequency factors '" + w.name + "' have " + std::to_string(w.elements()) +
                    " elements for " + std::to_string(step.inv_freq.size()) + " rotated pairs");
    if (scaling.kind != RopeScaling::kNone)
      return p.fail("frequency factors and a rope_scaling param both rescale the frequencies");
    INGOT_ASSIGN_OR_RETURN(const float* factors, p.weights().asF32(p.weight(0)));
    for (size_t i = 0; i < step.inv_freq.size(); ++i) {
      if (!(factors[i] > 0.0f) || !std::isfinite(factors[i]))
        return p.fail("frequency factor " + std::to_string(i) + " of '" + w.name +
                      "' is not a positive finite number");
      step.inv_freq[i] /= factors[i];
    }
  }
  return okStatus();
}

}  // namespace

Status planRope(StepPlanner& p, PlannedStep& step) {
  INGOT_RETURN_IF_ERROR(p.needCounts(2, 1, 0, 1));
  INGOT_RETURN_IF_ERROR(p.needInput(step.inputs[1], kInputPositions, "positions"));
  step.num_heads = p.paramInt("num_heads", 0);
  if (step.num_heads <= 0) return p.fail("bad num_heads param");
  INGOT_RETURN_IF_ERROR(planRopeFrequencies(p, step));
  const int64_t width = step.num_heads * step.head_dim;
  INGOT_RETURN_IF_ERROR(p.needActivation(step.inputs[0], width, "input"));
  return p.needActivation(step.outputs[0], width, "output");
}

Status planRopeKvWrite(StepPlanner& p, PlannedStep& step) {
  const KvCacheLayout& kv = p.programPlan().kv_layout;
  INGOT_RETURN_IF_ERROR(p.needCounts(6, 3, 0, 1));
  INGOT_RETURN_IF_ERROR(p.needInput(step.inputs[3], kInputPositions, "positions"));
  INGOT_RETURN_IF_ERROR(p.needInput(step.inputs[4], kInputKvCache, "cache"));
  INGOT_RETURN_IF_ERROR(p.needInput(step.inputs[5], kInputSlotMapping, "slot_mapping"));
  INGOT_RETURN_IF_ERROR(p.needInput(step.outputs[2], kInputKvCache, "result cache"));
  step.num_heads = p.paramInt("num_heads", 0);
  if (step.num_heads <= 0) return p.fail("bad num_heads param");
  INGOT_RETURN_IF_ERROR(planRopeFrequencies(p, step));
  if (p.paramInt("num_kv_heads", 0) != kv.num_kv_heads || step.head_dim != kv.head_dim)
    return p.fail("num_kv_heads/head_dim params disagree with the KV cache's " +
                  std::to_string(kv.num_kv_heads) + " heads of " + std::to_string(kv.head_dim));
  const int64_t width = step.num_heads * step.head_dim;
  INGOT_RETURN_IF_ERROR(p.needActivation(step.inputs[0], width, "queries"));
  INGOT_RETURN_IF_ERROR(p.needActivation(step.outputs[0], width, "rotated queries"));
  INGOT_RETURN_IF_ERROR(p.needActivation(step.inputs[1], kv.rowFloats(), "keys"));
  INGOT_RETURN_IF_ERROR(p.needActivation(step.outputs[1], kv.rowFloats(), "rotated keys"));
  INGOT_RETURN_IF_ERROR(p.needActivation(step.inputs[2], kv.rowFloats(), "values"));
  return planKvLayer(p, step);
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

Status runRopeKvWriteCpu(CpuStep& cpu, const PlannedStep& s) {
  const int32_t* positions = cpu.in->positions.data();
  const int64_t kvHeads = cpu.plan->kv_layout.num_kv_heads;
  const float* q = cpu.buffer(s.inputs[0]);
  const float* k = cpu.buffer(s.inputs[1]);
  float* qr = cpu.buffer(s.outputs[0]);  // may be the queries' own storage
  float* kr = cpu.buffer(s.outputs[1]);  // may be the keys' own storage
  cpu.rows((s.num_heads + kvHeads) * s.head_dim, [&](int64_t t0, int64_t t1) {
    ropeRows(q, positions, s.inv_freq, s.num_heads, s.head_dim, qr, t0, t1);
    ropeRows(k, positions, s.inv_freq, kvHeads, s.head_dim, kr, t0, t1);
  });
  return writeKvCpu(cpu, s.layer, kr, cpu.buffer(s.inputs[2]));
}

}  // namespace ingot
