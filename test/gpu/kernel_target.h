// Builds a test's or benchmark's kernel source for the device in use and loads it.
#pragma once

#include <cuda.h>
#include <dlfcn.h>

#include <string>
#include <vector>

#include "codegen/cuda/NvrtcCompiler.h"
#include "core/artifact/kernel_binary.h"
#include "runtime/backend/cuda/cuda_driver.h"

namespace ingot {

/// The binary to build kernels into for `gpu`: its own cubin ("sm_90"), or with `viaPtx`
/// the generic PTX ("compute_80") the driver JIT-compiles, the path an artifact takes on a
/// GPU it has no cubin for. On the SIMT emulator (INGOT_CUDA_DRIVER=emulated) the source
/// ("simt"), whatever `viaPtx` says: the emulator runs the source, it has no PTX JIT.
inline std::string kernelTarget(const GpuTarget &gpu, bool viaPtx = false) {
  if (gpu.emulated) return "simt";
  return viaPtx ? "compute_80" : "sm_" + std::to_string(gpu.major) + std::to_string(gpu.minor);
}

/// Why a test of the PTX JIT path does not run on `gpu`, or null where it does: the SIMT
/// emulator has no PTX JIT (its test of the cubin path already runs the source).
inline const char *noPtxJit(const GpuTarget &gpu) {
  return gpu.emulated ? "the SIMT emulator has no PTX JIT: the cubin case runs this source" : nullptr;
}

/// A size for a test on `gpu`: `real` on a GPU; on the SIMT emulator, whose speed figures
/// mean nothing (it runs the same code at CPU speed, thousands of times slower), `emulated`,
/// small enough that a speed test there just runs its code once more.
template <class T>
T sizeFor(const GpuTarget &gpu, T real, T emulated) {
  return gpu.emulated ? emulated : real;
}

/// "" on a GPU; a note for speed figures measured on the SIMT emulator.
inline const char *speedNote(const GpuTarget &gpu) {
  return gpu.emulated ? " [emulated: CPU time, meaningless as GPU speed]" : "";
}

/// While alive, the SIMT emulator's tensor cores use a deliberately wrong fragment layout
/// (the emulated driver's fakeCudaSetScrambledFragments): a test that compares kernels built
/// on mma.sync or wmma with a reference must then fail. `ok()` is false off the emulator.
class ScrambledTensorCores {
 public:
  ScrambledTensorCores() {
    StatusOr<std::string> path = emulatedCudaLibrary();
    if (!path.ok()) return;
    library_ = ::dlopen(path->c_str(), RTLD_NOW | RTLD_LOCAL);  // the one already loaded
    if (library_)
      set_ = reinterpret_cast<void (*)(int)>(::dlsym(library_, "fakeCudaSetScrambledFragments"));
    if (set_) set_(1);
  }
  ~ScrambledTensorCores() {
    if (set_) set_(0);
    if (library_) ::dlclose(library_);
  }
  ScrambledTensorCores(const ScrambledTensorCores &) = delete;
  ScrambledTensorCores &operator=(const ScrambledTensorCores &) = delete;
  bool ok() const { return set_ != nullptr; }

 private:
  void *library_ = nullptr;
  void (*set_)(int) = nullptr;
};

/// Compiles `source` (named `name` in diagnostics) for `target` and loads it into the current
/// context.
inline StatusOr<CUmodule> loadKernelModule(CudaDriver &cu, const std::string &source,
                                           const std::string &name, const std::string &target) {
  StatusOr<std::vector<codegen::CudaBinary>> bin =
      codegen::compileCuda(source, name + ".cu", {target});
  if (!bin.ok()) return bin.status().withPrefix("building " + name + " for " + target);
  std::vector<uint8_t> image = (*bin)[0].data;
  image.push_back(0);  // PTX and the emulator's source are loaded as NUL-terminated text
  CUmodule module = nullptr;
  INGOT_RETURN_IF_ERROR(cu.check("cuModuleLoadData", cu.moduleLoadData(&module, image.data()))
                            .withPrefix(name + " for " + target));
  return module;
}

}  // namespace ingot
