// KernelModules: an artifact's CUDA kernels loaded for one GPU (cubin, else PTX JIT + cache).
#include "runtime/backend/cuda/kernel_modules.h"

#include <optional>
#include <string_view>
#include <utility>

#include "core/artifact/manifest_checks.h"
#include "runtime/backend/cuda/ptx_jit_cache.h"

namespace ingot {
namespace {

/// Shared memory a block may use without opting in (cuFuncSetAttribute), on every arch since
/// sm_70; more needs CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES.
constexpr unsigned kSharedBytesWithoutOptIn = 48u << 10;

std::string archName(const GpuTarget& gpu) {
  return "sm_" + std::to_string(gpu.major) + std::to_string(gpu.minor);
}

/// selectKernelBinary over the kernel's PTX binaries alone (KernelModuleOptions::force_ptx).
StatusOr<const schema::KernelBinaryDef*> selectPtx(const schema::KernelDef& kernel,
                                                   const GpuTarget& gpu) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<schema::KernelBinaryDef>> targets;
  std::vector<const schema::KernelBinaryDef*> originals;
  if (kernel.binaries()) {
    for (const schema::KernelBinaryDef* binary : *kernel.binaries()) {
      if (binary->format() != schema::BinaryFormat::Ptx) continue;
      targets.push_back(schema::CreateKernelBinaryDef(fbb, fbb.CreateString(binary->target()),
                                                      schema::BinaryFormat::Ptx));
      originals.push_back(binary);
    }
  }
  auto name = fbb.CreateString(kernel.name());
  fbb.Finish(schema::CreateKernelDef(fbb, name, 0, 0, fbb.CreateVector(targets)));
  const auto* ptxOnly = flatbuffers::GetRoot<schema::KernelDef>(fbb.GetBufferPointer());
  StatusOr<const schema::KernelBinaryDef*> chosen = selectKernelBinary(*ptxOnly, gpu);
  if (!chosen.ok()) return chosen.status().withPrefix("with cubins ignored (force_ptx)");
  for (size_t i = 0; i < originals.size(); ++i)
    if (ptxOnly->binaries()->Get(i) == *chosen) return originals[i];
  return internalError("force_ptx: chosen PTX binary not found");
}

/// What the manifest says of `kernel` (`what` names it): its launch shape and parameter
/// sizes, checked; the function is found later.
StatusOr<LoadedKernel> manifestEntry(const schema::KernelDef& kernel, const std::string& what) {
  LoadedKernel entry;
  entry.name = kernel.name()->str();
  if (const auto* dims = kernel.block_dim()) {
    if (dims->size() > 3)
      return dataLoss(what + ": block_dim has " + std::to_string(dims->size()) +
                      " entries (at most 3: x, y, z)");
    for (uint32_t i = 0; i < dims->size(); ++i) {
      if (dims->Get(i) == 0) return dataLoss(what + ": block_dim[" + std::to_string(i) + "] is 0");
      entry.block[i] = dims->Get(i);
    }
  }
  entry.shared_bytes = kernel.shared_mem_bytes();
  if (const auto* params = kernel.param_bytes()) {
    uint64_t total = 0;
    for (uint32_t i = 0; i < params->size(); ++i) {
      if (params->Get(i) == 0)
        return dataLoss(what + ": param_bytes[" + std::to_string(i) + "] is 0");
      total += params->Get(i);
    }
    if (total > kMaxKernelParamBytes)
      return dataLoss(what + ": its parameters take " + std::to_string(total) +
                      " bytes, more than a kernel may (" + std::to_string(kMaxKernelParamBytes) +
                      ")");
    entry.param_bytes.assign(params->begin(), params->end());
  }
  // The grid rule: the artifact's (format 1.5), else its family's by name (older artifacts).
  if (const auto* grid = kernel.grid()) {
    if (grid->size() != 3)
      return dataLoss(what + ": grid has " + std::to_string(grid->size()) +
                      " axes (x, y, z: 3)");
    GridRule rule;
    for (uint32_t i = 0; i < 3; ++i) rule[i] = *grid->Get(i);
    if (std::string problem = gridRuleProblem(rule); !problem.empty())
      return dataLoss(what + ": " + problem);
    entry.grid = rule;
  } else {
    entry.grid = kernelGridRule(entry.name, entry.block[0]);
  }
  return entry;
}

}  // namespace

StatusOr<std::unique_ptr<KernelModules>> KernelModules::load(CudaDriver& driver,
                                                             const Artifact& artifact,
                                                             const GpuTarget& gpu,
                                                             const KernelModuleOptions& options) {
  std::unique_ptr<KernelModules> self(new KernelModules(driver));
  const std::string arch = archName(gpu);
  self->report_.gpu = (gpu.name.empty() ? std::string("(unnamed GPU)") : gpu.name) + " (" +
                      arch + ")";
  std::optional<PtxJitCache> cache;  // opened at the first PTX binary
  // The module already loaded for a binary's bytes, per format (0 = cubin, 1 = PTX); the
  // views point into the artifact, which outlives this call.
  std::unordered_map<std::string_view, CUmodule> loaded[2];

  const auto* kernels = artifact.manifest().kernels();
  if (!kernels) return self;
  for (const schema::KernelDef* kernel : *kernels) {
    const std::string name = kernel->name()->str();
    const std::string what = "kernel '" + displayName(kernel->name()) + "'";
    if (self->kernels_.count(name))
      return dataLoss("the artifact has two kernels named '" + displayName(kernel->name()) + "'");
    INGOT_ASSIGN_OR_RETURN(LoadedKernel entry, manifestEntry(*kernel, what));

    StatusOr<const schema::KernelBinaryDef*> chosen =
        options.force_ptx ? selectPtx(*kernel, gpu) : selectKernelBinary(*kernel, gpu);
    if (!chosen.ok()) return chosen.status();
    const schema::KernelBinaryDef& binary = **chosen;
    const std::string target = displayName(binary.target());
    if (!binary.data() || binary.data()->size() == 0)
      return dataLoss(what + ": its " + target + " binary is empty");
    std::string_view bytes(reinterpret_cast<const char*>(binary.data()->data()),
                           binary.data()->size());
    const bool isPtx = binary.format() == schema::BinaryFormat::Ptx;

    CUmodule& module = loaded[isPtx ? 1 : 0][bytes];
    if (!module) {
      if (isPtx) {
        if (!cache) {
          StatusOr<PtxJitCache> opened = PtxJitCache::open(
              driver, PtxJitCache::resolveDir(options.ptx_cache_dir), arch);
          if (!opened.ok()) return opened.status();
          cache.emplace(std::move(opened).value());
        }
        bool fromCache = false;
        StatusOr<CUmodule> jitted = cache->load(bytes, what + " (" + target + ")", &fromCache);
        if (!jitted.ok()) return jitted.status();
        module = *jitted;
        ++(fromCache ? self->report_.ptx_from_cache : self->report_.ptx_jit);
      } else {
        // A private, aligned copy of the mapped bytes (NUL-terminated: a "simt" binary is
        // the emulator's source image, text).
        std::string image(bytes);
        const bool source = binary.format() == schema::BinaryFormat::Source;
        CUresult r = driver.moduleLoadData(&module, image.c_str());
        if (r != CUDA_SUCCESS) {
          module = nullptr;
          return internalError(what + ": loading its " + target + (source ? " source" : " cubin") +
                               " on " + self->report_.gpu + ": " +
                               driver.describe("cuModuleLoadData", r));
        }
        ++(source ? self->report_.simt : self->report_.cubins);
      }
      self->modules_.push_back(module);
    }

    CUresult r = driver.moduleGetFunction(&entry.function, module, name.c_str());
    if (r != CUDA_SUCCESS)
      return dataLoss(what + ": its " + target + " binary has no entry point of that name: " +
                      driver.describe("cuModuleGetFunction", r));
    if (entry.shared_bytes > kSharedBytesWithoutOptIn) {
      r = driver.funcSetAttribute(entry.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                  static_cast<int>(entry.shared_bytes));
      if (r != CUDA_SUCCESS)
        return failedPrecondition(what + " needs " + std::to_string(entry.shared_bytes) +
                                  " bytes of dynamic shared memory, more than " +
                                  self->report_.gpu + " allows: " +
                                  driver.describe("cuFuncSetAttribute", r));
    }
    self->kernels_.emplace(name, std::move(entry));
  }
  return self;
}

KernelModules::~KernelModules() {
  for (auto it = modules_.rbegin(); it != modules_.rend(); ++it) driver_.moduleUnload(*it);
}

StatusOr<LoadedKernel> KernelModules::find(const std::string& name) const {
  auto it = kernels_.find(name);
  if (it == kernels_.end())
    return notFound("no kernel '" + name + "' among the artifact's " +
                    std::to_string(kernels_.size()) + " loaded kernels");
  return it->second;
}

bool KernelModules::has(const std::string& name) const { return kernels_.count(name) != 0; }

StatusOr<GridDims> launchGrid(const LoadedKernel& k, const GridCounts& counts, int sms,
                              const std::string& what) {
  if (!k.grid)
    return failedPrecondition(what + ": kernel " + k.name +
                              " has no grid rule (an artifact older than format 1.5 with a "
                              "kernel of no family this runtime knows); recompile it");
  StatusOr<GridDims> dims = evaluateGrid(*k.grid, counts, sms);
  if (!dims.ok()) return dims.status().withPrefix(what + ": kernel " + k.name);
  return dims;
}

}  // namespace ingot
