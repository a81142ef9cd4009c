// One CUDA step: buffers sized for it, and every program step enqueued on the stream.
#include <algorithm>
#include <cstddef>

#include "core/kernels/attention_params.h"
#include "core/kernels/fused_params.h"
#include "core/kernels/kv_fp8_params.h"
#include "core/kernels/quant_params.h"
#include "core/kernels/quant_params.h"
#include "core/kernels/sampling_params.h"
#include "core/kernels/region_operands.h"
#include "runtime/backend/cuda/cuda_backend_state.h"
#include "runtime/backend/cuda/cuda_fp8_linear.h"

namespace ingot {

static_assert(sizeof(RowSampling) == sizeof(sampling::RowParams) &&
                  offsetof(RowSampling, temperature) == offsetof(sampling::RowParams, temperature) &&
                  offsetof(RowSampling, top_k) == offsetof(sampling::RowParams, top_k) &&
                  offsetof(RowSampling, top_p) == offsetof(sampling::RowParams, top_p) &&
                  offsetof(RowSampling, min_p) == offsetof(sampling::RowParams, min_p) &&
                  offsetof(RowSampling, u) == offsetof(sampling::RowParams, u),
              "RowSampling is copied to the GPU as the sampling kernel's RowParams");

namespace {

using schema::OpKind;

/// Threads per CTA of the fused kernels (codegen/cuda/kernels/fused_ops.cuh).
constexpr unsigned kFusedThreads = 256;

/// CTAs of a grid-stride fused kernel over `count` elements: enough for every element, at
/// most 32 per SM.
unsigned strideGrid(int64_t count, int sms) {
  const int64_t ctas = (count + kFusedThreads - 1) / kFusedThreads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(ctas, int64_t{sms} * 32)));
}

Status launch(CudaBackendState& s, const LoadedKernel& k, unsigned gx, unsigned gy, unsigned gz,
              void** args, const std::string& what) {
  if (gx == 0 || gy == 0 || gz == 0) return okStatus();
  CUresult r = s.cu->launchKernel(k.function, gx, gy, gz, k.block[0], k.block[1], k.block[2],
                                  k.shared_bytes, s.stream, args, nullptr);
  if (r != CUDA_SUCCESS) return internalError(what + ": " + s.cu->describe("cuLaunchKernel", r));
  return okStatus();
}

}  // namespace

Status ensureBuffers(CudaBackendState& s, const StepDims& need, int32_t splits) {
  StepBuffers& b = s.buffers;
  const StepDims have = b.dims;
  const bool fits = need.tokens <= have.tokens && need.requests <= have.requests &&
                    need.max_blocks <= have.max_blocks && need.logit_rows <= have.logit_rows &&
                    splits <= b.max_splits && !b.slots.empty();
  if (fits) return okStatus();
  // Everything is reallocated: finish what runs, and forget graphs that point at it.
  INGOT_RETURN_IF_ERROR(s.cu->check("cuStreamSynchronize", s.cu->streamSynchronize(s.stream)));
  s.dropGraphs();
  // Each dimension that must grow at least doubles, so a run settles after a few steps.
  auto grow = [](int32_t want, int32_t had) { return want > had ? std::max(want, 2 * had) : had; };
  StepDims d;
  d.tokens = grow(need.tokens, have.tokens);
  d.requests = grow(need.requests, have.requests);
  d.max_blocks = std::max(need.max_blocks, have.max_blocks);
  d.logit_rows = grow(need.logit_rows, have.logit_rows);
  d.tokens = std::max(d.tokens, 1);
  d.requests = std::max(d.requests, 1);
  d.max_blocks = std::max(d.max_blocks, 1);
  d.logit_rows = std::max(d.logit_rows, 1);
  b.max_splits = std::max(splits, b.max_splits);
  CudaDriver& cu = *s.cu;
  const ProgramPlan& plan = *s.plan;
  const size_t T = d.tokens, L = d.logit_rows;
  b.slots.clear();
  b.slots = std::vector<DeviceMemory>(plan.slot_widths.size());
  // A slot may hold a vocab-parallel head's slice of the logits: L rows, not T.
  for (size_t i = 0; i < plan.slot_widths.size(); ++i)
    INGOT_RETURN_IF_ERROR(b.slots[i].allocate(cu, std::max(T, L) * plan.slot_widths[i] * 4,
                                              "activation slot " + std::to_string(i)));
  int64_t headK = 1;
  for (const DeviceStep& st : s.steps)
    if (st.K > 0) headK = std::max(headK, st.K);
  const int64_t vocab = s.shape.vocab_size;
  INGOT_RETURN_IF_ERROR(b.x_bf16.allocate(
      cu, std::max<size_t>(T * s.max_linear_k, L * headK) * 2, "bf16 linear inputs"));
  INGOT_RETURN_IF_ERROR(b.gathered.allocate(cu, L * headK * 4, "logit rows"));
  INGOT_RETURN_IF_ERROR(b.logits.allocate(cu, L * vocab * 4, "logits"));
  INGOT_RETURN_IF_ERROR(b.logits_host.allocate(cu, L * vocab * 4, "logits"));
  const size_t partials = T * std::max<int64_t>(s.max_heads, 1) * b.max_splits;
  INGOT_RETURN_IF_ERROR(b.partial_out.allocate(cu, partials * std::max<int64_t>(s.head_dim, 1) * 4,
                                               "split-KV partial outputs"));
  INGOT_RETURN_IF_ERROR(b.partial_max.allocate(cu, partials * 4, "split-KV maxima"));
  INGOT_RETURN_IF_ERROR(b.partial_sum.allocate(cu, partials * 4, "split-KV sums"));
  const StepLayout layout = stepLayout(d);
  INGOT_RETURN_IF_ERROR(b.inputs.allocate(cu, layout.words * 4, "step inputs"));
  INGOT_RETURN_IF_ERROR(b.inputs_host.allocate(cu, layout.words * 4, "step inputs"));
  INGOT_RETURN_IF_ERROR(b.tree_bits.allocate(cu, size_t{static_cast<size_t>(d.requests)} * 4,
                                             "default tree bits"));
  INGOT_RETURN_IF_ERROR(b.row_sampling.allocate(cu, L * sizeof(sampling::RowParams), "sampling parameters"));
  INGOT_RETURN_IF_ERROR(b.row_sampling_host.allocate(cu, L * sizeof(sampling::RowParams),
                                                     "sampling parameters"));
  INGOT_RETURN_IF_ERROR(b.tokens.allocate(cu, L * 4, "sampled tokens"));
  INGOT_RETURN_IF_ERROR(b.tokens_host.allocate(cu, L * 4, "sampled tokens"));
  // A rank's all_gather slices for the largest step the buffers hold: allocated here, never
  // inside a step, so a captured gather keeps valid pointers.
  size_t slices = 0;
  for (const PlannedStep& p : plan.steps) {
    if (p.op != OpKind::AllGather || s.world < 2) continue;
    const PlannedBuffer& src = plan.buffers[p.inputs[0]];
    slices = std::max(slices, (src.logit_rows ? L : T) * static_cast<size_t>(src.width) * 4 *
                                  static_cast<size_t>(s.world));
  }
  if (slices > 0)
    INGOT_RETURN_IF_ERROR(b.gathered_slices.allocate(cu, slices, "all_gather slices"));
  INGOT_RETURN_IF_ERROR(cu.check("cuMemsetD32Async",
                                 cu.memsetD32Async(b.tree_bits.ptr(), 0, d.requests, s.stream)));
  INGOT_RETURN_IF_ERROR(ensureFp8LinearBuffers(s, d.tokens));
  b.dims = d;
  return okStatus();
}

Status enqueueStep(CudaBackendState& s, const StepDims& dims, const SplitPlan& split,
                   const std::vector<std::pair<CUdeviceptr, std::vector<int64_t>>>& extra,
                   bool sample) {
  CudaDriver& cu = *s.cu;
  StepBuffers& b = s.buffers;
  const ProgramPlan& plan = *s.plan;
  const StepLayout layout = stepLayout(dims);
  const CUdeviceptr in = b.inputs.ptr();
  auto at = [&](int64_t words) { return in + static_cast<CUdeviceptr>(words) * 4; };
  INGOT_RETURN_IF_ERROR(cu.check("cuMemcpyHtoDAsync",
                                 cu.memcpyHtoDAsync(in, b.inputs_host.data(), layout.words * 4,
                                                    s.stream)));
  const CUdeviceptr errors = s.errors.ptr();
  INGOT_RETURN_IF_ERROR(cu.check("cuMemsetD32Async", cu.memsetD32Async(errors, 0, 2, s.stream)));
  const bool fp8 = s.kv_dtype == KvDtype::kFp8E4M3;
  if (fp8)  // the fp8 write keeps the least error key: start from "none"
    INGOT_RETURN_IF_ERROR(cu.check("cuMemsetD32Async",
                                   cu.memsetD32Async(errors + 8, 0xffffffffu, 2, s.stream)));
  auto slot = [&](int32_t buffer) -> CUdeviceptr { return b.slots[plan.buffers[buffer].slot].ptr(); };
  const KvCacheLayout& kv = plan.kv_layout;
  int T = dims.tokens;
  const FusedKernels& f = s.fused;
  CUdeviceptr kvPool = s.kv_pool.ptr();
  // y [rows, N] = x [rows, K] . w^T (+ bias): x rounded to bf16 first.
  // y [rows, N] = x [rows, K] . w^T (+ bias) for a quantized w, straight from its packed
  // bytes (f32 activations, the kernel's fused dequantization).
  auto quantLinear = [&](const PlannedStep& p, const DeviceStep& d, CUdeviceptr x, CUdeviceptr y,
                         int64_t rows, const std::string& where) -> Status {
    quantgemv::QuantGemvParams q{};
    q.codes = reinterpret_cast<const unsigned char*>(d.codes);
    q.scales = reinterpret_cast<const void*>(d.scales);
    q.zeros = reinterpret_cast<const void*>(d.zeros);
    q.channel_scales = reinterpret_cast<const float*>(d.channel_scales);
    q.x = reinterpret_cast<const float*>(x);
    q.bias = reinterpret_cast<const float*>(d.bias);
    q.y = reinterpret_cast<float*>(y);
    q.x_stride = static_cast<long>(d.K);
    q.y_stride = static_cast<long>(d.N);
    q.N = static_cast<int>(d.N);
    q.K = static_cast<int>(d.K);
    q.T = static_cast<int>(rows);
    q.block = static_cast<int>(p.quant.block);
    q.scale_type = static_cast<int>(p.quant.scale_type);
    q.global_scale = p.quant.global_scale;
    void* args[] = {&q};
    // Prefill rows: the tensor-core GEMM (kernels/quant_gemm.cuh), where the artifact has it.
    if (d.gemm.function && rows >= quantgemm::kQuantGemmMinRows)
      return launch(s, d.gemm, quantgemm::quantGemmGridX(q.N), quantgemm::quantGemmGridY(q.T), 1,
                    args, where);
    return launch(s, d.gemv, quantgemv::quantGemvGridSize(q.N), 1, 1, args, where);
  };
  auto linear = [&](CUdeviceptr x, const DeviceStep& d, CUdeviceptr y, int64_t rows,
                    const std::string& where) -> Status {
    CUdeviceptr xb = b.x_bf16.ptr();
    long long count = rows * d.K;
    void* cast[] = {&x, &xb, &count};
    INGOT_RETURN_IF_ERROR(launch(s, f.to_bf16, strideGrid(count, s.sms), 1, 1, cast, where));
    INGOT_RETURN_IF_ERROR(s.blas->gemmBf16(s.stream, xb, d.weight, y, rows, d.N, d.K,
                                           s.workspace.ptr())
                              .withPrefix(where));
    if (!d.bias) return okStatus();
    CUdeviceptr bias = d.bias;
    long long r = rows;
    int width = static_cast<int>(d.N);
    void* args[] = {&y, &bias, &r, &width};
    return launch(s, f.add_bias, strideGrid(rows * d.N, s.sms), 1, 1, args, where);
  };

  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlannedStep& p = plan.steps[i];
    const DeviceStep& d = s.steps[i];
    const std::string where = "step " + std::to_string(i);
    switch (p.op) {
      case OpKind::Embedding: {
        fused::EmbeddingParams params{};
        params.tokens = reinterpret_cast<const int*>(at(layout.tokens));
        params.table = reinterpret_cast<const void*>(d.weight);
        params.out = reinterpret_cast<void*>(slot(p.outputs[0]));
        params.error = reinterpret_cast<unsigned*>(errors);
        params.num_tokens = T;
        params.dim = static_cast<int>(p.weight.cols());
        params.vocab_size = static_cast<int>(s.shape.vocab_size);
        params.vocab_start = static_cast<int>(std::max<int64_t>(p.vocab_start, 0));
        params.num_rows = static_cast<int>(p.weight.rows());
        void* args[] = {&params};
        INGOT_RETURN_IF_ERROR(launch(s, f.embedding, T, 1, 1, args, where + " (embedding)"));
        break;
      }
      case OpKind::RmsNorm: {
        CUdeviceptr x = slot(p.inputs[0]), residual = 0, gamma = d.norm, out = slot(p.outputs[0]);
        int dim = static_cast<int>(plan.buffers[p.inputs[0]].width);
        float eps = p.epsilon;
        if (quantizesOutput(s, i, T)) {  // its output feeds W8A8 linears: codes too
          INGOT_RETURN_IF_ERROR(enqueueFp8RmsNorm(s, i, x, gamma, out, dim, eps, T, where));
          break;
        }
        void* args[] = {&x, &residual, &gamma, &out, &dim, &eps};
        INGOT_RETURN_IF_ERROR(launch(s, f.rms_norm, T, 1, 1, args, where + " (rms_norm)"));
        break;
      }
      case OpKind::Linear:
        if (d.quantized && usesW8a8(s, i, T))  // fp8 on sm_90+, enough rows
          INGOT_RETURN_IF_ERROR(enqueueFp8Linear(s, i, slot(p.inputs[0]), slot(p.outputs[0]), T,
                                                 where + " (W8A8 linear " + p.weight.name + ")"));
        else if (d.quantized)
          INGOT_RETURN_IF_ERROR(quantLinear(p, d, slot(p.inputs[0]), slot(p.outputs[0]), T,
                                            where + " (quantized linear " + p.weight.name + ")"));
        else
          INGOT_RETURN_IF_ERROR(linear(slot(p.inputs[0]), d, slot(p.outputs[0]), T,
                                       where + " (linear " + p.weight.name + ")"));
        break;
      case OpKind::KvWrite:
        if (fp8) {
          kvfp8::KvFp8WriteParams w{};
          w.k = reinterpret_cast<const float*>(slot(p.inputs[1]));
          w.v = reinterpret_cast<const float*>(slot(p.inputs[2]));
          w.codes = reinterpret_cast<unsigned char*>(kvPool);
          w.scales = reinterpret_cast<float*>(s.kv_scales.ptr());
          w.slot_mapping = reinterpret_cast<const int*>(at(layout.slot_mapping));
          w.run_tokens = reinterpret_cast<const int*>(at(layout.run_tokens));
          w.run_starts = reinterpret_cast<const int*>(at(layout.run_starts));
          w.error = reinterpret_cast<unsigned long long*>(errors + 8);
          w.num_kv_heads = static_cast<int>(kv.num_kv_heads);
          w.head_dim = static_cast<int>(kv.head_dim);
          w.k_stride = w.v_stride = w.num_kv_heads * w.head_dim;
          w.num_layers = static_cast<int>(kv.num_layers);
          w.layer = static_cast<int>(p.layer);
          w.block_size = static_cast<int>(kv.block_size);
          w.max_runs = T;
          void* args[] = {&w};
          // One warp per (K/V, kv head) of each run; a graph's bucket has as many runs as
          // tokens at most (the ones past the step's are empty).
          const unsigned gx = kvfp8::kvFp8WriteGridX(w.num_kv_heads,
                                                     static_cast<int>(f.kv_write_fp8.block[0] / 32));
          INGOT_RETURN_IF_ERROR(launch(s, f.kv_write_fp8, gx, kvfp8::kvFp8WriteGridY(T), 1, args,
                                       where + " (kv_write, fp8)"));
          break;
        }
        [[fallthrough]];
      case OpKind::Rope: {
        const bool rope = p.op == OpKind::Rope;
        CUdeviceptr q = 0, k = 0, v = 0;
        int heads = 0, kvHeads = 0, headDim = 0, rotary = 0, stride = 0, layer = 0;
        if (rope) {
          const CUdeviceptr x = slot(p.inputs[0]);
          q = k = v = slot(p.outputs[0]);
          heads = static_cast<int>(p.num_heads);
          headDim = static_cast<int>(p.head_dim);
          rotary = static_cast<int>(2 * p.inv_freq.size());
          stride = heads * headDim;
          // Rotated out of place, like the CPU op: copy, then rotate the copy in place.
          if (x != q)
            INGOT_RETURN_IF_ERROR(cu.check(
                "cuMemcpyDtoDAsync",
                cu.memcpyDtoDAsync(q, x, static_cast<size_t>(T) * stride * 4, s.stream)));
        } else {
          k = slot(p.inputs[1]);
          v = slot(p.inputs[2]);
          q = k;
          kvHeads = static_cast<int>(kv.num_kv_heads);
          headDim = static_cast<int>(kv.head_dim);
          stride = kvHeads * headDim;
          layer = static_cast<int>(p.layer);
        }
        fused::RopeKvParams params{};
        params.q = reinterpret_cast<void*>(q);
        params.k = reinterpret_cast<void*>(k);
        params.v = reinterpret_cast<const void*>(v);
        params.kv_cache = reinterpret_cast<void*>(kvPool);
        params.positions = reinterpret_cast<const int*>(at(layout.positions));
        params.slot_mapping = reinterpret_cast<const int*>(at(layout.slot_mapping));
        params.inv_freq = reinterpret_cast<const float*>(d.inv_freq);
        params.num_tokens = T;
        params.num_heads = heads;
        params.num_kv_heads = kvHeads;
        params.head_dim = headDim;
        params.rotary_dim = rotary;
        params.q_stride = params.k_stride = params.v_stride = stride;
        params.num_layers = static_cast<int>(kv.num_layers);
        params.layer = layer;
        params.block_size = static_cast<int>(kv.block_size);
        // Rope alone must not write the cache: its rows are not K/V. Padding slots (-1)
        // are skipped by the kernel; a rope step passes no kv heads, so it writes nothing.
        void* args[] = {&params};
        INGOT_RETURN_IF_ERROR(
            launch(s, f.rope_kv, T, 1, 1, args, where + (rope ? " (rope)" : " (kv_write)")));
        break;
      }
      case OpKind::Attention: {
        attn::PagedAttentionParams a{};
        a.q = reinterpret_cast<const void*>(slot(p.inputs[0]));
        a.kv_cache = reinterpret_cast<const void*>(kvPool);
        a.out = reinterpret_cast<void*>(slot(p.outputs[0]));
        a.block_tables = reinterpret_cast<const int*>(at(layout.block_tables));
        a.seq_lens = reinterpret_cast<const int*>(at(layout.seq_lens));
        a.query_start = reinterpret_cast<const int*>(at(layout.query_start));
        a.partial_out = reinterpret_cast<float*>(b.partial_out.ptr());
        a.partial_max = reinterpret_cast<float*>(b.partial_max.ptr());
        a.partial_sum = reinterpret_cast<float*>(b.partial_sum.ptr());
        a.num_requests = dims.requests;
        a.num_tokens = T;
        a.num_heads = static_cast<int>(p.attention.num_heads);
        a.num_kv_heads = static_cast<int>(p.attention.num_kv_heads);
        a.num_layers = static_cast<int>(kv.num_layers);
        a.layer = static_cast<int>(p.attention.layer);
        a.block_size = static_cast<int>(kv.block_size);
        a.max_blocks = dims.max_blocks;
        a.num_splits = split.num_splits;
        a.keys_per_split = split.keys_per_split;
        a.scale = p.attention.scale;
        a.kv_scales = fp8 ? reinterpret_cast<const float*>(s.kv_scales.ptr()) : nullptr;
        rgn::RegionOperands ops{};
        for (size_t e = 0; e < p.extra_inputs.size(); ++e) {
          const auto& [data, shape] = extra.at(static_cast<size_t>(p.extra_inputs[e]));
          ops.operand[e].data = reinterpret_cast<const void*>(data);
          for (size_t r = 0; r < shape.size() && r < rgn::kMaxRegionOperandRank; ++r)
            ops.operand[e].shape[r] = shape[r];
        }
        ops.error = reinterpret_cast<rgn::u32*>(errors + 4);
        void* args[] = {&a, &ops};
        INGOT_RETURN_IF_ERROR(launch(s, d.attention, static_cast<unsigned>(a.num_kv_heads),
                                     static_cast<unsigned>(dims.requests),
                                     static_cast<unsigned>(split.num_splits), args,
                                     where + " (attention)"));
        if (split.num_splits > 1) {
          void* cargs[] = {&a};
          INGOT_RETURN_IF_ERROR(launch(s, d.combine, T, static_cast<unsigned>(a.num_heads), 1,
                                       cargs, where + " (attention combine)"));
        }
        break;
      }
      case OpKind::SiluMul:
      case OpKind::Add: {
        CUdeviceptr x = slot(p.inputs[0]), y = slot(p.inputs[1]), out = slot(p.outputs[0]);
        long long count = static_cast<long long>(T) * plan.buffers[p.outputs[0]].width;
        const bool silu = p.op == OpKind::SiluMul;
        if (silu && quantizesOutput(s, i, T)) {  // its output feeds W8A8 linears: codes too
          INGOT_RETURN_IF_ERROR(enqueueFp8SiluMul(
              s, i, x, y, out, static_cast<int>(plan.buffers[p.outputs[0]].width), T, where));
          break;
        }
        void* args[] = {&x, &y, &out, &count};
        INGOT_RETURN_IF_ERROR(launch(s, silu ? f.silu_mul : f.add, strideGrid(count, s.sms), 1, 1,
                                     args, where + (silu ? " (silu_mul)" : " (add)")));
        break;
      }
      case OpKind::Logits: {
        CUdeviceptr hidden = slot(p.inputs[0]), rows = at(layout.logit_rows),
                    gathered = b.gathered.ptr();
        int L = dims.logit_rows, width = static_cast<int>(d.K);
        void* args[] = {&hidden, &rows, &gathered, &L, &width};
        INGOT_RETURN_IF_ERROR(launch(s, f.gather_rows, L, 1, 1, args, where + " (logit rows)"));
        // A vocab-parallel head writes this rank's [L, V/N] slice for the all_gather.
        const bool slice = plan.buffers[p.outputs[0]].logit_rows;
        INGOT_RETURN_IF_ERROR(linear(gathered, d, slice ? slot(p.outputs[0]) : b.logits.ptr(), L,
                                     where + " (logits)"));
        break;
      }
      case OpKind::AllReduce:
      case OpKind::AllGather:
        INGOT_RETURN_IF_ERROR(enqueueCollective(s, i, dims));
        break;
      default:
        return unimplemented(where + ": op not supported by the CUDA backend");
    }
  }
  if (sample) {
    const size_t L = static_cast<size_t>(dims.logit_rows);
    INGOT_RETURN_IF_ERROR(cu.check(
        "cuMemcpyHtoDAsync", cu.memcpyHtoDAsync(b.row_sampling.ptr(), b.row_sampling_host.data(),
                                                L * sizeof(sampling::RowParams), s.stream)));
    sampling::SampleParams params{};
    params.logits = reinterpret_cast<const float*>(b.logits.ptr());
    params.row_stride = static_cast<long>(s.shape.vocab_size);
    params.vocab = static_cast<int>(s.shape.vocab_size);
    params.rows = dims.logit_rows;
    params.params = reinterpret_cast<const sampling::RowParams*>(b.row_sampling.ptr());
    params.tokens = reinterpret_cast<int*>(b.tokens.ptr());
    void* args[] = {&params};
    INGOT_RETURN_IF_ERROR(launch(s, s.fused.sample, dims.logit_rows, 1, 1, args, "sampling"));
    INGOT_RETURN_IF_ERROR(cu.check("cuMemcpyDtoHAsync",
                                   cu.memcpyDtoHAsync(b.tokens_host.data(), b.tokens.ptr(), L * 4,
                                                      s.stream)));
  } else {
    INGOT_RETURN_IF_ERROR(cu.check(
        "cuMemcpyDtoHAsync",
        cu.memcpyDtoHAsync(b.logits_host.data(), b.logits.ptr(),
                           static_cast<size_t>(dims.logit_rows) * s.shape.vocab_size * 4, s.stream)));
  }
  return cu.check("cuMemcpyDtoHAsync",
                  cu.memcpyDtoHAsync(s.errors_host.data(), errors, fp8 ? 16 : 8, s.stream));
}

}  // namespace ingot
