//===- AttentionKernels.cpp - CUDA attention kernels into the artifact ----===//
#include "compiler/driver/AttentionKernels.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "codegen/cuda/AttentionKernelPlan.h"
#include "compiler/driver/CudaCompileJobs.h"
#include "compiler/transforms/KernelSelection.h"

namespace ingot::compiler {
namespace {

/// The CUDA targets of `--cuda-targets all`, as in codegen/cuda/NvrtcCompiler.h (repeated
/// here so a build without NVRTC still knows what "all" means when it refuses it).
const std::vector<std::string> kAllTargets = {"sm_80",   "sm_89",      "sm_90a", "sm_100f",
                                              "sm_120f", "compute_80", "simt"};

bool isIdentifier(const std::string &s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_'))
    return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::optional<int64_t> intParam(const ProgramStep &step, const char *name) {
  for (const Param &p : step.params)
    if (p.name == name)
      return p.i;
  return std::nullopt;
}

/// One kernel to build: its unit and its binaries, filled by the compile jobs.
struct PendingKernel {
  codegen::AttentionKernelUnit unit;
  std::vector<KernelBinary> binaries;
  int fromCache = 0;
  std::vector<uint8_t> abiPtx;  ///< CompiledCudaUnit::abiPtx
};

} // namespace

bool cudaCodegenAvailable() {
#ifdef INGOT_HAVE_NVRTC
  return true;
#else
  return false;
#endif
}

StatusOr<std::vector<std::string>> parseCudaTargets(const std::string &spec) {
  if (spec.empty())
    return cudaCodegenAvailable() ? kAllTargets : std::vector<std::string>{};
  if (spec == "none")
    return std::vector<std::string>{};
  if (!cudaCodegenAvailable())
    return invalidArgument("--cuda-targets " + spec +
                           ": this ingot was built without NVRTC (no CUDA toolkit), so it "
                           "compiles no CUDA kernels; use --cuda-targets none");
  if (spec == "all")
    return kAllTargets;
  std::vector<std::string> targets;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    std::string t = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!isCudaTargetName(t))
      return invalidArgument("--cuda-targets: '" + t +
                             "' is not a CUDA target (sm_XY, sm_XYa, sm_XYf, compute_XY, simt, ...; "
                             "or all, none)");
    if (std::find(targets.begin(), targets.end(), t) == targets.end())
      targets.push_back(t);
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return targets;
}

/// What step 1 of addAttentionKernels finds: the kernels each (variant, shape) needs, and
/// which steps use which decode kernel.
struct AttentionKernelNeeds {
  using ShapeKey = std::tuple<int32_t, codegen::AttentionDtype, int, int, bool>;
  std::map<ShapeKey, std::string> decodeOf; // "" = no kernels for the shape
  std::vector<PendingKernel> pending;
  std::map<std::string, size_t> pendingByName;
  struct Link {
    size_t program, step;
    std::string decode;
  };
  std::vector<Link> links;
  std::set<int32_t> variantsWithKernels;
};

/// The decode kernel ingot-select-kernels chose for attention step `s` of program `p`
/// (ProgramStep::kernelName, "" = none: the step runs on the CPU), its units added to
/// `needs`. Fails when the step's shape does not give that kernel.
StatusOr<std::string> attentionStepKernel(const ArtifactContents &contents, size_t p, size_t s,
                                          AttentionKernelNeeds &needs) {
  using ShapeKey = AttentionKernelNeeds::ShapeKey;
  const Program &program = contents.programs[p];
  const ProgramStep &step = program.steps[s];
  if (step.kernelName.empty())
    return std::string();
  auto &decodeOf = needs.decodeOf;
  auto &pending = needs.pending;
  auto &pendingByName = needs.pendingByName;
  const std::string where =
      "attention step " + std::to_string(s) + " of program '" + program.name + "'";
  std::optional<int64_t> headDim = intParam(step, "head_dim"),
                         heads = intParam(step, "num_heads"),
                         kvHeads = intParam(step, "num_kv_heads");
  if (!headDim || !heads || !kvHeads || *kvHeads <= 0 || *heads % *kvHeads != 0)
    return invalidArgument(where + " lacks consistent head_dim, num_heads and "
                                   "num_kv_heads params");
  if (step.inputs.empty())
    return invalidArgument(where + " has no query input");
  const schema::DType queryType = program.buffers.at(step.inputs[0]).dtype;
  std::optional<schema::DType> cacheType;
  for (int32_t b : step.inputs)
    if (program.buffers.at(b).kind == schema::BufferKind::KvCache)
      cacheType = program.buffers[b].dtype;
  if (!cacheType)
    return invalidArgument(where + " reads no KV cache buffer");
  const std::string variantName =
      step.attentionVariant >= 0
          ? contents.attentionVariants.at(step.attentionVariant).name
          : std::string(kDenseVariantName);
  if (!isIdentifier(variantName))
    return invalidArgument(where + ": variant name '" + variantName +
                           "' is not a C identifier, so it cannot name CUDA kernels");
  codegen::AttentionShape shape;
  shape.dtype = queryType == schema::DType::F32 ? codegen::AttentionDtype::kF32
                                                : codegen::AttentionDtype::kBF16;
  shape.headDim = static_cast<int>(*headDim);
  shape.group = static_cast<int>(*heads / *kvHeads);
  shape.kvFp8 = *cacheType == schema::DType::F8E4M3FN;
  ShapeKey key{step.attentionVariant, shape.dtype, shape.headDim, shape.group, shape.kvFp8};
  auto it = decodeOf.find(key);
  if (it == decodeOf.end()) {
    std::vector<uint8_t> none;
    const AttentionVariant *variant =
        step.attentionVariant >= 0 ? &contents.attentionVariants[step.attentionVariant]
                                   : nullptr;
    StatusOr<std::vector<codegen::AttentionKernelUnit>> units =
        codegen::attentionKernelUnits(variantName, variant ? variant->maskBytecode : none,
                                      variant ? variant->scoreBytecode : none, shape);
    if (!units.ok())
      return invalidArgument(where + ": " + units.status().message());
    it = decodeOf.emplace(key, units->front().name).first;
    for (codegen::AttentionKernelUnit &unit : *units) {
      if (pendingByName.count(unit.name))
        continue; // the combine kernel is shared by every variant of a dtype and head dim
      pendingByName[unit.name] = pending.size();
      pending.push_back({std::move(unit), {}, 0});
    }
  }
  if (it->second != step.kernelName)
    return invalidArgument(where + ": the compiler chose kernel " + step.kernelName +
                           ", but the step's shape gives " + it->second);
  return it->second;
}

/// Step 1: every attention step of every program.
Status collectAttentionKernels(const ArtifactContents &contents, AttentionKernelNeeds &needs) {
  for (size_t p = 0; p < contents.programs.size(); ++p) {
    const Program &program = contents.programs[p];
    for (size_t s = 0; s < program.steps.size(); ++s) {
      const ProgramStep &step = program.steps[s];
      if (step.op != schema::OpKind::Attention)
        continue;
      INGOT_ASSIGN_OR_RETURN(std::string decode, attentionStepKernel(contents, p, s, needs));
      if (decode.empty())
        continue;
      if (step.attentionVariant >= 0)
        needs.variantsWithKernels.insert(step.attentionVariant);
      needs.links.push_back({p, s, std::move(decode)});
    }
  }
  return okStatus();
}

Status addAttentionKernels(ArtifactWriter &writer, const CudaKernelOptions &options,
                           CudaKernelReport *report) {
  CudaKernelReport local;
  CudaKernelReport &rep = report ? *report : local;
  if (options.targets.empty())
    return okStatus();
  const auto start = std::chrono::steady_clock::now();
  const ArtifactContents &contents = writer.contents();

  // 1. The kernels each (variant, shape) needs, and which steps use which decode kernel.
  AttentionKernelNeeds needs;
  INGOT_RETURN_IF_ERROR(collectAttentionKernels(contents, needs));
  std::vector<PendingKernel> &pending = needs.pending;
  const auto &links = needs.links;
  const auto &variantsWithKernels = needs.variantsWithKernels;
  if (pending.empty())
    return okStatus();

  // 2. Compile every (kernel, target), through the cache, on all cores.
  std::vector<CudaUnitSource> sources;
  for (const PendingKernel &k : pending)
    sources.push_back({&k.unit.name, &k.unit.source});
  StatusOr<std::vector<CompiledCudaUnit>> compiled = compileCudaUnits(sources, options, rep);
  if (!compiled.ok())
    return compiled.status();
  const size_t numTargets = options.targets.size();
  for (size_t i = 0; i < pending.size(); ++i) {
    pending[i].binaries = std::move((*compiled)[i].binaries);
    pending[i].fromCache = static_cast<int>((*compiled)[i].fromCache);
    pending[i].abiPtx = std::move((*compiled)[i].abiPtx);
  }

  // 3. Kernels into the manifest, steps and variants linked.
  std::map<std::string, int32_t> kernelIndex;
  for (PendingKernel &k : pending) {
    Kernel kernel;
    kernel.name = k.unit.name;
    kernel.blockDim.assign(k.unit.blockDim.begin(), k.unit.blockDim.end());
    kernel.sharedMemBytes = k.unit.dynamicSharedBytes;
    kernel.binaries = std::move(k.binaries);
    INGOT_ASSIGN_OR_RETURN(kernel.paramBytes,
                           kernelParamBytes(kernel.binaries, k.abiPtx, kernel.name));
    INGOT_RETURN_IF_ERROR(setKernelGrid(kernel));
    const std::string name = kernel.name;
    kernelIndex[name] = writer.addKernel(std::move(kernel));
    ++rep.kernels;
    rep.kernelsFromCache += k.fromCache == static_cast<int>(numTargets);
  }
  for (const AttentionKernelNeeds::Link &link : links)
    writer.setStepKernel(link.program, link.step, kernelIndex.at(link.decode));
  for (int32_t v : variantsWithKernels)
    writer.setDeviceFunction(static_cast<size_t>(v), contents.attentionVariants[v].name);
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return okStatus();
}

} // namespace ingot::compiler
