//===- W8a8Kernels.cpp - CUDA W8A8 FP8 helper kernels into the artifact ---===//
#include "compiler/driver/W8a8Kernels.h"

#include <chrono>
#include <string>
#include <vector>

#include "codegen/cuda/W8a8KernelsSource.h"
#include "compiler/driver/CudaCompileJobs.h"

namespace ingot::compiler {

Status addW8a8Kernels(ArtifactWriter &writer, bool selected, const CudaKernelOptions &options,
                      CudaKernelReport *report) {
  CudaKernelReport local;
  CudaKernelReport &rep = report ? *report : local;
  if (options.targets.empty() || !selected)
    return okStatus();
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::string> names = codegen::w8a8KernelNames();
  const std::vector<std::string> producers = codegen::fp8ProducerKernelNames();
  std::vector<std::string> all = names;
  all.insert(all.end(), producers.begin(), producers.end());
  for (const Kernel &k : writer.contents().kernels)
    for (const std::string &name : all)
      if (k.name == name)
        return invalidArgument("kernel " + name + " is already in the artifact: the W8A8 "
                               "kernels are added once");
  // The quantizer + epilogue, and the rms_norm / silu_mul that quantize their own outputs
  // (kernels/fp8_producers.cuh): two units, so that only the second has fast-math division.
  const std::string unitName = "ingot_fp8_w8a8", producerUnit = "ingot_fp8_producers";
  const std::string source = codegen::w8a8Source();
  const std::string producerSource = codegen::fp8ProducersSource();
  StatusOr<std::vector<CompiledCudaUnit>> compiled = compileCudaUnits(
      {{&unitName, &source}, {&producerUnit, &producerSource}}, options, rep);
  if (!compiled.ok())
    return compiled.status();
  const uint32_t threads = static_cast<uint32_t>(w8a8::kW8a8Threads);
  INGOT_RETURN_IF_ERROR(addUnitKernels(writer, (*compiled)[0], names, threads, options, rep));
  INGOT_RETURN_IF_ERROR(addUnitKernels(writer, (*compiled)[1], producers, threads, options, rep));
  rep.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return okStatus();
}

} // namespace ingot::compiler
