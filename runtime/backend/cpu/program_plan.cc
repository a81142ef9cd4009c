// planProgram: validates a program (programs[0], the main one, by default) once at load so that step() never meets a surprise.
#include "runtime/backend/cpu/program_plan.h"

#include <algorithm>
#include <map>
#include <string>

#include "runtime/dist/communicator.h"

namespace ingot {
namespace {

using schema::BufferKind;
using schema::DType;
using schema::OpKind;

std::string str(int64_t v) { return std::to_string(v); }

const schema::ParamDef* findParam(const schema::ProgramStepDef& step, const char* name) {
  if (!step.params()) return nullptr;
  for (const schema::ParamDef* p : *step.params())
    if (p->name()->str() == name) return p;
  return nullptr;
}

/// Builds one step's plan; `where` prefixes its errors.
class StepPlanner {
 public:
  StepPlanner(const Artifact& artifact, WeightStore& weights, ProgramPlan& plan)
      : artifact_(artifact), weights_(weights), plan_(plan) {}

  Status plan(const schema::ProgramStepDef& def, PlannedStep& step);

 private:
  Status fail(const std::string& message) const { return invalidArgument(where_ + message); }
  int64_t paramInt(const char* name, int64_t fallback) const {
    const schema::ParamDef* p = findParam(*def_, name);
    return p ? p->i() : fallback;
  }
  double paramFloat(const char* name, double fallback) const {
    const schema::ParamDef* p = findParam(*def_, name);
    return p ? p->f() : fallback;
  }
  Status needCounts(size_t inputs, size_t outputs, size_t minWeights, size_t maxWeights) const;
  /// inputs[i] must be an activation of `width` floats per row (0: any).
  Status needActivation(int32_t buffer, int64_t width, const char* what) const;
  Status needInput(int32_t buffer, int32_t expected, const char* what) const;
  StatusOr<WeightView> matrix(size_t i) const;
  /// A linear step whose weights()[0] is quantized.
  Status quantizedLinear(PlannedStep& step);

  const Artifact& artifact_;
  WeightStore& weights_;
  ProgramPlan& plan_;
  const schema::ProgramStepDef* def_ = nullptr;
  PlannedStep* step_ = nullptr;
  std::string where_;
};

Status StepPlanner::needCounts(size_t inputs, size_t outputs, size_t minWeights,
                               size_t maxWeights) const {
  if (step_->inputs.size() != inputs)
    return fail("expected " + str(inputs) + " inputs, found " + str(step_->inputs.size()));
  if (step_->outputs.size() != outputs)
    return fail("expected " + str(outputs) + " outputs, found " + str(step_->outputs.size()));
  const size_t w = def_->weights() ? def_->weights()->size() : 0;
  if (w < minWeights || w > maxWeights)
    return fail("unexpected number of weights (" + str(w) + ")");
  return okStatus();
}

Status StepPlanner::needActivation(int32_t buffer, int64_t width, const char* what) const {
  const PlannedBuffer& b = plan_.buffers[buffer];
  if (b.kind != BufferKind::Activation)
    return fail(std::string(what) + " (buffer %" + str(buffer) + ") is not an activation");
  if (width > 0 && b.width != width)
    return fail(std::string(what) + " (buffer %" + str(buffer) + ") has width " + str(b.width) +
                ", expected " + str(width));
  return okStatus();
}

Status StepPlanner::needInput(int32_t buffer, int32_t expected, const char* what) const {
  if (buffer != expected)
    return fail(std::string(what) + " must be program input %" + str(expected) + ", found %" +
                str(buffer));
  return okStatus();
}

StatusOr<WeightView> StepPlanner::matrix(size_t i) const {
  const int32_t index = def_->weights()->Get(i);
  if (weights_.isQuantized(index)) {
    const schema::TensorDef& t = artifact_.tensor(index);
    return unimplemented(where_ + "weight '" + t.name()->str() + "' is quantized (" +
                         schema::EnumNameQuantKind(t.quant()->kind()) +
                         "): the CPU backend runs quantized weights only in linear layers "
                         "(embeddings and the output head stay unquantized)");
  }
  StatusOr<WeightView> w = weights_.dense(index);
  if (!w.ok()) return w.status().withPrefix(where_.substr(0, where_.size() - 2));
  if (w->shape.size() != 2) return fail("weight '" + w->name + "' is not a matrix");
  return w;
}

Status StepPlanner::quantizedLinear(PlannedStep& step) {
  StatusOr<QuantizedWeight> q = weights_.quantized(def_->weights()->Get(0));
  if (!q.ok()) return q.status().withPrefix(where_.substr(0, where_.size() - 2));
  const QuantMatrix& m = q->matrix;
  step.quantized = true;
  step.quant = m;
  step.weight.name = q->name;
  step.weight.shape = {m.N, m.K};
  INGOT_RETURN_IF_ERROR(needActivation(step.inputs[0], m.K, "input"));
  INGOT_RETURN_IF_ERROR(needActivation(step.outputs[0], m.N, "output"));
  // The other weights are the scheme's scale tensors (as the compiler lists them after the
  // matrix) and at most one bias.
  for (uint32_t i = 1; i < def_->weights()->size(); ++i) {
    const int32_t t = def_->weights()->Get(i);
    if (t == q->scale_tensor || t == q->zero_tensor || t == q->global_scale_tensor) continue;
    if (step.bias)
      return fail("weight #" + str(t) + " is neither a scale of '" + q->name + "' nor its bias");
    INGOT_ASSIGN_OR_RETURN(WeightView b, weights_.dense(t));
    if (b.elements() != m.N)
      return fail("bias '" + b.name + "' has " + str(b.elements()) + " elements for " + str(m.N) +
                  " outputs");
    INGOT_ASSIGN_OR_RETURN(step.bias, weights_.asF32(t));
  }
  plan_.matrix_bytes += m.bytes();
  return okStatus();
}

Status StepPlanner::plan(const schema::ProgramStepDef& def, PlannedStep& step) {
  def_ = &def;
  step_ = &step;
  where_ = "step " + str(&step - plan_.steps.data()) + " (" +
           schema::EnumNameOpKind(def.op()) + "): ";
  step.op = def.op();
  if (def.inputs()) step.inputs.assign(def.inputs()->begin(), def.inputs()->end());
  if (def.outputs()) step.outputs.assign(def.outputs()->begin(), def.outputs()->end());
  const KvCacheLayout& kv = plan_.kv_layout;

  switch (def.op()) {
    case OpKind::Embedding: {
      INGOT_RETURN_IF_ERROR(needCounts(1, 1, 1, 1));
      INGOT_RETURN_IF_ERROR(needInput(step.inputs[0], kInputTokens, "token ids"));
      INGOT_ASSIGN_OR_RETURN(step.weight, matrix(0));
      step.vocab_start = paramInt("vocab_start", -1);
      if (step.vocab_start >= 0) {
        // A vocab-parallel shard: rows [vocab_start, vocab_start + rows) of the table.
        if (step.vocab_start + step.weight.rows() > plan_.vocab_size)
          return fail("table shard of " + str(step.weight.rows()) + " rows from vocab_start " +
                      str(step.vocab_start) + " runs past the vocabulary of " +
                      str(plan_.vocab_size));
      } else if (findParam(def, "vocab_start")) {
        return fail("vocab_start " + str(step.vocab_start) + " is negative");
      } else if (step.weight.rows() < plan_.vocab_size) {
        return fail("table has " + str(step.weight.rows()) + " rows for a vocabulary of " +
                    str(plan_.vocab_size));
      }
      return needActivation(step.outputs[0], step.weight.cols(), "output");
    }
    case OpKind::RmsNorm:
    case OpKind::LayerNorm: {
      const bool layer = def.op() == OpKind::LayerNorm;
      INGOT_RETURN_IF_ERROR(needCounts(1, 1, layer ? 2 : 1, layer ? 2 : 1));
      const int64_t width = plan_.buffers[step.inputs[0]].width;
      INGOT_RETURN_IF_ERROR(needActivation(step.inputs[0], 0, "input"));
      INGOT_RETURN_IF_ERROR(needActivation(step.outputs[0], width, "output"));
      for (size_t i = 0; i < (layer ? 2u : 1u); ++i) {
        INGOT_ASSIGN_OR_RETURN(WeightView w, weights_.dense(def.weights()->Get(i)));
        if (w.elements() != width)
          return fail("weight '" + w.name + "' has " + str(w.elements()) + " elements for rows of " +
                      str(width));
        INGOT_ASSIGN_OR_RETURN(const float* f, weights_.asF32(def.weights()->Get(i)));
        (i == 0 ? step.norm : step.bias) = f;
      }
      step.epsilon = static_cast<float>(
          paramFloat("epsilon", artifact_.manifest().config()->rms_norm_eps()));
      return okStatus();
    }
    case OpKind::Linear: {
      const size_t w = def.weights() ? def.weights()->size() : 0;
      INGOT_RETURN_IF_ERROR(needCounts(1, 1, 1, 4));  // weight, bias, up to two scales
      if (weights_.isQuantized(def.weights()->Get(0))) return quantizedLinear(step);
      if (w > 2) return fail("an unquantized linear takes a weight and a bias, found " + str(w) +
                             " weights");
      INGOT_ASSIGN_OR_RETURN(step.weight, matrix(0));
      INGOT_RETURN_IF_ERROR(needActivation(step.inputs[0], step.weight.cols(), "input"));
      INGOT_RETURN_IF_ERROR(needActivation(step.outputs[0], step.weight.rows(), "output"));
      if (w == 2) {
        INGOT_ASSIGN_OR_RETURN(WeightView b, weights_.dense(def.weights()->Get(1)));
        if (b.elements() != step.weight.rows())
          return fail("bias '" + b.name + "' has " + str(b.elements()) + " elements for " +
                      str(step.weight.rows()) + " outputs");
        INGOT_ASSIGN_OR_RETURN(step.bias, weights_.asF32(def.weights()->Get(1)));
      }
      plan_.matrix_bytes += step.weight.bytes();
      return okStatus();
    }
    case OpKind::Rope: {
      INGOT_RETURN_IF_ERROR(needCounts(2, 1, 0, 0));
      INGOT_RETURN_IF_ERROR(needInput(step.inputs[1], kInputPositions, "positions"));
      step.num_heads = paramInt("num_heads", 0);
      step.head_dim = paramInt("head_dim", 0);
      const int64_t rotary = paramInt("rotary_dim", step.head_dim);
      if (step.num_heads <= 0 || step.head_dim <= 0 || rotary <= 0 || rotary > step.head_dim ||
          rotary % 2 != 0)
        return fail("bad num_heads/head_dim/rotary_dim params");
      const int64_t width = step.num_heads * step.head_dim;
      INGOT_RETURN_IF_ERROR(needActivation(step.inputs[0], width, "input"));
      INGOT_RETURN_IF_ERROR(needActivation(step.outputs[0], width, "output"));
      RopeScalingParams scaling;
      scaling.kind = static_cast<RopeScaling>(paramInt("rope_scaling", 0));
      scaling.factor = paramFloat("rope_factor", 1.0);
      scaling.low_freq_factor = paramFloat("rope_low_freq_factor", 1.0);
      scaling.high_freq_factor = paramFloat("rope_high_freq_factor", 4.0);
      scaling.original_max_position = paramInt("rope_original_max_position", 0);
      if (scaling.kind == RopeScaling::kYarn)
        return unimplemented(where_ + "yarn rope scaling is not supported by the CPU backend yet");
      if (scaling.kind != RopeScaling::kNone && scaling.kind != RopeScaling::kLinear &&
          scaling.kind != RopeScaling::kLlama3)
        return fail("unknown rope_scaling kind " + str(static_cast<int>(scaling.kind)));
      if (scaling.kind == RopeScaling::kLlama3 &&
          (scaling.original_max_position <= 0 || scaling.factor <= 0 ||
           scaling.high_freq_factor == scaling.low_freq_factor))
        return fail("bad llama3 rope scaling params");
      const double theta = paramFloat("theta", 0.0);
      if (!(theta > 0)) return fail("theta must be positive");
      step.inv_freq = ropeInverseFrequencies(theta, rotary, scaling);
      return okStatus();
    }
    case OpKind::KvWrite: {
      INGOT_RETURN_IF_ERROR(needCounts(4, 1, 0, 0));
      INGOT_RETURN_IF_ERROR(needInput(step.inputs[0], kInputKvCache, "cache"));
      INGOT_RETURN_IF_ERROR(needInput(step.outputs[0], kInputKvCache, "result cache"));
      INGOT_RETURN_IF_ERROR(needInput(step.inputs[3], kInputSlotMapping, "slot_mapping"));
      INGOT_RETURN_IF_ERROR(needActivation(step.inputs[1], kv.rowFloats(), "keys"));
      INGOT_RETURN_IF_ERROR(needActivation(step.inputs[2], kv.rowFloats(), "values"));
      step.layer = paramInt("layer", -1);
      if (step.layer < 0 || step.layer >= kv.num_layers)
        return fail("layer " + str(step.layer) + " is outside the cache's " + str(kv.num_layers));
      return okStatus();
    }
    case OpKind::Attention: {
      if (step.inputs.size() < 5 || step.outputs.size() != 1 ||
          (def.weights() && def.weights()->size() != 0))
        return fail("expected inputs [q, cache, block_tables, seq_lens, query_start, extra...]");
      INGOT_RETURN_IF_ERROR(needInput(step.inputs[1], kInputKvCache, "cache"));
      INGOT_RETURN_IF_ERROR(needInput(step.inputs[2], kInputBlockTables, "block_tables"));
      INGOT_RETURN_IF_ERROR(needInput(step.inputs[3], kInputSeqLens, "seq_lens"));
      INGOT_RETURN_IF_ERROR(needInput(step.inputs[4], kInputQueryStart, "query_start"));
      AttentionParams& a = step.attention;
      a.layer = paramInt("layer", -1);
      a.num_heads = paramInt("num_heads", 0);
      a.num_kv_heads = paramInt("num_kv_heads", 0);
      a.head_dim = paramInt("head_dim", 0);
      a.scale = static_cast<float>(paramFloat("scale", 0.0));
      if (a.layer < 0 || a.layer >= kv.num_layers) return fail("layer out of range");
      if (a.num_kv_heads != kv.num_kv_heads || a.head_dim != kv.head_dim)
        return fail("num_kv_heads/head_dim disagree with the KV cache");
      if (a.num_heads <= 0 || a.num_heads % a.num_kv_heads != 0)
        return fail("num_heads must be a positive multiple of num_kv_heads");
      INGOT_RETURN_IF_ERROR(needActivation(step.inputs[0], a.num_heads * a.head_dim, "queries"));
      INGOT_RETURN_IF_ERROR(needActivation(step.outputs[0], a.num_heads * a.head_dim, "output"));
      for (size_t i = 5; i < step.inputs.size(); ++i) {
        const int32_t b = step.inputs[i];
        if (b < kNumStepInputs || plan_.buffers[b].kind != BufferKind::Input)
          return fail("extra operand %" + str(b) + " is not a program input after the eight");
        step.extra_inputs.push_back(b - kNumStepInputs);
      }
      const int32_t v = def.attention_variant();
      if (v >= 0) {
        const schema::AttentionVariantDef* var = artifact_.manifest().attention_variants()->Get(v);
        auto decode = [&](const flatbuffers::Vector<uint8_t>* bytes,
                          const RegionProgram** out) -> Status {
          if (!bytes || bytes->size() == 0) return okStatus();
          StatusOr<RegionProgram> p = decodeRegionBytecode(bytes->data(), bytes->size());
          if (!p.ok()) return dataLoss(where_ + "attention variant " + str(v) + ": " +
                                       p.status().message());
          plan_.regions.push_back(std::make_unique<RegionProgram>(std::move(*p)));
          *out = plan_.regions.back().get();
          return okStatus();
        };
        INGOT_RETURN_IF_ERROR(decode(var->mask_bytecode(), &a.variant.mask));
        INGOT_RETURN_IF_ERROR(decode(var->score_bytecode(), &a.variant.score));
        if (a.variant.mask && a.variant.mask->kind() != RegionKind::kMask)
          return fail("mask bytecode is not a mask region");
        if (a.variant.score && a.variant.score->kind() != RegionKind::kScore)
          return fail("score bytecode is not a score region");
        a.variant.analyze();
      }
      return okStatus();
    }
    case OpKind::SiluMul:
    case OpKind::GeluMul:
    case OpKind::Add: {
      INGOT_RETURN_IF_ERROR(needCounts(2, 1, 0, 0));
      const int64_t width = plan_.buffers[step.outputs[0]].width;
      INGOT_RETURN_IF_ERROR(needActivation(step.outputs[0], 0, "output"));
      INGOT_RETURN_IF_ERROR(needActivation(step.inputs[0], width, "lhs"));
      return needActivation(step.inputs[1], width, "rhs");
    }
    case OpKind::Logits: {
      INGOT_RETURN_IF_ERROR(needCounts(2, 1, 1, 1));
      INGOT_RETURN_IF_ERROR(needInput(step.inputs[1], kInputLogitRows, "rows"));
      INGOT_ASSIGN_OR_RETURN(step.weight, matrix(0));
      INGOT_RETURN_IF_ERROR(needActivation(step.inputs[0], step.weight.cols(), "hidden"));
      PlannedBuffer& out = plan_.buffers[step.outputs[0]];
      if (out.kind == BufferKind::Activation && plan_.world_size > 1 &&
          out.width == step.weight.rows()) {
        // A vocab-parallel head: this rank's slice of the logits, gathered by a later step.
        out.logit_rows = true;
      } else if (out.kind != BufferKind::Output || out.width != step.weight.rows()) {
        return fail("output must be the program's logits output of width " +
                    str(step.weight.rows()) +
                    (plan_.world_size > 1 ? " (or, sharded, an activation of that width)" : ""));
      }
      plan_.matrix_bytes += step.weight.bytes();
      return okStatus();
    }
    case OpKind::AllReduce:
    case OpKind::AllGather: {
      INGOT_RETURN_IF_ERROR(needCounts(1, 1, 0, 0));
      INGOT_RETURN_IF_ERROR(needActivation(step.inputs[0], 0, "input"));
      const PlannedBuffer& in = plan_.buffers[step.inputs[0]];
      PlannedBuffer& out = plan_.buffers[step.outputs[0]];
      const bool gather = def.op() == OpKind::AllGather;
      const int64_t width = gather ? in.width * plan_.world_size : in.width;
      if (out.width != width)
        return fail("output (buffer %" + str(step.outputs[0]) + ") has width " + str(out.width) +
                    ", expected " + str(width) +
                    (gather ? " (input width x world size " + str(plan_.world_size) + ")" : ""));
      if (out.kind == BufferKind::Output) {
        // The gathered logits: one row per logit row, straight into the step's result.
        if (!gather || !in.logit_rows)
          return fail("only an all_gather of the head's logits may write the logits output");
        return okStatus();
      }
      INGOT_RETURN_IF_ERROR(needActivation(step.outputs[0], width, "output"));
      out.logit_rows = in.logit_rows;
      return okStatus();
    }
    default:
      return unimplemented(where_ + "op is not supported by the CPU backend yet");
  }
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
  if (m.config()->kv_block_size() != plan.kv_layout.block_size)
    return invalidArgument("kv_cache block size disagrees with the model config");

  // Steps, then activation lifetimes -> storage slots.
  const size_t numSteps = program.steps() ? program.steps()->size() : 0;
  plan.steps.resize(numSteps);
  StepPlanner planner(artifact, weights, plan);
  std::vector<int32_t> lastUse(numBuffers, -1), producer(numBuffers, -1);
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
      lastUse[in] = static_cast<int32_t>(s);
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

  std::vector<int32_t> freeSlots;
  for (size_t s = 0; s < numSteps; ++s) {
    for (int32_t out : plan.steps[s].outputs) {
      PlannedBuffer& b = plan.buffers[out];
      if (b.kind != BufferKind::Activation) continue;
      if (!freeSlots.empty()) {
        b.slot = freeSlots.back();
        freeSlots.pop_back();
      } else {
        b.slot = static_cast<int32_t>(plan.slot_widths.size());
        plan.slot_widths.push_back(0);
      }
      plan.slot_widths[b.slot] = std::max(plan.slot_widths[b.slot], b.width);
    }
    std::vector<int32_t> touched(plan.steps[s].inputs);
    touched.insert(touched.end(), plan.steps[s].outputs.begin(), plan.steps[s].outputs.end());
    for (int32_t buf : touched) {
      PlannedBuffer& b = plan.buffers[buf];
      if (b.kind != BufferKind::Activation || b.slot < 0) continue;
      const bool dead = lastUse[buf] <= static_cast<int32_t>(s);
      const bool alreadyFree =
          std::find(freeSlots.begin(), freeSlots.end(), b.slot) != freeSlots.end();
      if (dead && !alreadyFree) freeSlots.push_back(b.slot);
    }
  }
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
