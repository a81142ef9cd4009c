// attention: paged attention of a layer's queries over the KV pool, with the variant's
// mask and score regions (region bytecode).
#include "core/region/region_program.h"
#include "runtime/backend/cpu/cpu_step.h"
#include "runtime/backend/cpu/paged_attention.h"
#include "runtime/backend/ops/op_functions.h"
#include "runtime/backend/ops/step_planner.h"

namespace ingot {
namespace {

/// Decodes the variant's mask and score regions into the plan (stable addresses).
Status planVariant(StepPlanner& p, int32_t v, AttentionParams& a) {
  const schema::AttentionVariantDef* var = p.artifact().manifest().attention_variants()->Get(v);
  ProgramPlan& plan = p.programPlan();
  auto decode = [&](const flatbuffers::Vector<uint8_t>* bytes,
                    const RegionProgram** out) -> Status {
    if (!bytes || bytes->size() == 0) return okStatus();
    StatusOr<RegionProgram> program = decodeRegionBytecode(bytes->data(), bytes->size());
    if (!program.ok())
      return dataLoss(p.where() + "attention variant " + std::to_string(v) + ": " +
                      program.status().message());
    plan.regions.push_back(std::make_unique<RegionProgram>(std::move(*program)));
    *out = plan.regions.back().get();
    return okStatus();
  };
  INGOT_RETURN_IF_ERROR(decode(var->mask_bytecode(), &a.variant.mask));
  INGOT_RETURN_IF_ERROR(decode(var->score_bytecode(), &a.variant.score));
  if (a.variant.mask && a.variant.mask->kind() != RegionKind::kMask)
    return p.fail("mask bytecode is not a mask region");
  if (a.variant.score && a.variant.score->kind() != RegionKind::kScore)
    return p.fail("score bytecode is not a score region");
  a.variant.analyze();
  return okStatus();
}

}  // namespace

Status planAttention(StepPlanner& p, PlannedStep& step) {
  const ProgramPlan& plan = p.programPlan();
  const KvCacheLayout& kv = plan.kv_layout;
  if (step.inputs.size() < 5 || step.outputs.size() != 1 || p.numWeights() != 0)
    return p.fail("expected inputs [q, cache, block_tables, seq_lens, query_start, extra...]");
  INGOT_RETURN_IF_ERROR(p.needInput(step.inputs[1], kInputKvCache, "cache"));
  INGOT_RETURN_IF_ERROR(p.needInput(step.inputs[2], kInputBlockTables, "block_tables"));
  INGOT_RETURN_IF_ERROR(p.needInput(step.inputs[3], kInputSeqLens, "seq_lens"));
  INGOT_RETURN_IF_ERROR(p.needInput(step.inputs[4], kInputQueryStart, "query_start"));
  AttentionParams& a = step.attention;
  a.layer = p.paramInt("layer", -1);
  a.num_heads = p.paramInt("num_heads", 0);
  a.num_kv_heads = p.paramInt("num_kv_heads", 0);
  a.head_dim = p.paramInt("head_dim", 0);
  a.scale = static_cast<float>(p.paramFloat("scale", 0.0));
  if (a.layer < 0 || a.layer >= kv.num_layers) return p.fail("layer out of range");
  if (a.num_kv_heads != kv.num_kv_heads || a.head_dim != kv.head_dim)
    return p.fail("num_kv_heads/head_dim disagree with the KV cache");
  if (a.num_heads <= 0 || a.num_heads % a.num_kv_heads != 0)
    return p.fail("num_heads must be a positive multiple of num_kv_heads");
  INGOT_RETURN_IF_ERROR(p.needActivation(step.inputs[0], a.num_heads * a.head_dim, "queries"));
  INGOT_RETURN_IF_ERROR(p.needActivation(step.outputs[0], a.num_heads * a.head_dim, "output"));
  for (size_t i = 5; i < step.inputs.size(); ++i) {
    const int32_t b = step.inputs[i];
    if (b < kNumStepInputs || plan.buffers[b].kind != schema::BufferKind::Input)
      return p.fail("extra operand %" + std::to_string(b) +
                    " is not a program input after the eight");
    step.extra_inputs.push_back(b - kNumStepInputs);
  }
  const int32_t v = p.def().attention_variant();
  return v >= 0 ? planVariant(p, v, a) : okStatus();
}

Status runAttentionCpu(CpuStep& cpu, const PlannedStep& s) {
  const StepInputs& in = *cpu.in;
  AttentionBatch batch;
  batch.block_tables = in.block_tables.data();
  batch.max_blocks = in.max_blocks_per_request;
  batch.seq_lens = in.seq_lens.data();
  batch.query_start = in.query_start.data();
  batch.num_requests = in.num_requests;
  batch.num_tokens = cpu.tokens;
  AttentionParams params = s.attention;
  std::vector<RegionOperandView> extra;
  for (int32_t e : s.extra_inputs) extra.push_back(in.extra_inputs[e]);
  params.extra = extra.data();
  params.num_extra = extra.size();
  KvCacheView cache;
  if (cpu.kv_dtype == KvDtype::kFp8E4M3) {
    cache.codes = cpu.kv_codes;
    cache.scales = cpu.kv_scales;
    cache.decode = fp8RowsDecoder(cpu.kernels->level);
  } else {
    cache.f32 = cpu.kv_pool;
  }
  Status st = pagedAttention(cpu.buffer(s.inputs[0]), cache, cpu.plan->kv_layout, batch, params,
                             cpu.buffer(s.outputs[0]), *cpu.pool, *cpu.kernels,
                             *cpu.attention_scratch);
  return st.withPrefix(cpu.where() + " (attention)");
}

}  // namespace ingot
