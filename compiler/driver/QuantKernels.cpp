//===- QuantKernels.cpp - CUDA quantized GEMV kernels into the artifact ---===//
#include "compiler/driver/QuantKernels.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <string>

#include "compiler/driver/CudaCompileJobs.h"

namespace ingot::compiler {
StatusOr<std::vector<codegen::QuantGemvKernel>>
quantGemvKernelsNamed(const std::vector<std::string> &names) {
  for (const std::string &name : names) {
    const auto &all = codegen::allQuantGemvKernels();
    if (std::none_of(all.begin(), all.end(), [&](const codegen::QuantGemvKernel &k) {
          return codegen::quantGemvKernelName(k) == name;
        }))
      return invalidArgument("'" + name + "' is not a quantized GEMV kernel");
  }
  std::vector<codegen::QuantGemvKernel> kernels;
  for (const codegen::QuantGemvKernel &k : codegen::allQuantGemvKernels())
    if (std::find(names.begin(), names.end(), codegen::quantGemvKernelName(k)) != names.end())
      kernels.push_back(k);
  return kernels;
}

Status addQuantKernels(ArtifactWriter &writer,
                       const std::vector<codegen::QuantGemvKernel> &kernels,
                       const CudaKernelOptions &options, CudaKernelReport *report) {
  CudaKernelReport local;
  CudaKernelReport &rep = report ? *report : local;
  if (options.targets.empty() || kernels.empty())
    return okStatus();
  const auto start = std::chrono::steady_clock::now();

  std::set<std::string> present;
  for (const Kernel &k : writer.contents().kernels)
    present.insert(k.name);
  // One translation unit per format: its entry points (int4: one per scale type in use).
  struct Unit {
    std::vector<codegen::QuantGemvKernel> kernels;
    std::string name, source;
  };
  std::vector<Unit> units;
  for (const codegen::QuantGemvKernel &k : kernels) {
    const std::string name = codegen::quantGemvKernelName(k);
    for (const std::string &n : {name, codegen::quantGemmKernelName(k)})
      if (present.count(n))
        return invalidArgument("kernel " + n + " is already in the artifact: the quantized "
                               "GEMV/GEMM kernels are added once");
    const std::string unitName = std::string("ingot_quant_gemv_") +
                                 codegen::quantFormatName(k.format);
    if (units.empty() || units.back().name != unitName)
      units.push_back({{}, unitName, ""});
    units.back().kernels.push_back(k);
  }
  std::vector<CudaUnitSource> sources;
  for (Unit &unit : units) {
    unit.source = codegen::quantGemvSource(unit.kernels);
    sources.push_back({&unit.name, &unit.source});
  }
  StatusOr<std::vector<CompiledCudaUnit>> compiled = compileCudaUnits(sources, options, rep);
  if (!compiled.ok())
    return compiled.status();

  // Each unit holds a GEMV (decode) and a tensor-core GEMM (prefill) per entry point; the
  // GEMMs' KernelDefs share the unit's binaries.
  for (size_t i = 0; i < units.size(); ++i) {
    std::vector<std::string> gemv, gemm;
    for (const codegen::QuantGemvKernel &k : units[i].kernels) {
      gemv.push_back(codegen::quantGemvKernelName(k));
      gemm.push_back(codegen::quantGemmKernelName(k));
    }
    INGOT_RETURN_IF_ERROR(addUnitKernels(writer, (*compiled)[i], gemv,
                                         static_cast<uint32_t>(quantgemv::kQuantThreads),
                                         options, rep));
    INGOT_RETURN_IF_ERROR(addUnitKernels(writer, (*compiled)[i], gemm,
                                         static_cast<uint32_t>(quantgemm::kGemmThreads), options,
                                         rep));
  }
  rep.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return okStatus();
}

} // namespace ingot::compiler
