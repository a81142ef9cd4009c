//===- FusedKernels.h - CUDA fused elementwise kernels into the artifact -*- C++ -*-===//
//
// The compile stage beside the attention kernels that gives an artifact the CUDA backend's
// fused elementwise kernels (codegen/cuda/kernels/fused_ops.cuh: rms_norm + residual, rope +
// KV write, silu_mul, embedding, add, add_bias, to_bf16, gather_rows, scale, gelu_mul) for the element
// types of its programs' activations, and the f32 token sampling kernel (kernels/sampling.cuh).
// Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <vector>

#include "codegen/cuda/AttentionKernelSource.h"
#include "core/artifact/artifact_writer.h"
#include "compiler/driver/AttentionKernels.h"
#include "core/base/status.h"

namespace ingot::compiler {

/// Which fused kernels the artifact carries: what ingot-select-kernels recorded on the
/// module (KernelSelection), in the kernel stage's terms.
struct FusedKernelSelection {
  /// The element types of the programs' activations (f32 first): f32 and/or bf16.
  std::vector<codegen::AttentionDtype> dtypes;
  /// A KV cache holds fp8 codes: the f32 fp8 KV write is added.
  bool kvWriteFp8 = false;
  /// A step scales (ingot.scale): the scale kernel is added for each type.
  bool scale = false;
  /// A step gates by GELU (ingot.gelu_mul, or a gated_linear with activation "gelu"): the
  /// gelu_mul kernel is added for each type.
  bool geluMul = false;
};

/// Adds every fused op's entry point ("ingot_fused_<op>_<f32|bf16>", codegen::fusedKernelName)
/// for each of `selection.dtypes` that has one (codegen::fusedOpHasEntryPoint), plus the f32
/// sampling kernel whatever the activations' type (the f32 fp8 KV write only with
/// `selection.kvWriteFp8`, the scale kernel only with `selection.scale`, gelu_mul only with
/// `selection.geluMul`), as a KernelDef of 256 threads without dynamic shared memory,
/// whenever `options.targets` is not empty. All entry points of one element type come from
/// one NVRTC translation unit per target (through the kernel cache), and their KernelDefs
/// carry that one unit's binaries: the manifest stores identical binary bytes once
/// (docs/artifact-format.md, "Fused kernels"). The runtime finds them by name; no step links
/// them. Adds to `report` (kernels, compiles, seconds); fails on an NVRTC error or when a
/// kernel of the same name is already in the artifact.
Status addFusedKernels(ArtifactWriter &writer, const FusedKernelSelection &selection,
                       const CudaKernelOptions &options, CudaKernelReport *report);

} // namespace ingot::compiler
