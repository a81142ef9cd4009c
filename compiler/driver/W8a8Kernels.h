//===- W8a8Kernels.h - CUDA W8A8 FP8 helper kernels into the artifact -*- C++ -*-===//
//
// The compile stage after the quantized GEMV kernels that gives an artifact with fp8
// linear weights the two kernels the CUDA backend's W8A8 path needs on sm_90 and newer
// (codegen/cuda/kernels/fp8_w8a8.cuh): the per-token E4M3 activation quantizer and the
// scale epilogue around cuBLASLt's FP8 GEMM. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "core/artifact/artifact_writer.h"
#include "compiler/driver/AttentionKernels.h"
#include "core/base/status.h"

namespace ingot::compiler {

/// Adds codegen::w8a8KernelNames() as KernelDefs of w8a8::kW8a8Threads threads without
/// dynamic shared memory, from one NVRTC translation unit per target (through the kernel
/// cache), when `selected` (ingot-select-kernels found an fp8 linear: the module's
/// `ingot.w8a8_kernels`) and `options.targets` is not empty. The
/// runtime finds them by name; without them it runs fp8 weight-only. Adds to `report`;
/// fails on an NVRTC error or when a kernel of the same name is already in the artifact.
Status addW8a8Kernels(ArtifactWriter &writer, bool selected, const CudaKernelOptions &options,
                      CudaKernelReport *report);

} // namespace ingot::compiler
