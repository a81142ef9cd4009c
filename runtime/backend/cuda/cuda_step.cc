// One CUDA step: buffers sized for it, and every program step enqueued on the stream.
#include <algorithm>
#include <cstddef>

#include "core/kernels/sampling_params.h"
#include "runtime/backend/cuda/cuda_backend_state.h"
#include "runtime/backend/cuda/cuda_fp8_linear.h"
#include "runtime/backend/cuda/cuda_ops.h"

namespace ingot {

static_assert(sizeof(RowSampling) == sizeof(sampling::RowParams) &&
                  offsetof(RowSampling, temperature) == offsetof(sampling::RowParams, temperature) &&
                  offsetof(RowSampling, top_k) == offsetof(sampling::RowParams, top_k) &&
                  offsetof(RowSampling, top_p) == offsetof(sampling::RowParams, top_p) &&
                  offsetof(RowSampling, min_p) == offsetof(sampling::RowParams, min_p) &&
                  offsetof(RowSampling, u) == offsetof(sampling::RowParams, u),
              "RowSampling is copied to the GPU as the sampling kernel's RowParams");

using schema::OpKind;

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
  int64_t gateN = 0;
  for (const PlannedStep& p : plan.steps)
    if (p.op == OpKind::GatedLinear) gateN = std::max(gateN, p.weight.rows());
  if (gateN > 0)
    INGOT_RETURN_IF_ERROR(b.gate_rows.allocate(cu, T * gateN * 4, "gated linear gate rows"));
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
  CudaLaunch l;
  l.s = &s;
  l.dims = &dims;
  l.split = &split;
  l.extra = &extra;
  l.layout = stepLayout(dims);
  l.inputs = b.inputs.ptr();
  l.errors = s.errors.ptr();
  l.fp8_kv = s.kv_dtype == KvDtype::kFp8E4M3;
  INGOT_RETURN_IF_ERROR(cu.check("cuMemcpyHtoDAsync",
                                 cu.memcpyHtoDAsync(l.inputs, b.inputs_host.data(),
                                                    l.layout.words * 4, s.stream)));
  INGOT_RETURN_IF_ERROR(cu.check("cuMemsetD32Async", cu.memsetD32Async(l.errors, 0, 2, s.stream)));
  if (l.fp8_kv)  // the fp8 write keeps the least error key: start from "none"
    INGOT_RETURN_IF_ERROR(cu.check("cuMemsetD32Async",
                                   cu.memsetD32Async(l.errors + 8, 0xffffffffu, 2, s.stream)));
  const ProgramPlan& plan = *s.plan;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const DeviceStep& d = s.steps[i];
    l.index = i;
    l.where = "step " + std::to_string(i);
    INGOT_RETURN_IF_ERROR(d.op->enqueue(l, plan.steps[i], d));
  }
  const CUdeviceptr errors = l.errors;
  const bool fp8 = l.fp8_kv;
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
    const KernelArgs args = kernelArgs(params);
    const GridCounts rows = GridCounts().set(schema::GridCount::Rows, dims.logit_rows);
    INGOT_RETURN_IF_ERROR(l.launch(s.fused.sample, rows, args, "sampling"));
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
