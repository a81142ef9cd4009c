//===- FusedOpsSource.h - CUDA translation unit of the fused elementwise kernels ---*- C++ -*-===//
//
// The serving step's fused kernels (kernels/fused_ops.cuh) as one NVRTC translation unit
// with an extern "C" entry point per (op, element type), and the names of those entry
// points. Plain C++ (no CUDA headers): the compiler and the tests share it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

#include "codegen/cuda/AttentionKernelSource.h"

namespace ingot::codegen {

/// The fused ops. Launch shapes (fused::kFusedThreads = 256 threads per CTA, no dynamic
/// shared memory); T is the activation type of the entry point's suffix (float for _f32,
/// __nv_bfloat16 for _bf16), `long` is 64-bit:
///   kRmsNormResidual: grid num_rows; args (x, residual or null, gamma, out, dim, eps)
///   kRopeKvWrite:     grid num_tokens; args (fused::RopeKvParams)
///   kSiluMul:         any grid; args (gate, up, out, count as long)
///   kEmbedding:       grid num_tokens; args (fused::EmbeddingParams)
///   kAdd:             grid fusedGridSize(count); args (const T *a, const T *b, T *out,
///                     long count): out = a + b, out may alias a or b
///   kAddBias:         grid fusedGridSize(rows * width); args (T *x, const float *bias,
///                     long rows, int width): x[r, c] += bias[c] in place
///   kToBf16:          grid fusedGridSize(count); args (const T *in, __nv_bfloat16 *out,
///                     long count): round to nearest even (a copy for bf16)
///   kGatherRows:      grid num_rows; args (const T *in, const int *rows, T *out,
///                     int num_rows, int width): out row i = in row rows[i]
///   kSample:          f32 only (logits are f32 whatever the activations); grid rows;
///                     args (sampling::SampleParams, kernels/sampling.cuh): the token of
///                     each logit row under its sampling::RowParams, as the CPU Sampler
///   kKvWriteFp8:      f32 only; grid (kvfp8::kvFp8WriteGridX(kv heads, 8),
///                     kvfp8::kvFp8WriteGridY(runs)); args
///                     (kvfp8::KvFp8WriteParams, kernels/kv_fp8.cuh): K and V rows
///                     appended to an fp8 pool, the CPU's bytes exactly
///   kScale:           grid fusedGridSize(count); args (const T *in, T *out, float factor,
///                     long count): out = in * factor (f32 product), out may alias in
///   kGeluMul:         any grid; args (gate, up, out, count as long): gelu(gate) * up,
///                     GELU in its tanh form (gelu_pytorch_tanh), as kSiluMul otherwise
/// fusedGridSize (kernels/fused_ops.cuh) = min(ceil(count / 256), 65535 * 4), at least 1;
/// any other grid is correct too (grid-stride loops), just not the tuned choice.
enum class FusedOp {
  kRmsNormResidual,
  kRopeKvWrite,
  kSiluMul,
  kEmbedding,
  kAdd,
  kAddBias,
  kToBf16,
  kGatherRows,
  kSample,
  kKvWriteFp8,
  kScale,
  kGeluMul,
};

/// Every op, in declaration order. kKvWriteFp8, kScale and kGeluMul go into a unit only
/// where a module needs them (compiler/driver/FusedKernels.cpp), so other artifacts keep their units' bytes.
const std::vector<FusedOp> &allFusedOps();

/// Whether `op` has an entry point for `dtype` (kSample and kKvWriteFp8 have only f32 ones).
bool fusedOpHasEntryPoint(FusedOp op, AttentionDtype dtype);

/// The entry point of `op` for `dtype`, e.g. "ingot_fused_rms_norm_residual_bf16".
std::string fusedKernelName(FusedOp op, AttentionDtype dtype);

/// The translation unit: the fused_ops.cuh text (and sampling.cuh's where kSample is in,
/// kv_fp8.cuh's where kKvWriteFp8 is)
/// and the entry points of `ops` for each of `dtypes` that have one (all ops and both
/// types when empty).
std::string fusedOpsSource(const std::vector<FusedOp> &ops = {},
                           const std::vector<AttentionDtype> &dtypes = {});

} // namespace ingot::codegen
