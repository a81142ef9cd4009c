//===- NvrtcCompiler.h - CUDA C++ to cubins and PTX with NVRTC ---*- C++ -*-===//
//
// Compiles one CUDA C++ translation unit for every target an artifact ships: a cubin
// per GPU architecture plus generic PTX for the JIT fallback. Runs on machines without
// a GPU. Plain C++ (no MLIR), so the compiler and tests share it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace ingot::codegen {

/// Default artifact targets: Ampere, Ada, Hopper (arch-specific features), the
/// Blackwell datacenter and consumer families, plus generic PTX. PTX made for an `a`
/// target JIT-compiles nowhere else, so the fallback PTX is always `compute_80`.
/// Plus "simt": the translation unit itself, for the SIMT emulator (core/simt/emulator.h).
inline const std::vector<std::string> &defaultCudaTargets() {
  static const std::vector<std::string> targets = {"sm_80",   "sm_89",      "sm_90a", "sm_100f",
                                                   "sm_120f", "compute_80", "simt"};
  return targets;
}

/// Whether `target` is the SIMT emulator's ("simt": no NVRTC, the binary is the source).
bool isSimtTarget(const std::string &target);

/// One compiled binary: a cubin for "sm_*" targets, PTX text for "compute_*", the source
/// image (kSimtImageMagic + text) for "simt".
struct CudaBinary {
  std::string target;
  bool isPtx = false;
  bool isSource = false;
  std::vector<uint8_t> data;
};

/// Compiles `source` (named `name` in diagnostics) for each of `targets` ("simt" takes
/// the text as it is). `options` are
/// extra NVRTC options (e.g. "-DTILE=64"); the CUDA toolkit's include directory is added.
/// Fails with NVRTC's log on the first target that does not compile.
StatusOr<std::vector<CudaBinary>> compileCuda(const std::string &source,
                                              const std::string &name,
                                              const std::vector<std::string> &targets,
                                              const std::vector<std::string> &options = {});

/// The options compileCuda passes to NVRTC for every target before the caller's (the
/// target's -arch comes first), e.g. for a cache key.
std::vector<std::string> nvrtcBaseOptions();

/// The NVRTC version as "major.minor".
std::string nvrtcVersionString();

} // namespace ingot::codegen
