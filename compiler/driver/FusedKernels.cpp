//===- FusedKernels.cpp - CUDA fused elementwise kernels into the artifact ---===//
#include "compiler/driver/FusedKernels.h"

#include <chrono>
#include <set>
#include <string>

#include "codegen/cuda/FusedOpsSource.h"
#include "codegen/cuda/kernels/fused_ops.cuh"
#include "codegen/cuda/kernels/sampling.cuh"
#include "compiler/driver/CudaCompileJobs.h"

namespace ingot::compiler {

static_assert(sampling::kSampleThreads == fused::kFusedThreads,
              "every fused KernelDef is launched with kFusedThreads threads");

Status addFusedKernels(ArtifactWriter &writer, const FusedKernelSelection &selection,
                       const CudaKernelOptions &options, CudaKernelReport *report) {
  CudaKernelReport local;
  CudaKernelReport &rep = report ? *report : local;
  if (options.targets.empty())
    return okStatus();
  const std::vector<codegen::AttentionDtype> &dtypes = selection.dtypes;
  if (dtypes.empty())
    return okStatus();
  const auto start = std::chrono::steady_clock::now();

  // One translation unit per element type: every entry point of that type. The sampling
  // kernel reads f32 logits whatever the activations' type, so an artifact without f32
  // activations still gets an f32 unit holding only the f32-only ops.
  struct Unit {
    codegen::AttentionDtype dtype;
    std::vector<codegen::FusedOp> ops;
    std::string name, source;
  };
  // The fp8 KV write only where a program's KV cache is fp8 (`--kv-dtype fp8`), the scale
  // only where a step scales, gelu_mul only where an MLP is gated by GELU: other artifacts
  // keep the units (and binaries) they had.
  auto wanted = [&](codegen::FusedOp op) {
    if (op == codegen::FusedOp::kKvWriteFp8) return selection.kvWriteFp8;
    if (op == codegen::FusedOp::kScale) return selection.scale;
    if (op == codegen::FusedOp::kGeluMul) return selection.geluMul;
    return true;
  };
  std::vector<Unit> units;
  for (codegen::AttentionDtype dtype : dtypes) {
    Unit unit{dtype, {}, dtype == codegen::AttentionDtype::kF32 ? "ingot_fused_ops_f32"
                                                                 : "ingot_fused_ops_bf16", ""};
    for (codegen::FusedOp op : codegen::allFusedOps())
      if (codegen::fusedOpHasEntryPoint(op, dtype) && wanted(op))
        unit.ops.push_back(op);
    units.push_back(std::move(unit));
  }
  if (dtypes.front() != codegen::AttentionDtype::kF32) {
    Unit unit{codegen::AttentionDtype::kF32, {}, "ingot_fused_f32_only_ops", ""};
    for (codegen::FusedOp op : codegen::allFusedOps())
      if (!codegen::fusedOpHasEntryPoint(op, codegen::AttentionDtype::kBF16) && wanted(op))
        unit.ops.push_back(op);
    units.push_back(std::move(unit));
  }

  std::set<std::string> present;
  for (const Kernel &k : writer.contents().kernels)
    present.insert(k.name);
  for (const Unit &unit : units)
    for (codegen::FusedOp op : unit.ops)
      if (const std::string name = codegen::fusedKernelName(op, unit.dtype); present.count(name))
        return invalidArgument("kernel " + name + " is already in the artifact: the fused "
                               "kernels are added once");

  std::vector<CudaUnitSource> sources;
  for (Unit &unit : units) {
    unit.source = codegen::fusedOpsSource(unit.ops, {unit.dtype});
    sources.push_back({&unit.name, &unit.source});
  }
  StatusOr<std::vector<CompiledCudaUnit>> compiled = compileCudaUnits(sources, options, rep);
  if (!compiled.ok())
    return compiled.status();

  // One KernelDef per entry point, each with its unit's binaries (stored once on write).
  for (size_t i = 0; i < units.size(); ++i) {
    std::vector<std::string> names;
    for (codegen::FusedOp op : units[i].ops)
      names.push_back(codegen::fusedKernelName(op, units[i].dtype));
    INGOT_RETURN_IF_ERROR(addUnitKernels(writer, (*compiled)[i], names,
                                         static_cast<uint32_t>(fused::kFusedThreads), options,
                                         rep));
  }
  rep.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return okStatus();
}

} // namespace ingot::compiler
