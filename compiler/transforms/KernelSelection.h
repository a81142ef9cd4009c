//===- KernelSelection.h - what ingot-select-kernels records -----*- C++ -*-===//
//
// The attributes ingot-specialize-attention and ingot-select-kernels put on a module and its
// attention ops, and the reader the compile driver uses to hand the selection to the kernel
// stages (compiler/driver/*Kernels.cpp, which stay free of MLIR; so is this header).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

namespace mlir {
class ModuleOp;
} // namespace mlir

namespace ingot::compiler {

/// On an `ingot.attention` with regions: the name of its variant ("variant<N>").
inline constexpr const char *kVariantAttr = "ingot.variant";
/// On an `ingot.attention`: the symbol of its CUDA decode kernel.
inline constexpr const char *kCudaKernelAttr = "ingot.cuda_kernel";
/// On an `ingot.attention` no CUDA kernel takes: why ("attention <variant> with head dim
/// ...: the kernels take ...").
inline constexpr const char *kCpuOnlyAttr = "ingot.cpu_only";
/// On the module: the CUDA targets (array of strings).
inline constexpr const char *kCudaTargetsAttr = "ingot.cuda_targets";
/// On the module: the element types of the fused elementwise kernels (array of types).
inline constexpr const char *kFusedKernelsAttr = "ingot.fused_kernels";
/// On the module (unit): a KV cache holds fp8 codes, so the fp8 KV write is needed.
inline constexpr const char *kFusedKvWriteFp8Attr = "ingot.fused_kv_write_fp8";
/// On the module (unit): a step scales (`ingot.scale`), so the scale kernel is needed.
inline constexpr const char *kFusedScaleAttr = "ingot.fused_scale";
/// On the module (unit): a step gates by GELU, so the gelu_mul kernel is needed.
inline constexpr const char *kFusedGeluMulAttr = "ingot.fused_gelu_mul";
/// On the module: the quantized GEMV kernels' names (array of strings).
inline constexpr const char *kQuantKernelsAttr = "ingot.quant_kernels";
/// On the module (unit): a linear holds fp8 weights, so the W8A8 kernels are needed.
inline constexpr const char *kW8a8KernelsAttr = "ingot.w8a8_kernels";
/// On an `ingot.rms_norm`, `ingot.add_rms_norm` (its normalized rows) or `ingot.silu_mul`
/// whose rows an fp8-weight linear reads (unit): on CUDA the step also writes them as fp8
/// codes with one scale per row, which the W8A8 linears reading them take instead of
/// quantizing the rows again.
inline constexpr const char *kFp8RowsAttr = "ingot.fp8_rows";
/// The struct name of the kernels of attention ops without regions.
inline constexpr const char *kDenseVariantName = "dense";

/// The module-wide part of the selection, in plain types.
struct KernelSelection {
  std::vector<std::string> targets;
  /// "f32" and/or "bf16", f32 first.
  std::vector<std::string> fusedTypes;
  bool fusedKvWriteFp8 = false;
  bool fusedScale = false;
  bool fusedGeluMul = false;
  /// The quantized GEMV kernels' names ("ingot_quant_gemv_int4min_f16", ...).
  std::vector<std::string> quantKernels;
  bool w8a8Kernels = false;
  /// Each attention op's `ingot.cpu_only` reason, in step order, once each.
  std::vector<std::string> cpuOnly;
};

/// sm_XY or compute_XY with an optional a/f suffix, XY two or three digits; or "simt" (the
/// kernels' source for the SIMT emulator).
bool isCudaTargetName(const std::string &name);

/// What ingot-select-kernels recorded on `module` (empty when it did not run or had no
/// targets).
KernelSelection readKernelSelection(mlir::ModuleOp module);

} // namespace ingot::compiler
