//===- QuantKernels.cpp - CUDA quantized GEMV kernels into the artifact ---===//
#include "compiler/driver/QuantKernels.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <string>

#include "compiler/driver/CudaCompileJobs.h"

namespace ingot::compiler {
namespace {

using quantgemv::Format;
using quantgemv::ScaleType;

/// The entry point that reads tensor `t` of `contents`, or an error naming it.
StatusOr<codegen::QuantGemvKernel> kernelFor(const ArtifactContents &contents, size_t t) {
  const TensorSpec &w = contents.tensors[t];
  const QuantScheme &q = w.quant;
  const std::string what = "quantized linear weight '" + w.name + "'";
  codegen::QuantGemvKernel k;
  switch (q.kind) {
  case schema::QuantKind::PerTensor:
  case schema::QuantKind::PerChannel:
    k.format = Format::kFp8;
    return k;
  case schema::QuantKind::Nvfp4:
    k.format = Format::kNvfp4;
    return k;
  case schema::QuantKind::Mxfp4:
    k.format = Format::kMxfp4;
    return k;
  case schema::QuantKind::Int4Group:
    break;
  default:
    return invalidArgument(what + ": quantization kind " +
                           std::string(schema::EnumNameQuantKind(q.kind)) +
                           " has no CUDA GEMV kernel");
  }
  if (q.zeroKind == schema::ZeroKind::Min)
    k.format = Format::kInt4Min;
  else if (q.zeroKind == schema::ZeroKind::Zero)
    k.format = Format::kInt4Zero;
  else
    return invalidArgument(what + ": int4 group quantization needs zero_kind Zero or Min");
  if (q.scaleTensor < 0 || static_cast<size_t>(q.scaleTensor) >= contents.tensors.size())
    return invalidArgument(what + ": its int4 scale tensor index " +
                           std::to_string(q.scaleTensor) + " is out of range");
  switch (contents.tensors[q.scaleTensor].dtype) {
  case schema::DType::F16: k.scaleType = ScaleType::kF16; break;
  case schema::DType::BF16: k.scaleType = ScaleType::kBF16; break;
  case schema::DType::F32: k.scaleType = ScaleType::kF32; break;
  default:
    return invalidArgument(what + ": int4 scale '" + contents.tensors[q.scaleTensor].name +
                           "' is " + schema::EnumNameDType(contents.tensors[q.scaleTensor].dtype) +
                           "; the GEMV kernels read f16, bf16 or f32 scales");
  }
  return k;
}

} // namespace

StatusOr<std::vector<codegen::QuantGemvKernel>>
quantGemvKernelsOf(const ArtifactContents &contents) {
  std::vector<codegen::QuantGemvKernel> used;
  for (const Program &program : contents.programs)
    for (const ProgramStep &step : program.steps) {
      if (step.op != schema::OpKind::Linear || step.weights.empty())
        continue;
      const int32_t t = step.weights[0];
      if (t < 0 || static_cast<size_t>(t) >= contents.tensors.size() ||
          contents.tensors[t].quant.kind == schema::QuantKind::None)
        continue;
      StatusOr<codegen::QuantGemvKernel> k = kernelFor(contents, static_cast<size_t>(t));
      if (!k.ok())
        return k.status();
      if (std::find(used.begin(), used.end(), *k) == used.end())
        used.push_back(*k);
    }
  std::vector<codegen::QuantGemvKernel> ordered;
  for (const codegen::QuantGemvKernel &k : codegen::allQuantGemvKernels())
    if (std::find(used.begin(), used.end(), k) != used.end())
      ordered.push_back(k);
  return ordered;
}

Status addQuantKernels(ArtifactWriter &writer, const CudaKernelOptions &options,
                       CudaKernelReport *report) {
  CudaKernelReport local;
  CudaKernelReport &rep = report ? *report : local;
  if (options.targets.empty())
    return okStatus();
  StatusOr<std::vector<codegen::QuantGemvKernel>> kernels =
      quantGemvKernelsOf(writer.contents());
  if (!kernels.ok())
    return kernels.status();
  if (kernels->empty())
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
  for (const codegen::QuantGemvKernel &k : *kernels) {
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
    addUnitKernels(writer, (*compiled)[i], gemv, static_cast<uint32_t>(quantgemv::kQuantThreads),
                   options, rep);
    addUnitKernels(writer, (*compiled)[i], gemm,
                   static_cast<uint32_t>(quantgemm::kGemmThreads), options, rep);
  }
  rep.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return okStatus();
}

} // namespace ingot::compiler
