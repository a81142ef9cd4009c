//===- AttentionKernels.cpp - CUDA attention kernels into the artifact ----===//
#include "compiler/driver/AttentionKernels.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "codegen/cuda/AttentionKernelPlan.h"
#include "compiler/driver/CudaCompileJobs.h"

namespace ingot::compiler {
namespace {

/// The CUDA targets of `--cuda-targets all`, as in codegen/cuda/NvrtcCompiler.h (repeated
/// here so a build without NVRTC still knows what "all" means when it refuses it).
const std::vector<std::string> kAllTargets = {"sm_80",   "sm_89",      "sm_90a", "sm_100f",
                                              "sm_120f", "compute_80", "simt"};

/// sm_XY or compute_XY with an optional a/f suffix, XY two or three digits; or "simt" (the
/// source for the SIMT emulator).
bool isTargetName(const std::string &t) {
  if (t == "simt")
    return true;
  size_t prefix = t.rfind("sm_", 0) == 0 ? 3 : t.rfind("compute_", 0) == 0 ? 8 : 0;
  if (prefix == 0)
    return false;
  size_t end = t.size();
  if (end > prefix && (t.back() == 'a' || t.back() == 'f'))
    --end;
  if (end - prefix < 2 || end - prefix > 3)
    return false;
  return std::all_of(t.begin() + prefix, t.begin() + end, [](char c) { return c >= '0' && c <= '9'; });
}

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

std::string dtypeName(schema::DType d) {
  std::string name = schema::EnumNameDType(d);
  for (char &c : name)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

/// Struct name of the kernels of attention steps without a variant (no mask, no score).
constexpr const char *kDenseVariant = "dense";

/// One kernel to build: its unit and its binaries, filled by the compile jobs.
struct PendingKernel {
  codegen::AttentionKernelUnit unit;
  std::vector<KernelBinary> binaries;
  int fromCache = 0;
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
    if (!isTargetName(t))
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

/// The decode kernel of attention step `s` of program `p`, its units added to `needs`; ""
/// (with a warning) when no kernel takes the step's shape.
StatusOr<std::string> attentionStepKernel(const ArtifactContents &contents, size_t p, size_t s,
                                          AttentionKernelNeeds &needs,
                                          const std::function<void(std::string)> &warn) {
  using ShapeKey = AttentionKernelNeeds::ShapeKey;
  const Program &program = contents.programs[p];
  const ProgramStep &step = program.steps[s];
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
          : std::string(kDenseVariant);
  const std::string shapeText =
      "attention " + variantName + " with head dim " + std::to_string(*headDim) + ", " +
      std::to_string(*heads / *kvHeads) + " query heads per kv head, " +
      dtypeName(queryType) + " queries and " + dtypeName(*cacheType) + " KV cache";
  const char *cpuOnly = "; these steps run on the CPU backend only";
  const bool kvFp8 = *cacheType == schema::DType::F8E4M3FN;
  if ((queryType != *cacheType && !kvFp8) ||
      (queryType != schema::DType::F32 && queryType != schema::DType::BF16)) {
    warn("no CUDA kernels for " + shapeText +
         ": the kernels take f32 or bf16 queries and the same or an fp8 KV cache" +
         cpuOnly);
    return std::string();
  }
  codegen::AttentionShape shape;
  shape.dtype = queryType == schema::DType::F32 ? codegen::AttentionDtype::kF32
                                                : codegen::AttentionDtype::kBF16;
  shape.headDim = static_cast<int>(*headDim);
  shape.group = static_cast<int>(*heads / *kvHeads);
  shape.kvFp8 = kvFp8;
  if (std::string why = codegen::unsupportedAttentionShape(shape); !why.empty()) {
    warn("no CUDA kernels for " + shapeText + ": " + why + cpuOnly);
    return std::string();
  }
  if (!isIdentifier(variantName))
    return invalidArgument(where + ": variant name '" + variantName +
                           "' is not a C identifier, so it cannot name CUDA kernels");
  ShapeKey key{step.attentionVariant, shape.dtype, shape.headDim, shape.group, kvFp8};
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
  return it->second;
}

/// Step 1: every attention step of every program.
Status collectAttentionKernels(const ArtifactContents &contents, AttentionKernelNeeds &needs,
                               const std::function<void(std::string)> &warn) {
  for (size_t p = 0; p < contents.programs.size(); ++p) {
    const Program &program = contents.programs[p];
    for (size_t s = 0; s < program.steps.size(); ++s) {
      const ProgramStep &step = program.steps[s];
      if (step.op != schema::OpKind::Attention)
        continue;
      INGOT_ASSIGN_OR_RETURN(std::string decode,
                             attentionStepKernel(contents, p, s, needs, warn));
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
  std::set<std::string> warned;
  auto warn = [&](std::string message) {
    if (warned.insert(message).second)
      rep.warnings.push_back(std::move(message));
  };

  // 1. The kernels each (variant, shape) needs, and which steps use which decode kernel.
  AttentionKernelNeeds needs;
  INGOT_RETURN_IF_ERROR(collectAttentionKernels(contents, needs, warn));
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
  }

  // 3. Kernels into the manifest, steps and variants linked.
  std::map<std::string, int32_t> kernelIndex;
  for (PendingKernel &k : pending) {
    Kernel kernel;
    kernel.name = k.unit.name;
    kernel.blockDim.assign(k.unit.blockDim.begin(), k.unit.blockDim.end());
    kernel.sharedMemBytes = k.unit.dynamicSharedBytes;
    kernel.binaries = std::move(k.binaries);
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
