//===- FusedOpsSource.cpp - CUDA translation unit of the fused elementwise kernels ---===//
#include "codegen/cuda/FusedOpsSource.h"

namespace ingot::codegen {
namespace {

const char *opName(FusedOp op) {
  switch (op) {
  case FusedOp::kRmsNormResidual: return "rms_norm_residual";
  case FusedOp::kRopeKvWrite: return "rope_kv_write";
  case FusedOp::kSiluMul: return "silu_mul";
  case FusedOp::kEmbedding: return "embedding";
  case FusedOp::kAdd: return "add";
  case FusedOp::kAddBias: return "add_bias";
  case FusedOp::kToBf16: return "to_bf16";
  case FusedOp::kGatherRows: return "gather_rows";
  case FusedOp::kSample: return "sample";
  case FusedOp::kKvWriteFp8: return "kv_write_fp8";
  case FusedOp::kScale: return "scale";
  case FusedOp::kGeluMul: return "gelu_mul";
  }
  return "unknown";
}

/// The extern "C" entry point of `op` for element type `type` named `name`.
std::string entryPoint(FusedOp op, const std::string &name, const char *type) {
  const std::string bounds =
      "extern \"C\" __global__ void __launch_bounds__(ingot::fused::kFusedThreads) " + name;
  const std::string t = type;
  switch (op) {
  case FusedOp::kRmsNormResidual:
    return bounds + "(const " + t + " *x, " + t + " *residual, const " + t + " *gamma, " + t +
           " *out, int dim, float eps) {\n  ingot::fused::rmsNormResidual<" + t +
           ">(x, residual, gamma, out, dim, eps);\n}\n";
  case FusedOp::kRopeKvWrite:
    return bounds + "(ingot::fused::RopeKvParams p) {\n  ingot::fused::ropeKvWrite<" + t +
           ">(p);\n}\n";
  case FusedOp::kSiluMul:
    return bounds + "(const " + t + " *gate, const " + t + " *up, " + t +
           " *out, long count) {\n  ingot::fused::gatedMulRange<" + t +
           ", ingot::fused::siluMul>(gate, up, out, count);\n}\n";
  case FusedOp::kGeluMul:
    return bounds + "(const " + t + " *gate, const " + t + " *up, " + t +
           " *out, long count) {\n  ingot::fused::gatedMulRange<" + t +
           ", ingot::fused::geluMul>(gate, up, out, count);\n}\n";
  case FusedOp::kEmbedding:
    return bounds + "(ingot::fused::EmbeddingParams p) {\n  ingot::fused::embeddingGather<" +
           t + ">(p);\n}\n";
  case FusedOp::kAdd:
    return bounds + "(const " + t + " *a, const " + t + " *b, " + t +
           " *out, long count) {\n  ingot::fused::addElements<" + t + ">(a, b, out, count);\n}\n";
  case FusedOp::kAddBias:
    return bounds + "(" + t + " *x, const float *bias, long rows, int width) {\n"
           "  ingot::fused::addBiasRows<" + t + ">(x, bias, rows, width);\n}\n";
  case FusedOp::kScale:
    return bounds + "(const " + t + " *in, " + t + " *out, float factor, long count) {\n"
           "  ingot::fused::scaleElements<" + t + ">(in, out, factor, count);\n}\n";
  case FusedOp::kToBf16:
    return bounds + "(const " + t + " *in, __nv_bfloat16 *out, long count) {\n"
           "  ingot::fused::convertToBf16<" + t + ">(in, out, count);\n}\n";
  case FusedOp::kGatherRows:
    return bounds + "(const " + t + " *in, const int *rows, " + t +
           " *out, int num_rows, int width) {\n  ingot::fused::gatherRows<" + t +
           ">(in, rows, out, num_rows, width);\n}\n";
  case FusedOp::kSample:
    // Minimum 1 CTA per SM: rows are few and each CTA has a row to itself, so occupancy is
    // no goal; without it ptxas (CUDA 13) holds some targets to 64 registers and spills.
    return "extern \"C\" __global__ void __launch_bounds__(ingot::sampling::kSampleThreads, 1) " +
           name + "(ingot::sampling::SampleParams p) {\n  ingot::sampling::sampleRows(p);\n}\n";
  case FusedOp::kKvWriteFp8:
    // Minimum 1 CTA per SM, as for sampling: with the bare bound ptxas (CUDA 13) holds it to
    // 40 registers and spills 8-16 bytes on sm_90a / sm_100f / sm_120f; it then takes ~54.
    return "extern \"C\" __global__ void __launch_bounds__(ingot::fused::kFusedThreads, 1) " +
           name + "(ingot::kvfp8::KvFp8WriteParams p) {\n  ingot::kvfp8::kvWriteFp8(p);\n}\n";
  }
  return "";
}

} // namespace

const std::vector<FusedOp> &allFusedOps() {
  static const std::vector<FusedOp> ops = {
      FusedOp::kRmsNormResidual, FusedOp::kRopeKvWrite, FusedOp::kSiluMul,
      FusedOp::kEmbedding,       FusedOp::kAdd,         FusedOp::kAddBias,
      FusedOp::kToBf16,          FusedOp::kGatherRows,  FusedOp::kSample,
      FusedOp::kKvWriteFp8,      FusedOp::kScale,       FusedOp::kGeluMul};
  return ops;
}

bool fusedOpHasEntryPoint(FusedOp op, AttentionDtype dtype) {
  return (op != FusedOp::kSample && op != FusedOp::kKvWriteFp8) || dtype == AttentionDtype::kF32;
}

std::string fusedKernelName(FusedOp op, AttentionDtype dtype) {
  return std::string("ingot_fused_") + opName(op) +
         (dtype == AttentionDtype::kF32 ? "_f32" : "_bf16");
}

std::string fusedOpsSource(const std::vector<FusedOp> &ops,
                           const std::vector<AttentionDtype> &dtypes) {
  const std::vector<AttentionDtype> types =
      dtypes.empty() ? std::vector<AttentionDtype>{AttentionDtype::kF32, AttentionDtype::kBF16}
                     : dtypes;
  std::string entries;
  bool sampling = false, kvFp8 = false;
  for (FusedOp op : ops.empty() ? allFusedOps() : ops)
    for (AttentionDtype dtype : types) {
      if (!fusedOpHasEntryPoint(op, dtype)) continue;
      sampling |= op == FusedOp::kSample;
      kvFp8 |= op == FusedOp::kKvWriteFp8;
      entries += entryPoint(op, fusedKernelName(op, dtype),
                            dtype == AttentionDtype::kF32 ? "float" : "__nv_bfloat16");
    }
  std::string src = "// Fused elementwise kernels (assembled by codegen/cuda/FusedOpsSource).\n";
  std::vector<std::string> paths = {"codegen/cuda/kernels/fused_ops.cuh"};
  if (sampling) paths.push_back("codegen/cuda/kernels/sampling.cuh");
  if (kvFp8) {
    paths.push_back("codegen/cuda/kernels/e4m3.cuh");  // kv_fp8.cuh's codec, included first
    paths.push_back("codegen/cuda/kernels/kv_fp8.cuh");
  }
  for (const std::string &path : paths) src += inlinedKernelHeader(path);
  return src + generatedSection("entry points") + entries;
}

} // namespace ingot::codegen
