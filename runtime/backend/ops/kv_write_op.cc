// kv_write: a layer's new keys and values into the paged KV pool (f32, or fp8 with per-block
// scales).
#include "runtime/backend/cpu/cpu_step.h"
#include "runtime/backend/cpu/kv_fp8.h"
#include "runtime/backend/cpu/paged_attention.h"
#include "runtime/backend/ops/op_functions.h"
#include "runtime/backend/ops/step_planner.h"

namespace ingot {

Status planKvWrite(StepPlanner& p, PlannedStep& step) {
  const KvCacheLayout& kv = p.programPlan().kv_layout;
  INGOT_RETURN_IF_ERROR(p.needCounts(4, 1, 0, 0));
  INGOT_RETURN_IF_ERROR(p.needInput(step.inputs[0], kInputKvCache, "cache"));
  INGOT_RETURN_IF_ERROR(p.needInput(step.outputs[0], kInputKvCache, "result cache"));
  INGOT_RETURN_IF_ERROR(p.needInput(step.inputs[3], kInputSlotMapping, "slot_mapping"));
  INGOT_RETURN_IF_ERROR(p.needActivation(step.inputs[1], kv.rowFloats(), "keys"));
  INGOT_RETURN_IF_ERROR(p.needActivation(step.inputs[2], kv.rowFloats(), "values"));
  return planKvLayer(p, step);
}

Status planKvLayer(StepPlanner& p, PlannedStep& step) {
  const int64_t layers = p.programPlan().kv_layout.num_layers;
  step.layer = p.paramInt("layer", -1);
  if (step.layer < 0 || step.layer >= layers)
    return p.fail("layer " + std::to_string(step.layer) + " is outside the cache's " +
                  std::to_string(layers));
  return okStatus();
}

Status writeKvCpu(CpuStep& cpu, int64_t layer, const float* k, const float* v) {
  const KvCacheLayout& layout = cpu.plan->kv_layout;
  const int32_t* slots = cpu.in->slot_mapping.data();
  const int64_t T = cpu.tokens;
  if (cpu.kv_dtype == KvDtype::kFp8E4M3) {
    // Checked before any row is written, so a bad step leaves the pool as it was.
    INGOT_RETURN_IF_ERROR(checkKvRowsFinite(k, v, T, layout.rowFloats(), layer));
    // Blocks fill in slot order per (K/V, kv head): those pairs split over the pool.
    const Fp8KvPool fp8{cpu.kv_codes, cpu.kv_scales};
    const int64_t pairs = 2 * layout.num_kv_heads;
    auto write = [&](int64_t p0, int64_t p1) {
      kvWriteRowsFp8(fp8, layout, layer, k, v, slots, T, p0, p1);
    };
    if (T * 2 * layout.rowFloats() < CpuStep::kMinParallelElements) write(0, pairs);
    else cpu.pool->parallelRanges(pairs, 1, write);
    return okStatus();
  }
  float* cache = cpu.kv_pool;
  cpu.rows(2 * layout.rowFloats(), [&](int64_t t0, int64_t t1) {
    kvWriteRows(cache, layout, layer, k, v, slots, t0, t1);
  });
  return okStatus();
}

Status runKvWriteCpu(CpuStep& cpu, const PlannedStep& s) {
  return writeKvCpu(cpu, s.layer, cpu.buffer(s.inputs[1]), cpu.buffer(s.inputs[2]));
}

}  // namespace ingot
