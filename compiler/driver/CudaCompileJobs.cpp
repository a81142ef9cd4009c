//===- CudaCompileJobs.cpp - NVRTC compiles of kernel units on all cores ---===//
#include "compiler/driver/CudaCompileJobs.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>

#include "codegen/cuda/PtxEntryParams.h"

#ifdef INGOT_HAVE_NVRTC
#include "codegen/cuda/CachedNvrtc.h"
#endif

namespace ingot::compiler {

StatusOr<std::vector<CompiledCudaUnit>>
compileCudaUnits(const std::vector<CudaUnitSource> &units, const CudaKernelOptions &options,
                 CudaKernelReport &report) {
#ifndef INGOT_HAVE_NVRTC
  (void)units;
  (void)options;
  (void)report;
  return invalidArgument("this ingot was built without NVRTC: it cannot compile CUDA kernels");
#else
  codegen::KernelCache cache(options.cacheDir);
  const size_t numTargets = options.targets.size();
  std::vector<CompiledCudaUnit> compiled(units.size());
  for (CompiledCudaUnit &unit : compiled)
    unit.binaries.resize(numTargets);
  const size_t jobs = units.size() * numTargets;
  std::atomic<size_t> next{0};
  std::mutex mutex;
  Status firstError;
  std::string storeError;
  auto work = [&] {
    for (size_t j = next++; j < jobs; j = next++) {
      const CudaUnitSource &unit = units[j / numTargets];
      const std::string &target = options.targets[j % numTargets];
      codegen::CachedCompileStats stats;
      StatusOr<std::vector<codegen::CudaBinary>> result = codegen::compileCudaCached(
          *unit.source, *unit.name + ".cu", {target}, {}, cache, &stats);
      std::lock_guard<std::mutex> lock(mutex);
      if (!result.ok()) {
        if (firstError.ok())
          firstError = invalidArgument("CUDA kernel " + *unit.name + " for " + target + ": " +
                                       result.status().message());
        next = jobs;
        return;
      }
      CompiledCudaUnit &out = compiled[j / numTargets];
      KernelBinary &binary = out.binaries[j % numTargets];
      binary.target = target;
      binary.format = result->front().isSource ? schema::BinaryFormat::Source
                      : result->front().isPtx  ? schema::BinaryFormat::Ptx
                                               : schema::BinaryFormat::Cubin;
      binary.data = std::move(result->front().data);
      out.fromCache += static_cast<size_t>(stats.fromCache);
      report.compiles += static_cast<size_t>(stats.compiled);
      if (storeError.empty())
        storeError = stats.storeError;
    }
  };
  const size_t workers =
      std::max<size_t>(1, std::min<size_t>(jobs, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (size_t w = 1; w < workers; ++w)
    threads.emplace_back(work);
  work();
  for (std::thread &t : threads)
    t.join();
  if (!firstError.ok())
    return firstError;
  if (!storeError.empty()) {
    std::string message = "kernel cache not written (" + storeError +
                          "); set INGOT_KERNEL_CACHE to a writable folder to avoid recompiling";
    if (std::find(report.warnings.begin(), report.warnings.end(), message) ==
        report.warnings.end())
      report.warnings.push_back(std::move(message));
  }
  return compiled;
#endif
}

StatusOr<std::vector<uint32_t>> kernelParamBytes(const std::vector<KernelBinary> &binaries,
                                                 const std::string &name) {
  for (const KernelBinary &b : binaries) {
    if (b.format != schema::BinaryFormat::Ptx)
      continue;
    std::string_view ptx(reinterpret_cast<const char *>(b.data.data()), b.data.size());
    std::optional<std::vector<uint32_t>> sizes = codegen::ptxEntryParamBytes(ptx, name);
    if (!sizes)
      return internalError("kernel '" + name + "': its " + b.target +
                           " PTX has no entry point of that name whose parameters can be read");
    return *sizes;
  }
  return std::vector<uint32_t>{};
}

Status addUnitKernels(ArtifactWriter &writer, const CompiledCudaUnit &unit,
                      const std::vector<std::string> &names, uint32_t threads,
                      const CudaKernelOptions &options, CudaKernelReport &report) {
  for (const std::string &name : names) {
    Kernel kernel;
    kernel.name = name;
    kernel.blockDim = {threads, 1, 1};
    kernel.sharedMemBytes = 0;
    kernel.binaries = unit.binaries;
    INGOT_ASSIGN_OR_RETURN(kernel.paramBytes, kernelParamBytes(unit.binaries, name));
    writer.addKernel(std::move(kernel));
    ++report.kernels;
    report.kernelsFromCache += unit.fromCache == options.targets.size();
  }
  return okStatus();
}

} // namespace ingot::compiler
