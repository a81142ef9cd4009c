// KernelModules: an artifact's CUDA kernels loaded for one GPU (cubin, else PTX JIT + cache).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/artifact/artifact_reader.h"
#include "core/artifact/kernel_binary.h"
#include "core/artifact/launch_grid.h"
#include "runtime/backend/cuda/cuda_driver.h"
#include "core/base/status.h"

namespace ingot {

/// A kernel ready to launch: its function and the launch shape its manifest entry gives.
struct LoadedKernel {
  CUfunction function = nullptr;
  unsigned block[3] = {1, 1, 1};
  unsigned shared_bytes = 0;  // dynamic shared memory per block
  /// The entry point's parameter sizes in bytes, in order (KernelDef.param_bytes): what
  /// checkKernelArgs (kernel_args.h) holds every launch to. Empty: not recorded, unchecked.
  std::vector<uint32_t> param_bytes;
  /// The kernel's name (its entry point), for messages.
  std::string name;
  /// How its grid follows from a launch's counts (KernelDef.grid, else the rule of its
  /// family for an artifact older than format 1.5); empty: no rule, the kernel cannot be
  /// launched (a name of no family in an old artifact).
  std::optional<GridRule> grid;
};

/// The grid of one launch of `k` over `counts` on a GPU of `sms` SMs (launch_grid.h). Fails,
/// naming the launch `what` and the kernel, when it has no rule or its rule reads a count
/// the launch does not give.
StatusOr<GridDims> launchGrid(const LoadedKernel& k, const GridCounts& counts, int sms,
                              const std::string& what);

/// The most bytes of parameters a kernel may take: 32764 with CUDA 12.1 or newer on Volta
/// (sm_70) and later (CUDA C++ Programming Guide, "Function Parameters"; 4 KiB before).
constexpr uint64_t kMaxKernelParamBytes = 32764;

struct KernelModuleOptions {
  /// PTX JIT cache folder: "" = $INGOT_PTX_CACHE, else $XDG_CACHE_HOME/ingot/ptx, else
  /// ~/.cache/ingot/ptx; "none" = no cache.
  std::string ptx_cache_dir;
  /// Ignore cubins and JIT the PTX (gpu-check's second pass).
  bool force_ptx = false;
};

/// How the binaries were loaded, counted per distinct binary (kernels sharing identical bytes
/// share one module): cubins loaded as they are, PTX JIT-compiled now, PTX served by the
/// JIT cache. `gpu` is "NVIDIA H200 (sm_90)".
struct KernelLoadReport {
  int cubins = 0, ptx_jit = 0, ptx_from_cache = 0;
  int simt = 0;  ///< source modules the SIMT emulator's driver built (emulated device)
  std::string gpu;
};

/// Every kernel of an artifact, loaded into the current context. Binary choice per kernel:
/// the cubin selectKernelBinary picks, else its PTX JIT-compiled through PtxJitCache, else
/// an error (docs/artifact-format.md, "Kernel binary choice"). Identical binaries are loaded
/// (and JIT-compiled) once. Unloads its modules when destroyed; the context must still be
/// alive then.
class KernelModules {
 public:
  /// Loads every kernel of `artifact` for `gpu` (a context must be current): the binary
  /// selectKernelBinary picks; a cubin via cuModuleLoadData; PTX via the JIT cache. A kernel
  /// without a usable binary is an error naming the GPU (name, sm_XY), the kernel and the
  /// targets the artifact carries. Sets CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES where
  /// shared_mem_bytes > 48 KiB. A kernel whose param_bytes has a 0 entry or more than
  /// kMaxKernelParamBytes in all is a corrupt artifact (dataLoss naming it).
  static StatusOr<std::unique_ptr<KernelModules>> load(CudaDriver& driver, const Artifact& artifact,
                                                       const GpuTarget& gpu,
                                                       const KernelModuleOptions& options = {});
  ~KernelModules();  // unloads
  KernelModules(const KernelModules&) = delete;
  KernelModules& operator=(const KernelModules&) = delete;

  /// The kernel `name` (its manifest launch shape); error naming it when absent.
  StatusOr<LoadedKernel> find(const std::string& name) const;
  bool has(const std::string& name) const;
  const KernelLoadReport& report() const { return report_; }
  /// Number of kernels loaded (all of the artifact's).
  size_t size() const { return kernels_.size(); }

 private:
  explicit KernelModules(CudaDriver& driver) : driver_(driver) {}

  CudaDriver& driver_;
  std::vector<CUmodule> modules_;
  std::unordered_map<std::string, LoadedKernel> kernels_;
  KernelLoadReport report_;
};

}  // namespace ingot
