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

/// The fused ops. Launch shapes (fused::kFusedThreads threads per CTA):
///   kRmsNormResidual: grid num_rows; args (x, residual or null, gamma, out, dim, eps)
///   kRopeKvWrite:     grid num_tokens; args (fused::RopeKvParams)
///   kSiluMul:         any grid; args (gate, up, out, count as long)
///   kEmbedding:       grid num_tokens; args (fused::EmbeddingParams)
enum class FusedOp { kRmsNormResidual, kRopeKvWrite, kSiluMul, kEmbedding };

/// Every op, in declaration order.
const std::vector<FusedOp> &allFusedOps();

/// The entry point of `op` for `dtype`, e.g. "ingot_fused_rms_norm_residual_bf16".
std::string fusedKernelName(FusedOp op, AttentionDtype dtype);

/// The translation unit: the fused_ops.cuh text and the entry points of `ops` for each
/// of `dtypes` (all ops and both types when empty).
std::string fusedOpsSource(const std::vector<FusedOp> &ops = {},
                           const std::vector<AttentionDtype> &dtypes = {});

} // namespace ingot::codegen
