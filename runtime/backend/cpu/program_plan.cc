// planProgram: validates a program (programs[0], the main one, by default) once at load so that step() never meets a surprise.
#include "runtime/backend/cpu/program_plan.h"

#include <algorithm>
#include <map>
#include <string>

#include "core/artifact/slot_plan.h"
#include "runtime/backend/ops/op_definition.h"
#include "runtime/backend/ops/step_planner.h"
#include "runtime/dist/communicator.h"

namespace ingot {
namespace {

using schema::BufferKind;
using schema::DType;
using schema::OpKind;

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

namespace {

/// The program's buffers: the eight step inputs, the kv_cache's layout and dtype, extra
/// inputs, and each activation's row width.
Status planBuffers(const schema::ProgramDef& program, ProgramPlan& plan) {
  const auto* buffers = program.buffers();
  const size_t numBuffers = buffers ? buffers->size() : 0;
  if (numBuffers < kNumStepInputs) return invalidArgument("program has fewer than 8 buffers");
  static const char* kInputNames[] = {"tokens", "positions", "kv_cache", "block_tables",
                                      "seq_lens", "query_start", "slot_mapping", "logit_rows"};
  plan.buffers.resize(numBuffers);
  for (size_t i = 0; i < numBuffers; ++i) {
    const schema::BufferDef& b = *buffers->Get(i);
    PlannedBuffer& pb = plan.buffers[i];
    pb.kind = b.kind();
    std::vector<int64_t> shape;
    if (b.shape()) shape.assign(b.shape()->begin(), b.shape()->end());
    const std::string where = "buffer %" + str(i) + ": ";
    if (i == kInputKvCache) {
      if (b.kind() != BufferKind::KvCache) return invalidArgument(where + "must be the kv_cache");
      if (b.dtype() != DType::F32 && b.dtype() != DType::F8E4M3FN)
        return unimplemented(where + std::string("a ") + schema::EnumNameDType(b.dtype()) +
                             " KV cache is not supported by the CPU backend (f32 or "
                             "F8E4M3FN only)");
      plan.kv_dtype = b.dtype() == DType::F8E4M3FN ? KvDtype::kFp8E4M3 : KvDtype::kF32;
      if (shape.size() != 6 || shape[2] != 2 || shape[1] <= 0 || shape[3] <= 0 || shape[4] <= 0 ||
          shape[5] <= 0)
        return invalidArgument(where + "kv_cache shape must be [?, layers, 2, block, heads, dim]");
      plan.kv_layout = {shape[1], shape[3], shape[4], shape[5]};
      continue;
    }
    if (b.kind() == BufferKind::KvCache) return invalidArgument(where + "a second kv_cache");
    if (i < kNumStepInputs) {
      if (b.kind() != BufferKind::Input || b.dtype() != DType::I32)
        return invalidArgument(where + "must be the i32 program input '" + kInputNames[i] + "'");
      continue;
    }
    if (b.kind() == BufferKind::Input) {
      ++plan.num_extra_inputs;
      continue;
    }
    if (b.dtype() != DType::F32)
      return unimplemented(where + "activations of dtype " + schema::EnumNameDType(b.dtype()) +
                           " are not supported by the CPU backend yet (f32 only)");
    if (shape.empty() || shape[0] != -1)
      return invalidArgument(where + "the first dimension must be the dynamic token count");
    pb.width = 1;
    for (size_t d = 1; d < shape.size(); ++d) {
      if (shape[d] <= 0) return invalidArgument(where + "only the first dimension may be dynamic");
      pb.width *= shape[d];
    }
  }
  return okStatus();
}

/// Every step through its op definition, then the dataflow checks: each activation written
/// once and before it is read, a logits step, and the logits output written.
Status planSteps(const Artifact& artifact, WeightStore& weights, const schema::ProgramDef& program,
                 ProgramPlan& plan) {
  const size_t numBuffers = plan.buffers.size();
  const size_t numSteps = program.steps() ? program.steps()->size() : 0;
  plan.steps.resize(numSteps);
  StepPlanner planner(artifact, weights, plan);
  std::vector<int32_t> producer(numBuffers, -1);
  for (size_t s = 0; s < numSteps; ++s) {
    INGOT_RETURN_IF_ERROR(planner.plan(*program.steps()->Get(s), plan.steps[s]));
    for (int32_t in : plan.steps[s].inputs) {
      if (plan.buffers[in].kind == BufferKind::Activation && producer[in] < 0)
        return invalidArgument("step " + str(s) + " reads buffer %" + str(in) +
                               " before any step writes it");
      if (plan.buffers[in].logit_rows && plan.steps[s].op != OpKind::AllGather &&
          plan.steps[s].op != OpKind::AllReduce)
        return invalidArgument("step " + str(s) + " (" + schema::EnumNameOpKind(plan.steps[s].op) +
                               ") reads buffer %" + str(in) +
                               ", a slice of the logits that only a collective may read");
    }
    for (int32_t out : plan.steps[s].outputs) {
      if (plan.buffers[out].kind == BufferKind::Activation && producer[out] >= 0)
        return invalidArgument("buffer %" + str(out) + " is written by two steps");
      if (producer[out] < 0) producer[out] = static_cast<int32_t>(s);
    }
  }
  bool hasLogits = false;
  for (const PlannedStep& s : plan.steps) hasLogits |= s.op == OpKind::Logits;
  if (!hasLogits) return invalidArgument("program has no logits step");
  bool writesLogits = false;
  for (const PlannedStep& s : plan.steps)
    for (int32_t out : s.outputs) writesLogits |= plan.buffers[out].kind == BufferKind::Output;
  if (!writesLogits) return invalidArgument("no step writes the program's logits output");

  return okStatus();
}

/// Activation slots: the artifact's (format 1.3, checked against the program) or, for an
/// older artifact, planned here by the same planner the compiler runs.
Status planActivationSlots(const schema::ProgramDef& program, ProgramPlan& plan) {
  std::vector<SlotBuffer> buffers;
  for (const PlannedBuffer& b : plan.buffers)
    buffers.push_back({b.kind == BufferKind::Activation, b.width});
  std::vector<SlotStep> steps;
  for (const PlannedStep& s : plan.steps) steps.push_back({s.op, s.inputs, s.outputs});
  std::vector<int32_t> slots;
  bool planned = false;
  for (const schema::BufferDef* b : *program.buffers()) {
    slots.push_back(b->slot());
    planned |= b->slot() >= 0;
  }
  if (planned)
    INGOT_RETURN_IF_ERROR(checkSlots(buffers, steps, slots));
  else
    slots = planSlots(buffers, steps).slot;
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    PlannedBuffer& b = plan.buffers[i];
    b.slot = slots[i];
    if (b.slot < 0) continue;
    if (static_cast<size_t>(b.slot) >= plan.slot_widths.size()) plan.slot_widths.resize(b.slot + 1, 0);
    plan.slot_widths[b.slot] = std::max(plan.slot_widths[b.slot], b.width);
  }
  return okStatus();
}

}  // namespace

StatusOr<ProgramPlan> planProgram(const Artifact& artifact, WeightStore& weights,
                                  int32_t program_index) {
  const schema::Manifest& m = artifact.manifest();
  if (!m.programs() || m.programs()->size() == 0) return invalidArgument("artifact has no program");
  if (!m.config()) return invalidArgument("artifact has no model config");
  if (program_index < 0 || static_cast<uint32_t>(program_index) >= m.programs()->size())
    return invalidArgument("artifact has no program " + std::to_string(program_index) + " (it has " +
                           std::to_string(m.programs()->size()) + ")");
  const schema::ProgramDef& program = *m.programs()->Get(program_index);
  ProgramPlan plan;
  plan.vocab_size = m.config()->vocab_size();
  if (m.tensor_parallel()) plan.world_size = m.tensor_parallel()->world_size();
  INGOT_RETURN_IF_ERROR(planBuffers(program, plan));
  if (m.config()->kv_block_size() != plan.kv_layout.block_size)
    return invalidArgument("kv_cache block size disagrees with the model config");
  INGOT_RETURN_IF_ERROR(planSteps(artifact, weights, program, plan));
  INGOT_RETURN_IF_ERROR(planActivationSlots(program, plan));
  return plan;
}

bool programTakesTreeInputs(const schema::ProgramDef& program, int32_t num_extra) {
  auto input = [&](uint32_t i, const char* name, uint32_t rank) {
    if (!program.buffers() || program.buffers()->size() <= i) return false;
    const schema::BufferDef* buffer = program.buffers()->Get(i);
    return buffer->kind() == schema::BufferKind::Input && buffer->dtype() == schema::DType::I32 &&
           buffer->name() && buffer->name()->str() == name && buffer->shape() &&
           buffer->shape()->size() == rank;
  };
  return num_extra == 2 && input(8, "tree_start", 1) && input(9, "tree_bits", 3);
}

StatusOr<int32_t> selectProgram(const Artifact& artifact, int32_t program, int32_t tp_rank,
                                const Communicator* comm) {
  const schema::Manifest& m = artifact.manifest();
  const int32_t world = m.tensor_parallel() ? m.tensor_parallel()->world_size() : 1;
  const std::string n = std::to_string(world);
  if (comm && comm->worldSize() != world)
    return invalidArgument("the communicator's group has " + std::to_string(comm->worldSize()) +
                           " ranks, the artifact is sharded over " + n);
  if (world == 1) return program;
  if (!comm)
    return invalidArgument("the artifact is sharded over " + n +
                           " tensor-parallel ranks; a rank needs the group's communicator");
  if (comm->rank() != tp_rank)
    return invalidArgument("tp_rank " + std::to_string(tp_rank) +
                           " disagrees with the communicator's rank " + std::to_string(comm->rank()));
  if (program != 0)
    return unimplemented("draft programs of a tensor-parallel artifact are not supported");
  if (m.programs())
    for (uint32_t i = 0; i < m.programs()->size(); ++i) {
      const schema::ProgramDef* p = m.programs()->Get(i);
      if (p->role() == schema::ProgramRole::Main && p->tp_rank() == tp_rank)
        return static_cast<int32_t>(i);
    }
  return invalidArgument("the artifact (sharded over " + n + " ranks) has no main program for "
                         "tp_rank " + std::to_string(tp_rank));
}

Status checkExtraInputs(const ProgramPlan& plan, const StepInputs& inputs) {
  if (static_cast<int32_t>(inputs.extra_inputs.size()) < plan.num_extra_inputs)
    return invalidArgument("step: the program takes " + std::to_string(plan.num_extra_inputs) +
                           " extra inputs, " + std::to_string(inputs.extra_inputs.size()) +
                           " given");
  for (const PlannedStep& s : plan.steps) {
    if (s.op != schema::OpKind::Attention || s.extra_inputs.empty()) continue;
    std::vector<RegionOperandView> views;
    for (int32_t e : s.extra_inputs) views.push_back(inputs.extra_inputs[e]);
    for (const RegionProgram* p : {s.attention.variant.mask, s.attention.variant.score})
      if (p) INGOT_RETURN_IF_ERROR(p->checkOperands(views.data(), views.size()));
  }
  return okStatus();
}

}  // namespace ingot
