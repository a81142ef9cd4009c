//===- QuantKernels.h - CUDA quantized GEMV kernels into the artifact -*- C++ -*-===//
//
// The compile stage after the fused kernels that gives an artifact whose programs have
// quantized linear weights the CUDA backend's fused dequantize-GEMV/GEMM kernels
// (codegen/cuda/kernels/quant_gemv.cuh) of exactly the formats those weights use, as
// ingot-select-kernels chose them. Plain
// C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <vector>

#include "codegen/cuda/QuantKernelsSource.h"
#include "core/artifact/artifact_writer.h"
#include "compiler/driver/AttentionKernels.h"
#include "core/base/status.h"

namespace ingot::compiler {

/// The entry points named `names` (codegen::quantGemvKernelName; the module's
/// `ingot.quant_kernels`, which ingot-select-kernels chose from the quantized linears), in
/// codegen::allQuantGemvKernels order; fails on a name that is none of them.
StatusOr<std::vector<codegen::QuantGemvKernel>>
quantGemvKernelsNamed(const std::vector<std::string> &names);

/// Adds the entry points `kernels` (codegen::quantGemvKernelName) as KernelDefs of
/// quantgemv::kQuantThreads threads without dynamic shared memory, and beside each its
/// tensor-core GEMM for prefill (codegen::quantGemmKernelName, quantgemm::kGemmThreads
/// threads, static shared memory only), whenever `options.targets` is not empty. The entry points of one format come from one NVRTC translation unit per
/// target (through the kernel cache) and share its binaries, stored once. The runtime finds
/// them by name; no step links them. Adds to `report`; fails on an NVRTC error or when a
/// kernel of the same name is already in the artifact.
Status addQuantKernels(ArtifactWriter &writer,
                       const std::vector<codegen::QuantGemvKernel> &kernels,
                       const CudaKernelOptions &options, CudaKernelReport *report);

} // namespace ingot::compiler
