// The CUDA definitions of linear (bf16 through cuBLASLt, quantized through the GEMV / GEMM
// kernels or W8A8 fp8) and logits (the head over the gathered logit rows).
#include "core/kernels/quant_params.h"
#include "runtime/backend/cuda/cuda_fp8_linear.h"
#include "runtime/backend/cuda/cuda_ops.h"

namespace ingot {
namespace {

/// The GEMV kernel of a quantized weight's format (codegen QuantKernelsSource's names).
std::string quantGemvKernel(const QuantMatrix& q) {
  const char* scale = q.scale_type == GroupScaleType::kF16 ? "f16"
                      : q.scale_type == GroupScaleType::kBF16 ? "bf16" : "f32";
  switch (q.format) {
    case QuantFormat::kInt4Min: return std::string("ingot_quant_gemv_int4min_") + scale;
    case QuantFormat::kInt4Zero: return std::string("ingot_quant_gemv_int4zero_") + scale;
    case QuantFormat::kFp8: return "ingot_quant_gemv_fp8";
    case QuantFormat::kNvfp4: return "ingot_quant_gemv_nvfp4";
    case QuantFormat::kMxfp4: return "ingot_quant_gemv_mxfp4";
  }
  return "ingot_quant_gemv_unknown";
}

}  // namespace

namespace {

/// The GEMV (and, where the artifact has it, the prefill GEMM) of the quantized weight of
/// linear `p`, into `d`; nothing for an unquantized one.
Status resolveQuantKernels(const CudaBackendState& s, size_t index, const PlannedStep& p,
                           DeviceStep& d) {
  if (!p.quantized) return okStatus();
  const KernelModules& m = *s.modules;
  const std::string name = quantGemvKernel(p.quant);
  StatusOr<LoadedKernel> k = m.find(name);
  if (!k.ok())
    return notFound("step " + std::to_string(index) + " (" + p.weight.name +
                    ") needs CUDA kernel " + name +
                    ", which the artifact lacks; recompile it with --cuda-targets");
  d.gemv = *k;
  // Its prefill GEMM (same suffix), optional: older artifacts have only the GEMV.
  const std::string gemm = "ingot_quant_gemm" + name.substr(std::string("ingot_quant_gemv").size());
  if (m.has(gemm)) {
    INGOT_ASSIGN_OR_RETURN(d.gemm, m.find(gemm));
  }
  return okStatus();
}

/// y = x w^T for linear `p` (its device copy `d`), through the kernel its weight needs:
/// W8A8 for fp8 on sm_90+ where `w8a8` allows, the quantized GEMV / GEMM, or cuBLASLt.
Status linearProduct(const CudaLaunch& l, const PlannedStep& p, const DeviceStep& d,
                     CUdeviceptr x, CUdeviceptr y, bool w8a8, const std::string& what) {
  const int T = l.tokens();
  if (d.quantized && w8a8 && usesW8a8(*l.s, l.index, T))  // fp8 on sm_90+, enough rows
    return enqueueFp8Linear(*l.s, l.index, x, y, T, l.where + " (W8A8 " + what + ")");
  if (d.quantized) return l.quantizedLinear(p, d, x, y, T, l.where + " (quantized " + what + ")");
  return l.linear(x, d, y, T, l.where + " (" + what + ")");
}

}  // namespace

Status resolveLinearCuda(CudaBackendState& s, size_t index, const schema::ProgramStepDef&) {
  return resolveQuantKernels(s, index, s.plan->steps[index], s.steps[index]);
}

Status uploadLinearCuda(WeightUploads& up, size_t index, const PlannedStep& p, DeviceStep& d) {
  const std::string where = "step " + std::to_string(index) + " (" + p.weight.name + ")";
  d.N = p.weight.rows();
  d.K = p.weight.cols();
  if (p.quantized) {
    const QuantMatrix& q = p.quant;
    const bool int4 = q.format == QuantFormat::kInt4Min || q.format == QuantFormat::kInt4Zero;
    const int64_t groups = q.groups();
    const int64_t scaleBytes = int4 ? groups * (q.scale_type == GroupScaleType::kF32 ? 4 : 2)
                               : q.format == QuantFormat::kFp8 ? 0
                                                               : groups;  // e4m3 / e8m0 bytes
    d.quantized = true;
    INGOT_ASSIGN_OR_RETURN(d.codes, up.raw(q.codes, q.N * q.rowBytes(), where + " codes"));
    INGOT_ASSIGN_OR_RETURN(d.scales, up.raw(q.scales, q.N * scaleBytes, where + " scales"));
    if (int4) {
      INGOT_ASSIGN_OR_RETURN(d.zeros, up.raw(q.zeros, q.N * scaleBytes, where + " zeros"));
    }
    INGOT_ASSIGN_OR_RETURN(d.channel_scales, up.raw(q.channel_scales,
                                                    q.channel_scales ? q.N * 4 : 0,
                                                    where + " channel scales"));
  } else {
    INGOT_ASSIGN_OR_RETURN(
        d.weight, up.elements(p.weight.data, p.weight.type, p.weight.elements(), true, where));
  }
  if (p.bias) {
    INGOT_ASSIGN_OR_RETURN(d.bias, up.vector(p.bias, d.N, where + " bias"));
  }
  return okStatus();
}

Status CudaLaunch::linear(CUdeviceptr x, const DeviceStep& d, CUdeviceptr y, int64_t rows,
                          const std::string& what) const {
  CUdeviceptr xb = s->buffers.x_bf16.ptr();
  long long count = rows * d.K;
  const KernelArgs cast = kernelArgs(x, xb, count);
  INGOT_RETURN_IF_ERROR(launch(s->fused.to_bf16, overElements(count), cast, what));
  INGOT_RETURN_IF_ERROR(
      s->blas->gemmBf16(s->stream, xb, d.weight, y, rows, d.N, d.K, s->workspace.ptr())
          .withPrefix(what));
  if (!d.bias) return okStatus();
  CUdeviceptr bias = d.bias;
  long long r = rows;
  int width = static_cast<int>(d.N);
  const KernelArgs args = kernelArgs(y, bias, r, width);
  return launch(s->fused.add_bias, overElements(rows * d.N), args, what);
}

Status CudaLaunch::quantizedLinear(const PlannedStep& p, const DeviceStep& d, CUdeviceptr x,
                                   CUdeviceptr y, int64_t rows, const std::string& what) const {
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
  const KernelArgs args = kernelArgs(q);
  // Prefill rows: the tensor-core GEMM (kernels/quant_gemm.cuh), where the artifact has it.
  const GridCounts counts =
      GridCounts().set(schema::GridCount::Features, d.N).set(schema::GridCount::Rows, rows);
  if (d.gemm.function && rows >= quantgemm::kQuantGemmMinRows)
    return launch(d.gemm, counts, args, what);
  return launch(d.gemv, counts, args, what);
}

Status enqueueLinearCuda(const CudaLaunch& l, const PlannedStep& p, const DeviceStep& d) {
  return linearProduct(l, p, d, l.slot(p.inputs[0]), l.slot(p.outputs[0]), true,
                       "linear " + p.weight.name);
}

Status resolveGatedLinearCuda(CudaBackendState& s, size_t index, const schema::ProgramStepDef&) {
  const PlannedStep& p = s.plan->steps[index];
  if (p.gelu)
    INGOT_RETURN_IF_ERROR(requireGeluMulCuda(s, index, "gated_linear " + p.weight.name));
  DeviceStep& d = s.steps[index];
  d.parts.resize(p.parts.size());
  for (size_t i = 0; i < p.parts.size(); ++i)
    INGOT_RETURN_IF_ERROR(resolveQuantKernels(s, index, p.parts[i], d.parts[i]));
  return okStatus();
}

Status uploadGatedLinearCuda(WeightUploads& up, size_t index, const PlannedStep& p,
                             DeviceStep& d) {
  d.parts.resize(p.parts.size());
  for (size_t i = 0; i < p.parts.size(); ++i)
    INGOT_RETURN_IF_ERROR(uploadLinearCuda(up, index, p.parts[i], d.parts[i]));
  d.N = p.weight.rows();
  d.K = p.weight.cols();
  return okStatus();
}

/// The gate product into the gate-rows buffer, the up product into the output, then the
/// silu_mul (or gelu_mul) kernel folds the gate rows into the output in place (each element
/// reads its up value before it writes). Fp8 weights take the weight-only GEMV: ingot compile fuses no
/// fp8 MLP, so no W8A8 producer is planned for these.
Status enqueueGatedLinearCuda(const CudaLaunch& l, const PlannedStep& p, const DeviceStep& d) {
  const CudaBackendState& s = *l.s;
  CUdeviceptr x = l.slot(p.inputs[0]), out = l.slot(p.outputs[0]), gate = s.buffers.gate_rows.ptr();
  INGOT_RETURN_IF_ERROR(
      linearProduct(l, p.parts[0], d.parts[0], x, gate, false, "gate " + p.parts[0].weight.name));
  INGOT_RETURN_IF_ERROR(
      linearProduct(l, p.parts[1], d.parts[1], x, out, false, "up " + p.parts[1].weight.name));
  long long count = static_cast<long long>(l.tokens()) * d.N;
  const KernelArgs args = kernelArgs(gate, out, out, count);
  return l.launch(p.gelu ? s.fused.gelu_mul : s.fused.silu_mul, overElements(count), args,
                  l.where + (p.gelu ? " (gated_linear: gelu_mul)" : " (gated_linear: silu_mul)"));
}

Status enqueueLogitsCuda(const CudaLaunch& l, const PlannedStep& p, const DeviceStep& d) {
  const CudaBackendState& s = *l.s;
  CUdeviceptr hidden = l.slot(p.inputs[0]), rows = l.at(l.layout.logit_rows),
              gathered = s.buffers.gathered.ptr();
  int L = l.dims->logit_rows, width = static_cast<int>(d.K);
  const KernelArgs args = kernelArgs(hidden, rows, gathered, L, width);
  INGOT_RETURN_IF_ERROR(l.launch(s.fused.gather_rows,
                                 GridCounts().set(schema::GridCount::Rows, L), args,
                                 l.where + " (logit rows)"));
  // A vocab-parallel head writes this rank's [L, V/N] slice for the all_gather.
  const bool slice = s.plan->buffers[p.outputs[0]].logit_rows;
  return l.linear(gathered, d, slice ? l.slot(p.outputs[0]) : s.buffers.logits.ptr(), L,
                  l.where + " (logits)");
}

}  // namespace ingot
