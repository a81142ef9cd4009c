//===- CudaCompileJobs.h - NVRTC compiles of kernel units on all cores -*- C++ -*-===//
//
// The compile step shared by the stages that put CUDA kernels into an artifact (attention
// kernels, fused elementwise kernels): every (translation unit, target) compiled with
// NVRTC through the on-disk kernel cache, on all cores. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

#include "core/artifact/artifact_writer.h"
#include "compiler/driver/AttentionKernels.h"
#include "core/base/status.h"

namespace ingot::compiler {

/// One NVRTC translation unit: `name` names it in errors and as its ".cu" file name.
struct CudaUnitSource {
  const std::string *name = nullptr;
  const std::string *source = nullptr;
};

/// The binaries of one unit, one per target in the order given, and how many of them the
/// kernel cache supplied.
struct CompiledCudaUnit {
  std::vector<KernelBinary> binaries;
  size_t fromCache = 0;
  /// When no target emits PTX: the unit's PTX for abiPtxTarget, compiled only to read its
  /// entry points' parameter sizes (KernelDef.param_bytes); not stored in the artifact.
  std::vector<uint8_t> abiPtx;
};

/// The PTX target whose PTX gives the kernels' parameter sizes when `targets` has no PTX
/// target: compute_XX of the oldest sm_XX target (its suffix kept), or compute_80 for simt
/// alone. Empty when a target already emits PTX (or there are no targets).
std::string abiPtxTarget(const std::vector<std::string> &targets);

/// Compiles every unit for every target of `options` through the kernel cache in
/// `options.cacheDir`, on all cores. Adds the NVRTC compiles it ran to `report->compiles`
/// and a cache that could not be written to `report->warnings` (once). Fails on the first
/// NVRTC error, naming the unit and the target; fails in a build without NVRTC.
StatusOr<std::vector<CompiledCudaUnit>>
compileCudaUnits(const std::vector<CudaUnitSource> &units, const CudaKernelOptions &options,
                 CudaKernelReport &report);

/// The byte sizes of entry point `name`'s parameters (KernelDef.param_bytes), read from the
/// first PTX binary among `binaries`, else from `abiPtx` (CompiledCudaUnit::abiPtx); empty
/// when neither has PTX (its compile failed, with a warning). Fails when that PTX has no
/// such entry or one it cannot read.
StatusOr<std::vector<uint32_t>> kernelParamBytes(const std::vector<KernelBinary> &binaries,
                                                 const std::vector<uint8_t> &abiPtx,
                                                 const std::string &name);

/// Sets `kernel.grid` to its family's rule (core/artifact/launch_grid.h) from its name and
/// threads per block; an error naming it when no family has that name.
Status setKernelGrid(Kernel &kernel);

/// Adds one KernelDef per entry point `names` of `unit`, each with the unit's binaries (the
/// writer stores identical binaries once), `threads` per block, no dynamic shared memory,
/// its parameter sizes and its grid rule, and counts them in `report` (from the cache when
/// every target was).
Status addUnitKernels(ArtifactWriter &writer, const CompiledCudaUnit &unit,
                      const std::vector<std::string> &names, uint32_t threads,
                      const CudaKernelOptions &options, CudaKernelReport &report);

} // namespace ingot::compiler
