//===- CudaCompileJobs.cpp - NVRTC compiles of kernel units on all cores ---===//
#include "compiler/driver/CudaCompileJobs.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>

#include "codegen/cuda/PtxEntryParams.h"
#include "core/artifact/launch_grid.h"

#ifdef INGOT_HAVE_NVRTC
#include "codegen/cuda/CachedNvrtc.h"
#endif

namespace ingot::compiler {

std::string abiPtxTarget(const std::vector<std::string> &targets) {
  if (targets.empty())
    return "";
  int oldest = -1;
  std::string suffix;
  for (const std::string &t : targets) {
    if (t.rfind("compute_", 0) == 0)
      return "";
    if (t.rfind("sm_", 0) != 0)
      continue;
    size_t end = 3;
    while (end < t.size() && t[end] >= '0' && t[end] <= '9')
      ++end;
    if (end == 3)
      continue;
    const int arch = std::stoi(t.substr(3, end - 3));
    if (oldest < 0 || arch < oldest) {
      oldest = arch;
      suffix = t.substr(end);
    }
  }
  return oldest < 0 ? "compute_80" : "compute_" + std::to_string(oldest) + suffix;
}

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
  // Without a PTX target, one more PTX compile per unit gives the parameter sizes.
  const std::string abiTarget = abiPtxTarget(options.targets);
  const size_t binaryJobs = units.size() * numTargets;
  const size_t jobs = binaryJobs + (abiTarget.empty() ? 0 : units.size());
  std::atomic<size_t> next{0};
  std::mutex mutex;
  Status firstError;
  std::string storeError;
  auto work = [&] {
    for (size_t j = next++; j < jobs; j = next++) {
      const bool abi = j >= binaryJobs;
      const size_t u = abi ? j - binaryJobs : j / numTargets;
      const CudaUnitSource &unit = units[u];
      const std::string &target = abi ? abiTarget : options.targets[j % numTargets];
      codegen::CachedCompileStats stats;
      StatusOr<std::vector<codegen::CudaBinary>> result = codegen::compileCudaCached(
          *unit.source, *unit.name + ".cu", {target}, {}, cache, &stats);
      std::lock_guard<std::mutex> lock(mutex);
      if (abi) {
        // Only the launch check needs it: a failure costs the sizes, not the compile.
        report.compiles += static_cast<size_t>(stats.compiled);
        if (result.ok())
          compiled[u].abiPtx = std::move(result->front().data);
        else
          report.warnings.push_back("CUDA kernel " + *unit.name + ": no parameter sizes (its " +
                                    abiTarget + " PTX did not compile: " +
                                    result.status().message() + ")");
        continue;
      }
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
                                                 const std::vector<uint8_t> &abiPtx,
                                                 const std::string &name) {
  auto read = [&](const std::vector<uint8_t> &data,
                  const std::string &what) -> StatusOr<std::vector<uint32_t>> {
    std::string_view ptx(reinterpret_cast<const char *>(data.data()), data.size());
    std::optional<std::vector<uint32_t>> sizes = codegen::ptxEntryParamBytes(ptx, name);
    if (!sizes)
      return internalError("kernel '" + name + "': its " + what +
                           " has no entry point of that name whose parameters can be read");
    return *sizes;
  };
  for (const KernelBinary &b : binaries)
    if (b.format == schema::BinaryFormat::Ptx)
      return read(b.data, b.target + " PTX");
  if (!abiPtx.empty())
    return read(abiPtx, "parameter-size PTX");
  return std::vector<uint32_t>{};
}

Status setKernelGrid(Kernel &kernel) {
  const uint32_t threads = kernel.blockDim.empty() ? 0 : kernel.blockDim[0];
  std::optional<GridRule> rule = kernelGridRule(kernel.name, threads);
  if (!rule)
    return internalError("kernel '" + kernel.name +
                         "' belongs to no family with a grid rule (core/artifact/launch_grid.cc)");
  kernel.grid.assign(rule->begin(), rule->end());
  return okStatus();
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
    INGOT_ASSIGN_OR_RETURN(kernel.paramBytes, kernelParamBytes(unit.binaries, unit.abiPtx, name));
    INGOT_RETURN_IF_ERROR(setKernelGrid(kernel));
    writer.addKernel(std::move(kernel));
    ++report.kernels;
    report.kernelsFromCache += unit.fromCache == options.targets.size();
  }
  return okStatus();
}

} // namespace ingot::compiler
