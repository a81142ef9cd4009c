// all_reduce (sum over the tensor-parallel group) and all_gather (ranks' slices side by side
// along the last dimension).
#include <cstring>

#include "runtime/backend/cpu/cpu_step.h"
#include "runtime/backend/ops/op_functions.h"
#include "runtime/backend/ops/step_planner.h"
#include "runtime/dist/communicator.h"

namespace ingot {

Status planCollective(StepPlanner& p, PlannedStep& step) {
  ProgramPlan& plan = p.programPlan();
  INGOT_RETURN_IF_ERROR(p.needCounts(1, 1, 0, 0));
  INGOT_RETURN_IF_ERROR(p.needActivation(step.inputs[0], 0, "input"));
  const PlannedBuffer& in = plan.buffers[step.inputs[0]];
  PlannedBuffer& out = plan.buffers[step.outputs[0]];
  const bool gather = step.op == schema::OpKind::AllGather;
  const int64_t width = gather ? in.width * plan.world_size : in.width;
  if (out.width != width)
    return p.fail("output (buffer %" + std::to_string(step.outputs[0]) + ") has width " +
                  std::to_string(out.width) + ", expected " + std::to_string(width) +
                  (gather ? " (input width x world size " + std::to_string(plan.world_size) + ")"
                          : ""));
  if (out.kind == schema::BufferKind::Output) {
    // The gathered logits: one row per logit row, straight into the step's result.
    if (!gather || !in.logit_rows)
      return p.fail("only an all_gather of the head's logits may write the logits output");
    return okStatus();
  }
  INGOT_RETURN_IF_ERROR(p.needActivation(step.outputs[0], width, "output"));
  out.logit_rows = in.logit_rows;
  return okStatus();
}

Status runCollectiveCpu(CpuStep& cpu, const PlannedStep& s) {
  const PlannedBuffer& src = cpu.plan->buffers[s.inputs[0]];
  const PlannedBuffer& dst = cpu.plan->buffers[s.outputs[0]];
  const int64_t rows =
      src.logit_rows ? static_cast<int64_t>(cpu.in->logit_rows.size()) : cpu.tokens;
  const float* x = cpu.buffer(s.inputs[0]);
  float* y = dst.kind == schema::BufferKind::Output ? cpu.logits->data() : cpu.buffer(s.outputs[0]);
  const int64_t n = rows * src.width;
  const std::string where = cpu.where();
  if (s.op == schema::OpKind::AllReduce) {
    if (n > 0) std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
    if (!cpu.comm) return okStatus();  // a group of one
    return cpu.comm->allReduceSum(y, n).withPrefix(where);
  }
  // all_gather along the last dimension: the ranks' [rows, W] slices side by side.
  const int64_t world = cpu.plan->world_size, W = src.width;
  if (!cpu.comm) {
    if (n > 0) std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
    return okStatus();
  }
  std::vector<float>& scratch = *cpu.gather_scratch;
  if (static_cast<int64_t>(scratch.size()) < world * n) scratch.resize(world * n);
  INGOT_RETURN_IF_ERROR(cpu.comm->allGather(x, n, scratch.data()).withPrefix(where));
  for (int64_t r = 0; r < world; ++r)
    for (int64_t t = 0; t < rows; ++t)
      std::memcpy(y + t * world * W + r * W, scratch.data() + r * n + t * W,
                  static_cast<size_t>(W) * sizeof(float));
  return okStatus();
}

}  // namespace ingot
