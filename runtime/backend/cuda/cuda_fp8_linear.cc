// W8A8 FP8 linears on sm_90+: per-token E4M3 activations, the cuBLASLt FP8 GEMM, the scale
// epilogue (codegen/cuda/kernels/fp8_w8a8.cuh).
#include "runtime/backend/cuda/cuda_fp8_linear.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/kernels/w8a8_params.h"
#include "runtime/backend/cuda/cuda_ops.h"
#include "runtime/backend/cuda/kernel_args.h"

namespace ingot {
namespace {

using schema::GridCount;

/// The entry points of codegen/cuda/W8a8KernelsSource.h (not included: it is compiler-side).
constexpr const char* kQuantizeKernel = "ingot_fp8_quantize_rows";
constexpr const char* kEpilogueKernel = "ingot_fp8_scale_epilogue";
constexpr const char* kRmsNormQuantKernel = "ingot_fp8_rms_norm_quant";
constexpr const char* kSiluMulQuantKernel = "ingot_fp8_silu_mul_quant";

static_assert(CublasLt::kFp8Align == w8a8::kFp8Align, "one padding rule for GEMM and quantizer");

int64_t roundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/// The counts of a launch over `rows` rows.
GridCounts overRows(int64_t rows) { return GridCounts().set(GridCount::Rows, rows); }

/// $INGOT_CUDA_W8A8 over `min_rows`: "off"/"0" disables, a positive number is the threshold.
StatusOr<int64_t> minRowsFromEnvironment(int64_t min_rows) {
  const char* env = std::getenv("INGOT_CUDA_W8A8");
  if (!env || !*env) return min_rows;
  if (std::strcmp(env, "off") == 0 || std::strcmp(env, "0") == 0) return int64_t{0};
  char* end = nullptr;
  const long long v = std::strtoll(env, &end, 10);
  if (*end != '\0' || v < 0)
    return invalidArgument(std::string("INGOT_CUDA_W8A8='") + env +
                           "': expected off, 0, or the fewest rows (tokens) that run W8A8");
  return static_cast<int64_t>(v);
}

/// Which W8A8 inputs their producers quantize (Fp8LinearState::produced / produces /
/// consumes): a W8A8 linear's input buffer made by exactly one step before it, an rms_norm
/// (alone or after its residual add) or a silu_mul the compiler marked (PlannedStep::fp8_rows),
/// as wide as the linear's K. Every W8A8 consumer of such a buffer then reads the one set of
/// codes; any other input keeps the separate quantizer.
void planProducedInputs(CudaBackendState& s, Fp8LinearState& st) {
  const ProgramPlan& plan = *s.plan;
  st.produces.assign(plan.steps.size(), -1);
  st.consumes.assign(plan.steps.size(), -1);
  // The step that writes each buffer; -2 when more than one does.
  std::vector<int> writer(plan.buffers.size(), -1);
  for (size_t i = 0; i < plan.steps.size(); ++i)
    for (int32_t b : plan.steps[i].outputs)
      if (b >= 0 && static_cast<size_t>(b) < writer.size())
        writer[b] = writer[b] == -1 ? static_cast<int>(i) : -2;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Fp8LinearWeights& w = st.steps[i];
    const PlannedStep& p = plan.steps[i];
    if (w.codes == 0 || p.inputs.empty()) continue;
    const int32_t b = p.inputs[0];
    const int j = b >= 0 && static_cast<size_t>(b) < writer.size() ? writer[b] : -1;
    if (j < 0 || static_cast<size_t>(j) >= i) continue;
    const PlannedStep& producer = plan.steps[j];
    if (!producer.fp8_rows) continue;
    if (producer.op != schema::OpKind::RmsNorm && producer.op != schema::OpKind::SiluMul &&
        producer.op != schema::OpKind::AddRmsNorm)
      continue;
    const size_t made = producer.op == schema::OpKind::AddRmsNorm ? 1 : 0;  // the norm's rows
    const PlannedBuffer& buffer = plan.buffers[b];
    if (producer.outputs.size() <= made || producer.outputs[made] != b || buffer.slot < 0 ||
        buffer.logit_rows || buffer.width != s.steps[i].K)
      continue;
    int k = st.produces[j];
    if (k < 0) {
      for (size_t e = 0; e < st.produced.size() && k < 0; ++e)
        if (st.produced[e].slot == buffer.slot) k = static_cast<int>(e);
      if (k < 0) {
        k = static_cast<int>(st.produced.size());
        st.produced.emplace_back();
        st.produced.back().slot = buffer.slot;
      }
      st.produces[j] = k;
    }
    st.consumes[i] = k;
    st.produced[k].max_padded_k = std::max(st.produced[k].max_padded_k, w.padded_k);
  }
}

/// The quantizer's view of the codes a producer writes for `step`'s output (or a linear
/// reads): codes [rows, roundUp(width, 16)] and one scale per row.
w8a8::QuantizeRowsParams producedCodes(const Fp8LinearState& st, int index, const float* rowsF32,
                                       int width, int64_t rows) {
  const Fp8ProducedInput& in = st.produced.at(static_cast<size_t>(index));
  return w8a8::producerCodes(rowsF32, reinterpret_cast<unsigned char*>(in.codes.ptr()),
                             reinterpret_cast<float*>(in.row_scales.ptr()),
                             roundUp(width, w8a8::kFp8Align), width, static_cast<int>(rows));
}

}  // namespace

Status prepareFp8Linears(CudaBackendState& s, int64_t min_rows) {
  s.fp8_linear = std::make_shared<Fp8LinearState>();
  Fp8LinearState& st = *s.fp8_linear;
  const ProgramPlan& plan = *s.plan;
  st.steps.resize(plan.steps.size());
  INGOT_ASSIGN_OR_RETURN(min_rows, minRowsFromEnvironment(min_rows));
  std::vector<size_t> fp8Steps;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlannedStep& p = plan.steps[i];
    if (p.op == schema::OpKind::Linear && p.quantized && p.quant.format == QuantFormat::kFp8)
      fp8Steps.push_back(i);
  }
  st.fp8_steps = static_cast<int>(fp8Steps.size());
  if (fp8Steps.empty()) return okStatus();
  if (min_rows <= 0) {
    st.off_reason = "turned off (fp8_w8a8_min_rows 0 or INGOT_CUDA_W8A8=off)";
    return okStatus();
  }
  if (s.gpu.major < 9) {
    st.off_reason = "sm_" + std::to_string(s.gpu.major) + std::to_string(s.gpu.minor) +
                    " runs fp8 weight-only (W8A8 needs sm_90 or newer)";
    return okStatus();
  }
  if (!s.modules->has(kQuantizeKernel) || !s.modules->has(kEpilogueKernel)) {
    st.off_reason = std::string("the artifact lacks ") + kQuantizeKernel + " / " +
                    kEpilogueKernel + " (compiled before W8A8; recompile to get them)";
    return okStatus();
  }
  INGOT_ASSIGN_OR_RETURN(st.quantize, s.modules->find(kQuantizeKernel));
  INGOT_ASSIGN_OR_RETURN(st.epilogue, s.modules->find(kEpilogueKernel));

  CudaDriver& cu = *s.cu;
  for (size_t i : fp8Steps) {
    const DeviceStep& d = s.steps[i];
    Fp8LinearWeights& w = st.steps[i];
    w.padded_n = roundUp(d.N, w8a8::kFp8Align);
    w.padded_k = roundUp(d.K, w8a8::kFp8Align);
    st.max_padded_k = std::max(st.max_padded_k, w.padded_k);
    st.max_padded_n = std::max(st.max_padded_n, w.padded_n);
    st.any_padded_n |= w.padded_n != d.N;
    if (w.padded_n == d.N && w.padded_k == d.K) {
      w.codes = d.codes;  // the GEMV's bytes serve the GEMM as they are
      continue;
    }
    // Zero rows and columns around the codes: they add nothing to any dot product.
    const std::string what = "step " + std::to_string(i) + " (" + plan.steps[i].weight.name +
                             ") fp8 codes padded to " + std::to_string(w.padded_n) + " x " +
                             std::to_string(w.padded_k);
    DeviceMemory m;
    INGOT_RETURN_IF_ERROR(m.allocate(cu, static_cast<size_t>(w.padded_n * w.padded_k), what));
    INGOT_RETURN_IF_ERROR(cu.check("cuMemsetD8Async",
                                   cu.memsetD8Async(m.ptr(), 0, m.bytes(), s.stream)));
    CUDA_MEMCPY2D copy{};
    copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.srcDevice = d.codes;
    copy.srcPitch = static_cast<size_t>(d.K);
    copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.dstDevice = m.ptr();
    copy.dstPitch = static_cast<size_t>(w.padded_k);
    copy.WidthInBytes = static_cast<size_t>(d.K);
    copy.Height = static_cast<size_t>(d.N);
    INGOT_RETURN_IF_ERROR(cu.check("cuMemcpy2DAsync", cu.memcpy2DAsync(&copy, s.stream)));
    s.weight_device_bytes += m.bytes();
    w.codes = m.ptr();
    st.padded.push_back(std::move(m));
  }
  INGOT_RETURN_IF_ERROR(cu.check("cuStreamSynchronize", cu.streamSynchronize(s.stream)));
  st.min_rows = min_rows;
  // Producer-side quantization, where the artifact has the quantizing producers.
  if (s.modules->has(kRmsNormQuantKernel) && s.modules->has(kSiluMulQuantKernel)) {
    INGOT_ASSIGN_OR_RETURN(st.rms_norm_quant, s.modules->find(kRmsNormQuantKernel));
    INGOT_ASSIGN_OR_RETURN(st.silu_mul_quant, s.modules->find(kSiluMulQuantKernel));
    planProducedInputs(s, st);
  }
  return okStatus();
}

bool quantizesOutput(const CudaBackendState& s, size_t step, int64_t rows) {
  const Fp8LinearState* st = s.fp8_linear.get();
  return st && st->min_rows > 0 && rows >= st->min_rows && rows <= st->rows_capacity &&
         step < st->produces.size() && st->produces[step] >= 0;
}

Status enqueueFp8RmsNorm(CudaBackendState& s, size_t step, CUdeviceptr x, CUdeviceptr gamma,
                         CUdeviceptr out, int dim, float eps, int64_t rows,
                         const std::string& where) {
  const Fp8LinearState& st = *s.fp8_linear;
  const w8a8::QuantizeRowsParams q =
      producedCodes(st, st.produces.at(step), reinterpret_cast<const float*>(out), dim, rows);
  if (const char* bad = w8a8::checkProducerCodes(q.codes, q.row_scales, q.codes_stride, dim,
                                                 q.rows))
    return internalError(where + ": " + bad);
  w8a8::RmsNormQuantParams p{};
  p.x = reinterpret_cast<const float*>(x);
  p.gamma = reinterpret_cast<const float*>(gamma);
  p.out = reinterpret_cast<float*>(out);
  p.codes = q.codes;
  p.row_scales = q.row_scales;
  p.codes_stride = q.codes_stride;
  p.dim = dim;
  p.rows = q.rows;
  p.eps = eps;
  const KernelArgs args = kernelArgs(p);
  return launchKernel(s, st.rms_norm_quant, overRows(rows), args,
                      where + " (rms_norm with fp8 output codes)");
}

Status enqueueFp8SiluMul(CudaBackendState& s, size_t step, CUdeviceptr gate, CUdeviceptr up,
                         CUdeviceptr out, int width, int64_t rows, const std::string& where) {
  const Fp8LinearState& st = *s.fp8_linear;
  const w8a8::QuantizeRowsParams q =
      producedCodes(st, st.produces.at(step), reinterpret_cast<const float*>(out), width, rows);
  if (const char* bad = w8a8::checkProducerCodes(q.codes, q.row_scales, q.codes_stride, width,
                                                 q.rows))
    return internalError(where + ": " + bad);
  w8a8::SiluMulQuantParams p{};
  p.gate = reinterpret_cast<const float*>(gate);
  p.up = reinterpret_cast<const float*>(up);
  p.out = reinterpret_cast<float*>(out);
  p.codes = q.codes;
  p.row_scales = q.row_scales;
  p.codes_stride = q.codes_stride;
  p.width = width;
  p.rows = q.rows;
  const KernelArgs args = kernelArgs(p);
  return launchKernel(s, st.silu_mul_quant, overRows(rows), args,
                      where + " (silu_mul with fp8 output codes)");
}

bool usesW8a8(const CudaBackendState& s, size_t step, int64_t rows) {
  const Fp8LinearState* st = s.fp8_linear.get();
  return st && st->min_rows > 0 && rows >= st->min_rows && step < st->steps.size() &&
         st->steps[step].codes != 0 && rows <= st->rows_capacity;
}

Status ensureFp8LinearBuffers(CudaBackendState& s, int32_t tokens) {
  Fp8LinearState* st = s.fp8_linear.get();
  if (!st || st->min_rows <= 0 || tokens < st->min_rows || tokens <= st->rows_capacity)
    return okStatus();
  CudaDriver& cu = *s.cu;
  const size_t rows = static_cast<size_t>(tokens);
  INGOT_RETURN_IF_ERROR(st->x_codes.allocate(cu, rows * st->max_padded_k, "W8A8 activation codes"));
  INGOT_RETURN_IF_ERROR(st->row_scales.allocate(cu, rows * 4, "W8A8 activation scales"));
  if (st->any_padded_n)
    INGOT_RETURN_IF_ERROR(st->acc.allocate(cu, rows * st->max_padded_n * 4, "W8A8 accumulators"));
  for (Fp8ProducedInput& in : st->produced) {
    const std::string what = "W8A8 codes of activation slot " + std::to_string(in.slot);
    INGOT_RETURN_IF_ERROR(in.codes.allocate(cu, rows * in.max_padded_k, what));
    INGOT_RETURN_IF_ERROR(in.row_scales.allocate(cu, rows * 4, what + " (scales)"));
  }
  st->rows_capacity = tokens;
  return okStatus();
}

Status enqueueFp8Linear(CudaBackendState& s, size_t step, CUdeviceptr x, CUdeviceptr y,
                        int64_t rows, const std::string& where) {
  Fp8LinearState& st = *s.fp8_linear;
  const Fp8LinearWeights& w = st.steps.at(step);
  const DeviceStep& d = s.steps[step];
  const QuantMatrix& q = s.plan->steps[step].quant;
  if (rows > st.rows_capacity)
    return internalError(where + ": " + std::to_string(rows) + " rows exceed the W8A8 buffers' " +
                         std::to_string(st.rows_capacity));
  w8a8::QuantizeRowsParams qp{};
  const int produced = step < st.consumes.size() ? st.consumes[step] : -1;
  if (produced >= 0) {
    // x's rms_norm / silu_mul wrote its codes (quantizesOutput holds at the same rows).
    qp = producedCodes(st, produced, reinterpret_cast<const float*>(x), static_cast<int>(d.K),
                       rows);
    if (qp.codes_stride != w.padded_k)
      return internalError(where + ": produced codes rows of " + std::to_string(qp.codes_stride) +
                           " bytes, the weight's padded K is " + std::to_string(w.padded_k));
  } else {
    qp.x = reinterpret_cast<const float*>(x);
    qp.codes = reinterpret_cast<unsigned char*>(st.x_codes.ptr());
    qp.row_scales = reinterpret_cast<float*>(st.row_scales.ptr());
    qp.x_stride = static_cast<long>(d.K);
    qp.codes_stride = static_cast<long>(w.padded_k);
    qp.K = static_cast<int>(d.K);
    qp.rows = static_cast<int>(rows);
    if (const char* bad = w8a8::checkQuantizeRowsParams(qp)) return internalError(where + ": " + bad);
    const KernelArgs qargs = kernelArgs(qp);
    INGOT_RETURN_IF_ERROR(launchKernel(s, st.quantize, overRows(rows), qargs,
                                       where + " (fp8 activation quantizer)"));
  }
  // Unpadded N: the GEMM writes y itself and the epilogue scales it in place.
  const bool scratch = w.padded_n != d.N;
  const CUdeviceptr acc = scratch ? st.acc.ptr() : y;
  INGOT_RETURN_IF_ERROR(s.blas->gemmFp8(s.stream, reinterpret_cast<CUdeviceptr>(qp.codes),
                                        w.codes, acc, rows,
                                        w.padded_n, w.padded_k, s.workspace.ptr())
                            .withPrefix(where));
  w8a8::ScaleEpilogueParams ep{};
  ep.acc = reinterpret_cast<const float*>(acc);
  ep.row_scales = qp.row_scales;
  ep.channel_scales = reinterpret_cast<const float*>(d.channel_scales);
  ep.bias = reinterpret_cast<const float*>(d.bias);
  ep.y = reinterpret_cast<float*>(y);
  ep.acc_stride = static_cast<long>(w.padded_n);
  ep.y_stride = static_cast<long>(d.N);
  ep.N = static_cast<int>(d.N);
  ep.rows = static_cast<int>(rows);
  ep.global_scale = q.global_scale;
  const KernelArgs eargs = kernelArgs(ep);
  return launchKernel(s, st.epilogue, overRows(rows).set(GridCount::Elements, rows * d.N),
                      eargs, where + " (fp8 scale epilogue)");
}

std::string describeFp8Linears(const CudaBackendState& s) {
  const Fp8LinearState* st = s.fp8_linear.get();
  if (!st || st->fp8_steps == 0) return "";
  if (st->min_rows <= 0) return "W8A8 fp8 linears: off, " + st->off_reason;
  size_t on = 0;
  for (const Fp8LinearWeights& w : st->steps) on += w.codes != 0;
  size_t fed = 0;
  for (int c : st->consumes) fed += c >= 0;
  return "W8A8 fp8 linears: " + std::to_string(on) + " steps from " +
         std::to_string(st->min_rows) + " rows (" + std::to_string(st->padded.size()) +
         " padded weight copies; " + std::to_string(fed) +
         " read codes made by their rms_norm / silu_mul)";
}

}  // namespace ingot
