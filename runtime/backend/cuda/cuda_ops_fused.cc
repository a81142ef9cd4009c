// The CUDA definitions of the ops that run as fused elementwise kernels: embedding,
// rms_norm and add_rms_norm (one kernel), rope and kv_write (one rope + KV-write kernel; fp8 pools have their own write),
// silu_mul, gelu_mul, add and scale.
#include <algorithm>

#include "core/kernels/fused_params.h"
#include "core/kernels/kv_fp8_params.h"
#include "runtime/backend/cuda/cuda_fp8_linear.h"
#include "runtime/backend/cuda/cuda_ops.h"

namespace ingot {

using schema::OpKind;

Status uploadEmbeddingCuda(WeightUploads& up, size_t index, const PlannedStep& p,
                           DeviceStep& d) {
  const std::string where = "step " + std::to_string(index) + " (" + p.weight.name + ")";
  INGOT_ASSIGN_OR_RETURN(d.weight,
                         up.elements(p.weight.data, p.weight.type, p.weight.elements(), false, where));
  return okStatus();
}

Status enqueueEmbeddingCuda(const CudaLaunch& l, const PlannedStep& p, const DeviceStep& d) {
  fused::EmbeddingParams params{};
  params.tokens = reinterpret_cast<const int*>(l.at(l.layout.tokens));
  params.table = reinterpret_cast<const void*>(d.weight);
  params.out = reinterpret_cast<void*>(l.slot(p.outputs[0]));
  params.error = reinterpret_cast<unsigned*>(l.errors);
  params.num_tokens = l.tokens();
  params.dim = static_cast<int>(p.weight.cols());
  params.vocab_size = static_cast<int>(l.s->shape.vocab_size);
  params.vocab_start = static_cast<int>(std::max<int64_t>(p.vocab_start, 0));
  params.num_rows = static_cast<int>(p.weight.rows());
  const KernelArgs args = kernelArgs(params);
  return l.launch(l.s->fused.embedding, perToken(l.tokens()), args, l.where + " (embedding)");
}

Status uploadRmsNormCuda(WeightUploads& up, size_t index, const PlannedStep& p, DeviceStep& d) {
  INGOT_ASSIGN_OR_RETURN(d.norm,
                         up.vector(p.norm, p.norm_width, "step " + std::to_string(index) + " norm"));
  return okStatus();
}

Status enqueueRmsNormCuda(const CudaLaunch& l, const PlannedStep& p, const DeviceStep& d) {
  CudaBackendState& s = *l.s;
  const int T = l.tokens();
  CUdeviceptr x = l.slot(p.inputs[0]), residual = 0, gamma = d.norm, out = l.slot(p.outputs[0]);
  int dim = static_cast<int>(p.norm_width);
  float eps = p.epsilon;
  if (quantizesOutput(s, l.index, T))  // its output feeds W8A8 linears: codes too
    return enqueueFp8RmsNorm(s, l.index, x, gamma, out, dim, eps, T, l.where);
  // A per-head norm: each token row is width / dim contiguous rows of dim features.
  const int rows = T * static_cast<int>(s.plan->buffers[p.inputs[0]].width / dim);
  const KernelArgs args = kernelArgs(x, residual, gamma, out, dim, eps);
  return l.launch(s.fused.rms_norm, perToken(rows), args, l.where + " (rms_norm)");
}

Status enqueueAddRmsNormCuda(const CudaLaunch& l, const PlannedStep& p, const DeviceStep& d) {
  CudaBackendState& s = *l.s;
  const int T = l.tokens();
  CUdeviceptr x = l.slot(p.inputs[0]), residual = l.slot(p.inputs[1]);
  CUdeviceptr sum = l.slot(p.outputs[0]), gamma = d.norm, out = l.slot(p.outputs[1]);
  int dim = static_cast<int>(s.plan->buffers[p.inputs[0]].width);
  float eps = p.epsilon;
  if (quantizesOutput(s, l.index, T)) {
    // The normalized rows feed W8A8 linears: the add, then the norm that writes codes too.
    long long count = static_cast<long long>(T) * dim;
    const KernelArgs args = kernelArgs(residual, x, sum, count);
    INGOT_RETURN_IF_ERROR(
        l.launch(s.fused.add, overElements(count), args, l.where + " (add_rms_norm: add)"));
    return enqueueFp8RmsNorm(s, l.index, sum, gamma, out, dim, eps, T, l.where);
  }
  // The kernel adds x into its residual argument in place: the sum's own slot, holding the
  // residual first unless the plan already put the sum in the residual's slot.
  if (sum != residual && T > 0)
    INGOT_RETURN_IF_ERROR(s.cu->check("cuMemcpyDtoDAsync",
                                      s.cu->memcpyDtoDAsync(sum, residual,
                                                            static_cast<size_t>(T) * dim * 4,
                                                            s.stream))
                              .withPrefix(l.where));
  const KernelArgs args = kernelArgs(x, sum, gamma, out, dim, eps);
  return l.launch(s.fused.rms_norm, perToken(T), args, l.where + " (add_rms_norm)");
}

Status uploadRopeCuda(WeightUploads& up, size_t index, const PlannedStep& p, DeviceStep& d) {
  // p.inv_freq lives in the plan, so its address is stable until the upload ends.
  INGOT_ASSIGN_OR_RETURN(d.inv_freq, up.vector(p.inv_freq.data(),
                                               static_cast<int64_t>(p.inv_freq.size()),
                                               "step " + std::to_string(index) + " rope"));
  return okStatus();
}

namespace {

/// kv_write into an fp8 pool: one warp per (K/V, kv head) of each run of tokens that write
/// one block (the runs are packed with the step's inputs).
Status enqueueKvWriteFp8(const CudaLaunch& l, const PlannedStep& p, CUdeviceptr k, CUdeviceptr v) {
  const CudaBackendState& s = *l.s;
  const KvCacheLayout& kv = s.plan->kv_layout;
  const FusedKernels& f = s.fused;
  const int T = l.tokens();
  kvfp8::KvFp8WriteParams w{};
  w.k = reinterpret_cast<const float*>(k);
  w.v = reinterpret_cast<const float*>(v);
  w.codes = reinterpret_cast<unsigned char*>(s.kv_pool.ptr());
  w.scales = reinterpret_cast<float*>(s.kv_scales.ptr());
  w.slot_mapping = reinterpret_cast<const int*>(l.at(l.layout.slot_mapping));
  w.run_tokens = reinterpret_cast<const int*>(l.at(l.layout.run_tokens));
  w.run_starts = reinterpret_cast<const int*>(l.at(l.layout.run_starts));
  w.error = reinterpret_cast<unsigned long long*>(l.errors + 8);
  w.num_kv_heads = static_cast<int>(kv.num_kv_heads);
  w.head_dim = static_cast<int>(kv.head_dim);
  w.k_stride = w.v_stride = w.num_kv_heads * w.head_dim;
  w.num_layers = static_cast<int>(kv.num_layers);
  w.layer = static_cast<int>(p.layer);
  w.block_size = static_cast<int>(kv.block_size);
  w.max_runs = T;
  const KernelArgs args = kernelArgs(w);
  // A graph's bucket has as many runs as tokens at most (the ones past the step's are empty).
  return l.launch(f.kv_write_fp8, perToken(T).set(schema::GridCount::KvHeads, w.num_kv_heads),
                  args, l.where + " (kv_write, fp8)");
}

/// The rope_kv_write kernel's parameters: rotate `heads` heads of `q` (rows of `qStride`)
/// and `kvHeads` of `k`, then write k and v (rows of `kvStride`) into `layer` of the pool.
fused::RopeKvParams ropeKvParams(const CudaLaunch& l, const DeviceStep& d, CUdeviceptr q,
                                 CUdeviceptr k, CUdeviceptr v, int heads, int kvHeads,
                                 int headDim, int rotary, int qStride, int kvStride,
                                 int layer) {
  const KvCacheLayout& kv = l.s->plan->kv_layout;
  fused::RopeKvParams params{};
  params.q = reinterpret_cast<void*>(q);
  params.k = reinterpret_cast<void*>(k);
  params.v = reinterpret_cast<const void*>(v);
  params.kv_cache = reinterpret_cast<void*>(l.s->kv_pool.ptr());
  params.positions = reinterpret_cast<const int*>(l.at(l.layout.positions));
  params.slot_mapping = reinterpret_cast<const int*>(l.at(l.layout.slot_mapping));
  params.inv_freq = reinterpret_cast<const float*>(d.inv_freq);
  params.num_tokens = l.tokens();
  params.num_heads = heads;
  params.num_kv_heads = kvHeads;
  params.head_dim = headDim;
  params.rotary_dim = rotary;
  params.q_stride = qStride;
  params.k_stride = params.v_stride = kvStride;
  params.num_layers = static_cast<int>(kv.num_layers);
  params.layer = layer;
  params.block_size = static_cast<int>(kv.block_size);
  return params;
}

/// A device copy of `rows` rows of `width` floats from `from` to `to` (none when they are one
/// slot: the plan put the output in its input's place).
Status copyRows(const CudaLaunch& l, CUdeviceptr to, CUdeviceptr from, int64_t rows,
                int64_t width) {
  if (to == from || rows == 0) return okStatus();
  return l.s->cu
      ->check("cuMemcpyDtoDAsync",
              l.s->cu->memcpyDtoDAsync(to, from, static_cast<size_t>(rows * width) * 4,
                                       l.s->stream))
      .withPrefix(l.where);
}

}  // namespace

Status enqueueRopeKvWriteCuda(const CudaLaunch& l, const PlannedStep& p, const DeviceStep& d) {
  const CudaBackendState& s = *l.s;
  const KvCacheLayout& kv = s.plan->kv_layout;
  const int T = l.tokens();
  const int heads = static_cast<int>(p.num_heads), kvHeads = static_cast<int>(kv.num_kv_heads);
  const int headDim = static_cast<int>(p.head_dim);
  // The kernel rotates in place: the outputs hold the inputs first (nothing to copy where
  // the plan gave each output its input's slot).
  const CUdeviceptr qr = l.slot(p.outputs[0]), kr = l.slot(p.outputs[1]);
  INGOT_RETURN_IF_ERROR(copyRows(l, qr, l.slot(p.inputs[0]), T, heads * headDim));
  INGOT_RETURN_IF_ERROR(copyRows(l, kr, l.slot(p.inputs[1]), T, kvHeads * headDim));
  fused::RopeKvParams params =
      ropeKvParams(l, d, qr, kr, l.slot(p.inputs[2]), heads, kvHeads, headDim,
                   static_cast<int>(2 * p.inv_freq.size()), heads * headDim, kvHeads * headDim,
                   static_cast<int>(p.layer));
  if (l.fp8_kv) {
    // The f32 kernel must not write an fp8 pool: it rotates the queries, then the keys as
    // query heads of their own (no KV heads, so no write); the fp8 write stores the keys.
    params.num_kv_heads = 0;
    const KernelArgs qArgs = kernelArgs(params);
    INGOT_RETURN_IF_ERROR(l.launch(s.fused.rope_kv, perToken(T), qArgs, l.where + " (rope q)"));
    params.q = reinterpret_cast<void*>(kr);
    params.num_heads = kvHeads;
    params.q_stride = kvHeads * headDim;
    const KernelArgs kArgs = kernelArgs(params);
    INGOT_RETURN_IF_ERROR(l.launch(s.fused.rope_kv, perToken(T), kArgs, l.where + " (rope k)"));
    return enqueueKvWriteFp8(l, p, kr, l.slot(p.inputs[2]));
  }
  const KernelArgs args = kernelArgs(params);
  return l.launch(s.fused.rope_kv, perToken(T), args, l.where + " (rope_kv_write)");
}

Status enqueueRopeKvCuda(const CudaLaunch& l, const PlannedStep& p, const DeviceStep& d) {
  const bool rope = p.op == OpKind::Rope;
  if (!rope && l.fp8_kv) return enqueueKvWriteFp8(l, p, l.slot(p.inputs[1]), l.slot(p.inputs[2]));
  const CudaBackendState& s = *l.s;
  const KvCacheLayout& kv = s.plan->kv_layout;
  const int T = l.tokens();
  CUdeviceptr q = 0, k = 0, v = 0;
  int heads = 0, kvHeads = 0, headDim = 0, rotary = 0, stride = 0, layer = 0;
  if (rope) {
    const CUdeviceptr x = l.slot(p.inputs[0]);
    q = k = v = l.slot(p.outputs[0]);
    heads = static_cast<int>(p.num_heads);
    headDim = static_cast<int>(p.head_dim);
    rotary = static_cast<int>(2 * p.inv_freq.size());
    stride = heads * headDim;
    // Rotated out of place, like the CPU op: copy, then rotate the copy in place.
    if (x != q)
      INGOT_RETURN_IF_ERROR(s.cu->check(
          "cuMemcpyDtoDAsync",
          s.cu->memcpyDtoDAsync(q, x, static_cast<size_t>(T) * stride * 4, s.stream)));
  } else {
    k = l.slot(p.inputs[1]);
    v = l.slot(p.inputs[2]);
    q = k;
    kvHeads = static_cast<int>(kv.num_kv_heads);
    headDim = static_cast<int>(kv.head_dim);
    stride = kvHeads * headDim;
    layer = static_cast<int>(p.layer);
  }
  fused::RopeKvParams params =
      ropeKvParams(l, d, q, k, v, heads, kvHeads, headDim, rotary, stride, stride, layer);
  // Rope alone must not write the cache: its rows are not K/V. Padding slots (-1) are
  // skipped by the kernel; a rope step passes no kv heads, so it writes nothing.
  const KernelArgs args = kernelArgs(params);
  return l.launch(s.fused.rope_kv, perToken(T), args, l.where + (rope ? " (rope)" : " (kv_write)"));
}

Status enqueueElementwiseCuda(const CudaLaunch& l, const PlannedStep& p, const DeviceStep&) {
  CudaBackendState& s = *l.s;
  const int T = l.tokens();
  CUdeviceptr x = l.slot(p.inputs[0]), y = l.slot(p.inputs[1]), out = l.slot(p.outputs[0]);
  const int64_t width = s.plan->buffers[p.outputs[0]].width;
  long long count = static_cast<long long>(T) * width;
  const bool silu = p.op == OpKind::SiluMul;
  if (silu && quantizesOutput(s, l.index, T))  // its output feeds W8A8 linears: codes too
    return enqueueFp8SiluMul(s, l.index, x, y, out, static_cast<int>(width), T, l.where);
  const KernelArgs args = kernelArgs(x, y, out, count);
  if (p.op == OpKind::GeluMul)
    return l.launch(s.fused.gelu_mul, overElements(count), args, l.where + " (gelu_mul)");
  return l.launch(silu ? s.fused.silu_mul : s.fused.add, overElements(count), args,
                  l.where + (silu ? " (silu_mul)" : " (add)"));
}

Status requireGeluMulCuda(const CudaBackendState& s, size_t index, const std::string& what) {
  if (s.fused.gelu_mul.function) return okStatus();
  return notFound("step " + std::to_string(index) + " (" + what +
                  ") needs CUDA kernel ingot_fused_gelu_mul_f32, which the artifact lacks; "
                  "recompile it with --cuda-targets");
}

Status resolveGeluMulCuda(CudaBackendState& s, size_t index, const schema::ProgramStepDef&) {
  return requireGeluMulCuda(s, index, "gelu_mul");
}

// The kernel is resolved with the other fused ones (resolveKernels), where the artifact has it.
Status resolveScaleCuda(CudaBackendState& s, size_t index, const schema::ProgramStepDef&) {
  if (s.fused.scale.function) return okStatus();
  return notFound("step " + std::to_string(index) +
                  " (scale) needs CUDA kernel ingot_fused_scale_f32, which the artifact lacks; "
                  "recompile it with --cuda-targets");
}

Status enqueueScaleCuda(const CudaLaunch& l, const PlannedStep& p, const DeviceStep&) {
  const long long count =
      static_cast<long long>(l.tokens()) * l.s->plan->buffers[p.outputs[0]].width;
  CUdeviceptr in = l.slot(p.inputs[0]), out = l.slot(p.outputs[0]);
  const KernelArgs args = kernelArgs(in, out, p.factor, count);
  return l.launch(l.s->fused.scale, overElements(count), args, l.where + " (scale)");
}

}  // namespace ingot
