//===- AttentionKernels.h - CUDA attention kernels into the artifact -*- C++ -*-===//
//
// The compile stage after lowering that gives an artifact its CUDA attention kernels: for
// each attention step's variant and shape it generates the kernels (AttentionKernelPlan),
// compiles them with NVRTC for every target through the on-disk kernel cache, adds them as
// KernelDefs and links them (docs/artifact-format.md, "Kernels"). Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

#include "core/artifact/artifact_writer.h"
#include "core/base/status.h"

namespace ingot::compiler {

/// Whether this build can compile CUDA kernels (it was built with NVRTC).
bool cudaCodegenAvailable();

/// `--cuda-targets`: "all" (sm_80 sm_89 sm_90a sm_100f sm_120f compute_80), "none", or a
/// comma-separated list of sm_XY[a|f] / compute_XY[a|f]; "" = the default, "all" where
/// NVRTC is available and "none" elsewhere. Duplicates are dropped; anything else fails,
/// naming the entry; an explicit target in a build without NVRTC fails too.
StatusOr<std::vector<std::string>> parseCudaTargets(const std::string &spec);

struct CudaKernelOptions {
  /// Targets of every kernel; empty = no kernels.
  std::vector<std::string> targets;
  /// Kernel cache folder ("" = none; see codegen/cuda/KernelCache.h).
  std::string cacheDir;
};

/// What the kernel stages (attention, then fused) did, for the compile summary.
struct CudaKernelReport {
  /// Kernels added, and those whose every binary came from the cache.
  size_t kernels = 0;
  size_t kernelsFromCache = 0;
  /// NVRTC compiles run (one per translation unit and target missing from the cache; an
  /// attention kernel is one unit, the fused kernels of an element type share one).
  size_t compiles = 0;
  double seconds = 0.0;
  /// Attention shapes without kernels (their steps stay CPU-only; from the module's
  /// selection) and cache trouble, each once.
  std::vector<std::string> warnings;
};

/// Adds the attention kernels ingot-select-kernels chose (each attention step's
/// `kernelName`) and links them: the step's `kernel` is its decode kernel, the variant's
/// `device_function` is the struct name in the kernels' symbols; combine, prefill and
/// block-mask kernels are found by name. Steps without a kernel name stay CPU-only (kernel
/// -1). Fails on an NVRTC error, a malformed step, or a step whose shape does not give the
/// kernel it names.
Status addAttentionKernels(ArtifactWriter &writer, const CudaKernelOptions &options,
                           CudaKernelReport *report);

} // namespace ingot::compiler
