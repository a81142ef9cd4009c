// CpuBackend: step-by-step execution of programs[0] with threads and run-time-chosen SIMD.
#include "runtime/backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <new>
#include <string>
#include <thread>

#include "runtime/backend/cpu/cpu_ops.h"
#include "runtime/backend/cpu/cpu_step.h"
#include "runtime/backend/cpu/kv_fp8.h"
#include "runtime/backend/cpu/paged_attention.h"
#include "runtime/backend/cpu/program_plan.h"
#include "runtime/backend/cpu/quant_linear.h"
#include "runtime/backend/cpu/thread_pool.h"
#include "runtime/backend/cpu/weight_store.h"
#include "runtime/backend/ops/op_definition.h"
#include "runtime/dist/communicator.h"

namespace ingot {

CpuBackend::CpuBackend() = default;
CpuBackend::~CpuBackend() = default;

int CpuBackend::numThreads() const { return pool_->size(); }
int32_t CpuBackend::numExtraInputs() const { return plan_->num_extra_inputs; }
uint64_t CpuBackend::matrixBytes() const { return plan_->matrix_bytes; }
uint64_t CpuBackend::kvPoolBytes() const {
  return kv_pool_.size() * sizeof(float) + kv_codes_.size() + kv_scales_.size() * sizeof(float);
}
uint64_t CpuBackend::weightBytes() const { return weights_->denseBytes(); }


StatusOr<std::unique_ptr<CpuBackend>> CpuBackend::create(const Artifact& artifact,
                                                         const CpuBackendOptions& options) {
  std::unique_ptr<CpuBackend> b(new CpuBackend());
  b->artifact_ = &artifact;
  const SimdLevel best = detectSimdLevel();
  const SimdLevel level = options.simd.value_or(best);
  if (level > best)
    return unimplemented(std::string("cpu backend: this CPU does not support ") +
                         simdLevelName(level));
  b->kernels_ = &cpuKernels(level);
  b->quant_kernels_ = options.quant_kernels ? options.quant_kernels : &quantKernels(level);
  StatusOr<int32_t> program_index =
      selectProgram(artifact, options.program, options.tp_rank, options.communicator);
  if (!program_index.ok()) return program_index.status().withPrefix("cpu backend");
  b->tp_rank_ = artifact.manifest().programs()->Get(*program_index)->tp_rank();
  b->comm_ = options.communicator;
  b->weights_ = std::make_unique<WeightStore>(artifact, b->tp_rank_);
  StatusOr<ProgramPlan> plan = planProgram(artifact, *b->weights_, *program_index);
  if (!plan.ok()) return plan.status().withPrefix("cpu backend");
  b->plan_ = std::make_unique<ProgramPlan>(std::move(*plan));

  const schema::ModelConfigDef& config = *artifact.manifest().config();
  b->shape_.vocab_size = config.vocab_size();
  b->shape_.kv_block_size = static_cast<int32_t>(b->plan_->kv_layout.block_size);
  int64_t blocks = options.num_kv_blocks;
  if (blocks == 0)
    blocks = (std::max<int64_t>(config.max_context(), 1) + b->shape_.kv_block_size - 1) /
             b->shape_.kv_block_size;
  if (blocks < 0) return invalidArgument("cpu backend: negative num_kv_blocks");
  b->num_kv_blocks_ = blocks;
  const KvCacheLayout& kvLayout = b->plan_->kv_layout;
  b->kv_dtype_ = options.kv_dtype.value_or(b->plan_->kv_dtype);
  const bool fp8 = b->kv_dtype_ == KvDtype::kFp8E4M3;
  const int64_t blockFloats = kvLayout.blockFloats();
  // Bytes per block: 4 per element (f32), or 1 per element plus 4 per block-head scale.
  const int64_t blockBytes = fp8 ? blockFloats + kvLayout.blockScales() * 4 : blockFloats * 4;
  if (blocks > 0 && blockBytes > INT64_MAX / blocks)
    return invalidArgument("cpu backend: a KV pool of " + std::to_string(blocks) +
                           " blocks is too large");
  try {
    if (fp8) {
      b->kv_codes_.assign(static_cast<size_t>(blocks * blockFloats), 0);
      b->kv_scales_.assign(static_cast<size_t>(blocks * kvLayout.blockScales()), fp8KvMinScale());
    } else {
      b->kv_pool_.assign(static_cast<size_t>(blocks * blockFloats), 0.0f);
    }
  } catch (const std::bad_alloc&) {
    return failedPrecondition("cpu backend: cannot allocate a " +
                              std::string(kvDtypeName(b->kv_dtype_)) + " KV pool of " +
                              std::to_string(blocks * blockBytes) + " bytes");
  }

  int threads = options.num_threads;
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  b->pool_ = std::make_unique<ThreadPool>(threads);
  b->attention_scratch_ = std::make_unique<AttentionScratch>();
  b->slots_.resize(b->plan_->slot_widths.size());
  // Programs compiled for speculative decoding take tree_start / tree_bits after the eight
  // inputs; a caller with no trees may leave them out (see step()).
  b->tree_inputs_ = programTakesTreeInputs(*artifact.manifest().programs()->Get(*program_index),
                                           b->plan_->num_extra_inputs);
  return b;
}

Status CpuBackend::copyKvBlocks(int64_t src, int64_t dst) {
  if (src < 0 || src >= num_kv_blocks_ || dst < 0 || dst >= num_kv_blocks_)
    return invalidArgument("copyKvBlocks: block " + std::to_string(src < 0 || src >= num_kv_blocks_
                                                                        ? src : dst) +
                           " is outside the pool of " + std::to_string(num_kv_blocks_));
  if (src == dst) return okStatus();
  if (kv_dtype_ == KvDtype::kFp8E4M3) {
    kvCopyBlockFp8({kv_codes_.data(), kv_scales_.data()}, plan_->kv_layout, src, dst);
    return okStatus();
  }
  const int64_t n = plan_->kv_layout.blockFloats();
  std::memcpy(kv_pool_.data() + dst * n, kv_pool_.data() + src * n, n * sizeof(float));
  return okStatus();
}

Status CpuBackend::copyKvSlots(const std::vector<std::pair<int32_t, int32_t>>& moves) {
  const KvCacheLayout& layout = plan_->kv_layout;
  const int64_t slots = num_kv_blocks_ * layout.block_size;
  for (const auto& [from, to] : moves)
    if (from < 0 || to < 0 || from >= slots || to >= slots)
      return invalidArgument("copyKvSlots: slot " + std::to_string(from < 0 || from >= slots ? from : to) +
                             " outside the pool of " + std::to_string(slots) + " slots");
  if (kv_dtype_ == KvDtype::kFp8E4M3) {
    kvCopySlotsFp8({kv_codes_.data(), kv_scales_.data()}, layout, moves);
    return okStatus();
  }
  const size_t rowBytes = static_cast<size_t>(layout.rowFloats()) * sizeof(float);
  for (const auto& [from, to] : moves) {
    if (from == to) continue;
    const int64_t fb = from / layout.block_size, fo = from % layout.block_size;
    const int64_t tb = to / layout.block_size, to_off = to % layout.block_size;
    for (int64_t layer = 0; layer < layout.num_layers; ++layer)
      for (int64_t kv = 0; kv < 2; ++kv)
        std::memcpy(kv_pool_.data() + layout.rowOffset(tb, layer, kv, to_off),
                    kv_pool_.data() + layout.rowOffset(fb, layer, kv, fo), rowBytes);
  }
  return okStatus();
}

Status CpuBackend::step(const StepInputs& given, std::vector<float>* logits) {
  step_started_ = false;
  INGOT_RETURN_IF_ERROR(given.validate(shape_, num_kv_blocks_));
  const StepInputs* in_ptr = &given;
  StepInputs with_trees;
  if (tree_inputs_ && given.extra_inputs.empty()) {
    // No tree anywhere: each request's tree starts at its KV length (plain causal).
    with_trees = given;
    no_tree_start_.assign(given.seq_lens.begin(), given.seq_lens.end());
    no_tree_bits_.assign(static_cast<size_t>(given.num_requests), 0);
    no_tree_shapes_[0] = given.num_requests;
    no_tree_shapes_[1] = given.num_requests;
    no_tree_shapes_[2] = 1;
    no_tree_shapes_[3] = 1;
    with_trees.extra_inputs = {
        {RegionType::kI32, no_tree_shapes_, 1, no_tree_start_.data()},
        {RegionType::kI32, no_tree_shapes_ + 1, 3, no_tree_bits_.data()}};
    in_ptr = &with_trees;
  }
  const StepInputs& inputs = *in_ptr;
  INGOT_RETURN_IF_ERROR(checkExtraInputs(*plan_, inputs));
  num_tokens_ = inputs.numTokens();
  for (size_t i = 0; i < slots_.size(); ++i) {
    const size_t need = static_cast<size_t>(num_tokens_ * plan_->slot_widths[i]);
    if (slots_[i].size() < need) slots_[i].resize(need);
  }
  logits->assign(inputs.logit_rows.size() * static_cast<size_t>(shape_.vocab_size), 0.0f);
  if (num_tokens_ == 0) return okStatus();
  step_started_ = true;
  CpuStep cpu;
  cpu.plan = plan_.get();
  cpu.in = &inputs;
  cpu.logits = logits;
  cpu.tokens = num_tokens_;
  cpu.pool = pool_.get();
  cpu.kernels = kernels_;
  cpu.quant_kernels = quant_kernels_;
  cpu.slots = &slots_;
  cpu.kv_dtype = kv_dtype_;
  cpu.kv_pool = kv_pool_.data();
  cpu.kv_codes = kv_codes_.data();
  cpu.kv_scales = kv_scales_.data();
  cpu.attention_scratch = attention_scratch_.get();
  cpu.comm = comm_;
  cpu.linear_observer = &linear_observer_;
  cpu.x_bf16 = &x_bf16_;
  cpu.xq = &xq_;
  cpu.gathered = &gathered_;
  cpu.gather_scratch = &gather_scratch_;
  cpu.gate_rows = &gate_rows_;
  for (size_t i = 0; i < plan_->steps.size(); ++i) {
    const PlannedStep& s = plan_->steps[i];
    cpu.index = i;
    INGOT_RETURN_IF_ERROR(s.definition->run_cpu(cpu, s));
  }
  return okStatus();
}

double CpuBackend::attentionMacCost() const {
  if (!kernels_->bf16_activations) return 1.0;
  for (const PlannedStep& s : plan_->steps)
    if ((s.op == schema::OpKind::Linear || s.op == schema::OpKind::GatedLinear) &&
        s.weight.type == WeightType::kBF16)
      return 2.0;
  return 1.0;
}

}  // namespace ingot
