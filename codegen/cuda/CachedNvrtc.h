//===- CachedNvrtc.h - NVRTC compiles through the kernel cache ---*- C++ -*-===//
//
// compileCuda with an on-disk KernelCache in front: each (source, options, target, NVRTC
// version) is compiled once per machine, whatever artifact asks for it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

#include "codegen/cuda/KernelCache.h"
#include "codegen/cuda/NvrtcCompiler.h"

namespace ingot::codegen {

/// What one cached compile did.
struct CachedCompileStats {
  /// Binaries read from the cache, and compiled by NVRTC.
  int fromCache = 0;
  int compiled = 0;
  /// The first error storing into the cache (the compile itself still succeeded).
  std::string storeError;
};

/// compileCuda(source, name, targets, options), one binary per target, each looked up in
/// `cache` first under KernelCache::key(source, NVRTC's base and the given options, the
/// target, the NVRTC version). Fails with NVRTC's log on the first target that does not
/// compile; nothing is cached for it.
StatusOr<std::vector<CudaBinary>> compileCudaCached(const std::string &source,
                                                    const std::string &name,
                                                    const std::vector<std::string> &targets,
                                                    const std::vector<std::string> &options,
                                                    const KernelCache &cache,
                                                    CachedCompileStats *stats = nullptr);

} // namespace ingot::codegen
