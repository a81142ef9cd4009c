// The plan and CPU functions of every op definition (runtime/backend/ops/*_op.cc), for the
// table in op_table.cc. Nothing else includes this.
#pragma once

#include "core/base/status.h"

namespace ingot {

class CpuStep;
class StepPlanner;
struct PlannedStep;

Status planEmbedding(StepPlanner& p, PlannedStep& step);
Status runEmbeddingCpu(CpuStep& cpu, const PlannedStep& step);
Status planNorm(StepPlanner& p, PlannedStep& step);  // rms_norm, layer_norm
Status runNormCpu(CpuStep& cpu, const PlannedStep& step);
Status planAddRmsNorm(StepPlanner& p, PlannedStep& step);
Status planRopeKvWrite(StepPlanner& p, PlannedStep& step);
Status runRopeKvWriteCpu(CpuStep& cpu, const PlannedStep& step);
/// The `layer` param of a step that writes the KV cache, checked against the cache.
Status planKvLayer(StepPlanner& p, PlannedStep& step);
/// kv_write's CPU half, shared with rope_kv_write: keys `k` and values `v` of `layer`.
Status writeKvCpu(CpuStep& cpu, int64_t layer, const float* k, const float* v);
Status runAddRmsNormCpu(CpuStep& cpu, const PlannedStep& step);
Status planLinear(StepPlanner& p, PlannedStep& step);
Status runLinearCpu(CpuStep& cpu, const PlannedStep& step);
Status planGatedLinear(StepPlanner& p, PlannedStep& step);
Status runGatedLinearCpu(CpuStep& cpu, const PlannedStep& step);
Status planLogits(StepPlanner& p, PlannedStep& step);
Status runLogitsCpu(CpuStep& cpu, const PlannedStep& step);
Status planRope(StepPlanner& p, PlannedStep& step);
Status runRopeCpu(CpuStep& cpu, const PlannedStep& step);
Status planKvWrite(StepPlanner& p, PlannedStep& step);
Status runKvWriteCpu(CpuStep& cpu, const PlannedStep& step);
Status planAttention(StepPlanner& p, PlannedStep& step);
Status runAttentionCpu(CpuStep& cpu, const PlannedStep& step);
Status planElementwise(StepPlanner& p, PlannedStep& step);  // silu_mul, gelu_mul, add
Status runElementwiseCpu(CpuStep& cpu, const PlannedStep& step);
Status planScale(StepPlanner& p, PlannedStep& step);
Status runScaleCpu(CpuStep& cpu, const PlannedStep& step);
Status planCollective(StepPlanner& p, PlannedStep& step);  // all_reduce, all_gather
Status runCollectiveCpu(CpuStep& cpu, const PlannedStep& step);

}  // namespace ingot
