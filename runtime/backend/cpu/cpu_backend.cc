// CpuBackend: step-by-step execution of programs[0] with threads and run-time-chosen SIMD.
#include "runtime/backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <new>
#include <string>
#include <thread>

#include "runtime/backend/cpu/cpu_ops.h"
#include "runtime/backend/cpu/kv_fp8.h"
#include "runtime/backend/cpu/paged_attention.h"
#include "runtime/backend/cpu/program_plan.h"
#include "runtime/backend/cpu/quant_linear.h"
#include "runtime/backend/cpu/thread_pool.h"
#include "runtime/backend/cpu/weight_store.h"
#include "runtime/dist/communicator.h"

namespace ingot {
namespace {

using schema::OpKind;

/// Below this much work (multiply-adds or elements) a loop runs on the calling thread:
/// waking the workers costs more than it saves.
constexpr int64_t kMinParallelMacs = 1 << 16;
constexpr int64_t kMinParallelElements = 1 << 14;
/// Linear layers split their output rows in multiples of the kernels' row tile.
constexpr int64_t kRowGrain = 4;

}  // namespace

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

float* CpuBackend::bufferData(int32_t buffer) {
  return slots_[plan_->buffers[buffer].slot].data();
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
  for (size_t i = 0; i < plan_->steps.size(); ++i)
    INGOT_RETURN_IF_ERROR(runStep(i, inputs, logits));
  return okStatus();
}

double CpuBackend::attentionMacCost() const {
  if (!kernels_->bf16_activations) return 1.0;
  for (const PlannedStep& s : plan_->steps)
    if (s.op == OpKind::Linear && s.weight.type == WeightType::kBF16) return 2.0;
  return 1.0;
}

Status CpuBackend::runStep(size_t index, const StepInputs& in, std::vector<float>* logits) {
  const PlannedStep& s = plan_->steps[index];
  const int64_t T = num_tokens_;
  ThreadPool& pool = *pool_;
  // Row-parallel loop over the T tokens, inline when the work is small.
  auto rows = [&](int64_t width, const std::function<void(int64_t, int64_t)>& fn) {
    if (T * width < kMinParallelElements) fn(0, T);
    else pool.parallelRanges(T, 1, fn);
  };
  auto linear = [&](LinearArgs args, int64_t N) {
    const LinearKernel kernel = kernels_->linear[static_cast<int>(args.w_type)];
    if (kernels_->bf16_activations && args.w_type == WeightType::kBF16) {
      // Rounded once per call, read by every weight row.
      if (x_bf16_.size() < static_cast<size_t>(args.T * args.x_stride))
        x_bf16_.resize(args.T * args.x_stride);
      uint16_t* xb = x_bf16_.data();
      auto round = [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
          kernels_->round_to_bf16(args.x + t * args.x_stride, args.K, xb + t * args.x_stride);
      };
      // args.T, not the step's token count: the logits linear reads only gathered rows.
      if (args.T * args.K < kMinParallelElements) round(0, args.T);
      else pool.parallelRanges(args.T, 1, round);
      args.x_bf16 = xb;
    }
    if (args.T * N * args.K < kMinParallelMacs) kernel(args, 0, N);
    else pool.parallelRanges(N, kRowGrain, [&](int64_t n0, int64_t n1) { kernel(args, n0, n1); });
  };
  // y [T, N] = x [T, K] w^T + bias for a quantized w: activations prepared once per call
  // (the table's layout), then rows split over the pool as above.
  auto quantizedLinear = [&](const QuantMatrix& w, const float* x, const float* bias, float* y) {
    const QuantKernels& qk = *quant_kernels_;
    const int64_t stride = qk.prepared_floats(w);
    if (xq_.size() < static_cast<size_t>(T * stride)) xq_.resize(T * stride);
    float* xq = xq_.data();
    auto prepare = [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) qk.prepare(w, x + t * w.K, xq + t * stride);
    };
    if (T * w.K < kMinParallelElements) prepare(0, T);
    else pool.parallelRanges(T, 1, prepare);
    QuantLinearArgs a;
    a.w = &w;
    a.xq = xq;
    a.xq_stride = stride;
    a.bias = bias;
    a.y = y;
    a.y_stride = w.N;
    a.T = T;
    if (T * w.N * w.K < kMinParallelMacs) qk.linear(a, 0, w.N);
    else pool.parallelRanges(w.N, kRowGrain, [&](int64_t n0, int64_t n1) { qk.linear(a, n0, n1); });
  };

  switch (s.op) {
    case OpKind::Embedding: {
      float* out = bufferData(s.outputs[0]);
      const int64_t D = s.weight.cols();
      rows(D, [&](int64_t t0, int64_t t1) {
        if (s.vocab_start >= 0)
          embeddingShardRows(in.tokens.data(), s.weight.data, s.weight.type, s.vocab_start,
                             s.weight.rows(), D, out, t0, t1);
        else embeddingRows(in.tokens.data(), s.weight.data, s.weight.type, D, out, t0, t1);
      });
      return okStatus();
    }
    case OpKind::AllReduce:
    case OpKind::AllGather:
      return collective(index, in, logits);
    case OpKind::RmsNorm:
    case OpKind::LayerNorm: {
      const float* x = bufferData(s.inputs[0]);
      float* out = bufferData(s.outputs[0]);
      const int64_t D = plan_->buffers[s.inputs[0]].width;
      const bool layer = s.op == OpKind::LayerNorm;
      rows(D, [&](int64_t t0, int64_t t1) {
        if (layer) layerNormRows(x, s.norm, s.bias, D, s.epsilon, out, t0, t1);
        else rmsNormRows(x, s.norm, D, s.epsilon, out, t0, t1);
      });
      return okStatus();
    }
    case OpKind::Linear: {
      if (linear_observer_)
        linear_observer_(s.weight.name, bufferData(s.inputs[0]), T, s.weight.cols());
      if (s.quantized) {
        quantizedLinear(s.quant, bufferData(s.inputs[0]), s.bias, bufferData(s.outputs[0]));
        return okStatus();
      }
      LinearArgs a;
      a.K = s.weight.cols();
      a.x = bufferData(s.inputs[0]);
      a.x_stride = a.K;
      a.w = s.weight.data;
      a.w_type = s.weight.type;
      a.bias = s.bias;
      a.y = bufferData(s.outputs[0]);
      a.y_stride = s.weight.rows();
      a.T = T;
      linear(a, s.weight.rows());
      return okStatus();
    }
    case OpKind::Rope: {
      const float* x = bufferData(s.inputs[0]);
      float* out = bufferData(s.outputs[0]);
      rows(s.num_heads * s.head_dim, [&](int64_t t0, int64_t t1) {
        ropeRows(x, in.positions.data(), s.inv_freq, s.num_heads, s.head_dim, out, t0, t1);
      });
      return okStatus();
    }
    case OpKind::KvWrite: {
      const float* k = bufferData(s.inputs[1]);
      const float* v = bufferData(s.inputs[2]);
      if (kv_dtype_ == KvDtype::kFp8E4M3) {
        // Checked before any row is written, so a bad step leaves the pool as it was.
        const KvCacheLayout& layout = plan_->kv_layout;
        INGOT_RETURN_IF_ERROR(checkKvRowsFinite(k, v, T, layout.rowFloats(), s.layer));
        // Blocks fill in slot order per (K/V, kv head): those pairs split over the pool.
        const Fp8KvPool fp8{kv_codes_.data(), kv_scales_.data()};
        const int64_t pairs = 2 * layout.num_kv_heads;
        auto write = [&](int64_t p0, int64_t p1) {
          kvWriteRowsFp8(fp8, layout, s.layer, k, v, in.slot_mapping.data(), T, p0, p1);
        };
        if (T * 2 * layout.rowFloats() < kMinParallelElements) write(0, pairs);
        else pool.parallelRanges(pairs, 1, write);
        return okStatus();
      }
      float* cache = kv_pool_.data();
      rows(2 * plan_->kv_layout.rowFloats(), [&](int64_t t0, int64_t t1) {
        kvWriteRows(cache, plan_->kv_layout, s.layer, k, v, in.slot_mapping.data(), t0, t1);
      });
      return okStatus();
    }
    case OpKind::Attention: {
      AttentionBatch batch;
      batch.block_tables = in.block_tables.data();
      batch.max_blocks = in.max_blocks_per_request;
      batch.seq_lens = in.seq_lens.data();
      batch.query_start = in.query_start.data();
      batch.num_requests = in.num_requests;
      batch.num_tokens = T;
      AttentionParams params = s.attention;
      std::vector<RegionOperandView> extra;
      for (int32_t e : s.extra_inputs) extra.push_back(in.extra_inputs[e]);
      params.extra = extra.data();
      params.num_extra = extra.size();
      KvCacheView cache;
      if (kv_dtype_ == KvDtype::kFp8E4M3) {
        cache.codes = kv_codes_.data();
        cache.scales = kv_scales_.data();
        cache.decode = fp8RowsDecoder(kernels_->level);
      } else {
        cache.f32 = kv_pool_.data();
      }
      Status st = pagedAttention(bufferData(s.inputs[0]), cache, plan_->kv_layout,
                                 batch, params, bufferData(s.outputs[0]), pool, *kernels_,
                                 *attention_scratch_);
      return st.withPrefix("step " + std::to_string(index) + " (attention)");
    }
    case OpKind::SiluMul:
    case OpKind::GeluMul:
    case OpKind::Add: {
      const float* a = bufferData(s.inputs[0]);
      const float* b = bufferData(s.inputs[1]);
      float* out = bufferData(s.outputs[0]);
      const int64_t W = plan_->buffers[s.outputs[0]].width;
      rows(W, [&](int64_t t0, int64_t t1) {
        if (s.op == OpKind::SiluMul) siluMulRange(a, b, out, t0 * W, t1 * W);
        else if (s.op == OpKind::GeluMul) geluMulRange(a, b, out, t0 * W, t1 * W);
        else addRange(a, b, out, t0 * W, t1 * W);
      });
      return okStatus();
    }
    case OpKind::Logits: {
      const float* hidden = bufferData(s.inputs[0]);
      const int64_t D = s.weight.cols(), V = s.weight.rows();
      const int64_t L = static_cast<int64_t>(in.logit_rows.size());
      if (L == 0) return okStatus();
      if (static_cast<int64_t>(gathered_.size()) < L * D) gathered_.resize(L * D);
      for (int64_t r = 0; r < L; ++r)
        std::memcpy(gathered_.data() + r * D, hidden + in.logit_rows[r] * D, D * sizeof(float));
      LinearArgs a;
      a.x = gathered_.data();
      a.x_stride = D;
      a.w = s.weight.data;
      a.w_type = s.weight.type;
      // The full logits, or (vocab-parallel head) this rank's slice for an all_gather.
      const bool slice = plan_->buffers[s.outputs[0]].kind != schema::BufferKind::Output;
      a.y = slice ? bufferData(s.outputs[0]) : logits->data();
      a.y_stride = V;
      a.T = L;
      a.K = D;
      linear(a, V);
      return okStatus();
    }
    default:
      return internalError("step " + std::to_string(index) + ": op not planned");
  }
}

Status CpuBackend::collective(size_t index, const StepInputs& in, std::vector<float>* logits) {
  const PlannedStep& s = plan_->steps[index];
  const PlannedBuffer& src = plan_->buffers[s.inputs[0]];
  const PlannedBuffer& dst = plan_->buffers[s.outputs[0]];
  const int64_t rows = src.logit_rows ? static_cast<int64_t>(in.logit_rows.size()) : num_tokens_;
  const float* x = bufferData(s.inputs[0]);
  float* y = dst.kind == schema::BufferKind::Output ? logits->data() : bufferData(s.outputs[0]);
  const int64_t n = rows * src.width;
  const std::string where = "step " + std::to_string(index);
  if (s.op == OpKind::AllReduce) {
    if (n > 0) std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
    if (!comm_) return okStatus();  // a group of one
    return comm_->allReduceSum(y, n).withPrefix(where);
  }
  // all_gather along the last dimension: the ranks' [rows, W] slices side by side.
  const int64_t world = plan_->world_size, W = src.width;
  if (!comm_) {
    if (n > 0) std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
    return okStatus();
  }
  if (static_cast<int64_t>(gather_scratch_.size()) < world * n) gather_scratch_.resize(world * n);
  INGOT_RETURN_IF_ERROR(comm_->allGather(x, n, gather_scratch_.data()).withPrefix(where));
  for (int64_t r = 0; r < world; ++r)
    for (int64_t t = 0; t < rows; ++t)
      std::memcpy(y + t * world * W + r * W, gather_scratch_.data() + r * n + t * W,
                  static_cast<size_t>(W) * sizeof(float));
  return okStatus();
}

}  // namespace ingot
