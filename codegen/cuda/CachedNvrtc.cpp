//===- CachedNvrtc.cpp - NVRTC compiles through the kernel cache ----------===//
#include "codegen/cuda/CachedNvrtc.h"

namespace ingot::codegen {

StatusOr<std::vector<CudaBinary>> compileCudaCached(const std::string &source,
                                                    const std::string &name,
                                                    const std::vector<std::string> &targets,
                                                    const std::vector<std::string> &options,
                                                    const KernelCache &cache,
                                                    CachedCompileStats *stats) {
  std::vector<std::string> keyOptions = nvrtcBaseOptions();
  keyOptions.insert(keyOptions.end(), options.begin(), options.end());
  keyOptions.push_back("name=" + name);
  const std::string version = "nvrtc " + nvrtcVersionString();
  std::vector<CudaBinary> binaries;
  for (const std::string &target : targets) {
    if (isSimtTarget(target)) {  // no compile: the binary is the text
      StatusOr<std::vector<CudaBinary>> image = compileCuda(source, name, {target}, options);
      if (!image.ok())
        return image.status();
      binaries.push_back(std::move(image->front()));
      if (stats)
        ++stats->fromCache;  // nothing was compiled
      continue;
    }
    bool hit = false;
    std::string storeError;
    StatusOr<std::vector<uint8_t>> data = cache.getOrCompute(
        KernelCache::key(source, keyOptions, target, version),
        [&]() -> StatusOr<std::vector<uint8_t>> {
          StatusOr<std::vector<CudaBinary>> compiled = compileCuda(source, name, {target}, options);
          if (!compiled.ok())
            return compiled.status();
          return std::move(compiled->front().data);
        },
        &hit, &storeError);
    if (!data.ok())
      return data.status();
    if (stats) {
      ++(hit ? stats->fromCache : stats->compiled);
      if (stats->storeError.empty())
        stats->storeError = storeError;
    }
    CudaBinary binary;
    binary.target = target;
    binary.isPtx = target.rfind("compute_", 0) == 0;
    binary.data = std::move(data).value();
    binaries.push_back(std::move(binary));
  }
  return binaries;
}

} // namespace ingot::codegen
