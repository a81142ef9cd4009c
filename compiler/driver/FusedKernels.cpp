//===- FusedKernels.cpp - CUDA fused elementwise kernels into the artifact ---===//
#include "compiler/driver/FusedKernels.h"

#include <chrono>
#include <set>
#include <string>

#include "codegen/cuda/FusedOpsSource.h"
#include "codegen/cuda/kernels/fused_ops.cuh"
#include "compiler/driver/CudaCompileJobs.h"

namespace ingot::compiler {

std::vector<codegen::AttentionDtype> fusedKernelDtypes(const ArtifactContents &contents) {
  bool f32 = false, bf16 = false;
  for (const Program &program : contents.programs)
    for (const Buffer &buffer : program.buffers)
      if (buffer.kind == schema::BufferKind::Activation) {
        f32 |= buffer.dtype == schema::DType::F32;
        bf16 |= buffer.dtype == schema::DType::BF16;
      }
  std::vector<codegen::AttentionDtype> dtypes;
  if (f32)
    dtypes.push_back(codegen::AttentionDtype::kF32);
  if (bf16)
    dtypes.push_back(codegen::AttentionDtype::kBF16);
  return dtypes;
}

Status addFusedKernels(ArtifactWriter &writer, const CudaKernelOptions &options,
                       CudaKernelReport *report) {
  CudaKernelReport local;
  CudaKernelReport &rep = report ? *report : local;
  if (options.targets.empty())
    return okStatus();
  const std::vector<codegen::AttentionDtype> dtypes = fusedKernelDtypes(writer.contents());
  if (dtypes.empty())
    return okStatus();
  const auto start = std::chrono::steady_clock::now();

  std::set<std::string> present;
  for (const Kernel &k : writer.contents().kernels)
    present.insert(k.name);
  for (codegen::AttentionDtype dtype : dtypes)
    for (codegen::FusedOp op : codegen::allFusedOps())
      if (const std::string name = codegen::fusedKernelName(op, dtype); present.count(name))
        return invalidArgument("kernel " + name + " is already in the artifact: the fused "
                               "kernels are added once");

  // One translation unit per element type: every entry point of that type.
  std::vector<std::string> names, sources;
  for (codegen::AttentionDtype dtype : dtypes) {
    names.push_back(dtype == codegen::AttentionDtype::kF32 ? "ingot_fused_ops_f32"
                                                           : "ingot_fused_ops_bf16");
    sources.push_back(codegen::fusedOpsSource({}, {dtype}));
  }
  std::vector<CudaUnitSource> units;
  for (size_t i = 0; i < dtypes.size(); ++i)
    units.push_back({&names[i], &sources[i]});
  StatusOr<std::vector<CompiledCudaUnit>> compiled = compileCudaUnits(units, options, rep);
  if (!compiled.ok())
    return compiled.status();

  // One KernelDef per entry point, each with its unit's binaries (stored once on write).
  for (size_t i = 0; i < dtypes.size(); ++i) {
    const CompiledCudaUnit &unit = (*compiled)[i];
    for (codegen::FusedOp op : codegen::allFusedOps()) {
      Kernel kernel;
      kernel.name = codegen::fusedKernelName(op, dtypes[i]);
      kernel.blockDim = {static_cast<uint32_t>(fused::kFusedThreads), 1, 1};
      kernel.sharedMemBytes = 0;
      kernel.binaries = unit.binaries;
      writer.addKernel(std::move(kernel));
      ++rep.kernels;
      rep.kernelsFromCache += unit.fromCache == options.targets.size();
    }
  }
  rep.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return okStatus();
}

} // namespace ingot::compiler
