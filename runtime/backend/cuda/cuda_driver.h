// CudaDriver: the CUDA driver API, loaded at run time so the runtime starts without a GPU.
#pragma once

#include <cuda.h>

#include <memory>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace ingot {

/// One entry point CudaDriver resolves: its member name and the exported symbol, which is the
/// ABI version cuda.h's macros map the API name to (cuMemGetInfo -> "cuMemGetInfo_v2").
struct CudaDriverEntryPoint {
  const char* member;  // e.g. "memGetInfo"
  const char* symbol;  // e.g. "cuMemGetInfo_v2"
};

/// The emulated CUDA stack (driver, cuBLASLt and NCCL in one library over the SIMT emulator,
/// testing/cuda/fake_libcuda.cc in its executing mode) when INGOT_CUDA_DRIVER is
/// "emulated": its path, beside the running binary (../lib) or where this build put it.
/// Nothing else selects it: a real run never falls back to emulation. NotFound when the
/// variable is not "emulated"; an error when this build has no emulated stack.
StatusOr<std::string> emulatedCudaLibrary();

/// The driver entry points Ingot uses, resolved from libcuda.so.1 with dlopen. A machine
/// without the NVIDIA driver gets an error from load(), never a failure to start. Every
/// member is non-null after a successful load(); a driver missing one is an error naming it.
class CudaDriver {
 public:
  /// Opens libcuda.so.1 and calls cuInit(0); with INGOT_CUDA_DRIVER=emulated the emulated
  /// driver instead (emulatedCudaLibrary), with INGOT_CUDA_DRIVER=<path> that library.
  static StatusOr<std::unique_ptr<CudaDriver>> load();
  /// Same from the library at `path` (a fake driver in tests, a specific driver install).
  static StatusOr<std::unique_ptr<CudaDriver>> loadFrom(const std::string& path);
  /// Every (member, symbol) pair load() resolves, in resolution order; the symbol names are
  /// taken from cuda.h's own macros, so they always match the members' declared types.
  static const std::vector<CudaDriverEntryPoint>& entryPoints();
  ~CudaDriver();

  /// "cuModuleLoadData: CUDA_ERROR_NO_BINARY_FOR_GPU (no kernel image ...)" for `result`.
  std::string describe(const char* call, CUresult result) const;
  /// Ok for CUDA_SUCCESS, else an error naming the call and the driver's message.
  Status check(const char* call, CUresult result) const;
  /// Whether this is the SIMT emulator's driver (its kernels are "simt" source binaries).
  bool emulated() const { return emulated_; }

  // Initialization, devices, contexts.
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuDriverGetVersion) driverGetVersion = nullptr;
  decltype(&::cuDeviceGetCount) deviceGetCount = nullptr;
  decltype(&::cuDeviceGet) deviceGet = nullptr;
  decltype(&::cuDeviceGetName) deviceGetName = nullptr;
  decltype(&::cuDeviceGetAttribute) deviceGetAttribute = nullptr;
  decltype(&::cuDeviceTotalMem) deviceTotalMem = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) primaryCtxRetain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) primaryCtxRelease = nullptr;
  decltype(&::cuCtxSetCurrent) ctxSetCurrent = nullptr;
  decltype(&::cuCtxSynchronize) ctxSynchronize = nullptr;
  // Modules, kernels, the PTX JIT linker.
  decltype(&::cuModuleLoadData) moduleLoadData = nullptr;
  decltype(&::cuModuleUnload) moduleUnload = nullptr;
  decltype(&::cuModuleGetFunction) moduleGetFunction = nullptr;
  decltype(&::cuFuncSetAttribute) funcSetAttribute = nullptr;
  decltype(&::cuLaunchKernel) launchKernel = nullptr;
  decltype(&::cuLinkCreate) linkCreate = nullptr;
  decltype(&::cuLinkAddData) linkAddData = nullptr;
  decltype(&::cuLinkComplete) linkComplete = nullptr;
  decltype(&::cuLinkDestroy) linkDestroy = nullptr;
  // Memory.
  decltype(&::cuMemGetInfo) memGetInfo = nullptr;
  decltype(&::cuMemAlloc) memAlloc = nullptr;
  decltype(&::cuMemFree) memFree = nullptr;
  decltype(&::cuMemAllocHost) memAllocHost = nullptr;
  decltype(&::cuMemFreeHost) memFreeHost = nullptr;
  decltype(&::cuMemcpyHtoD) memcpyHtoD = nullptr;
  decltype(&::cuMemcpyDtoH) memcpyDtoH = nullptr;
  decltype(&::cuMemcpyHtoDAsync) memcpyHtoDAsync = nullptr;
  decltype(&::cuMemcpyDtoHAsync) memcpyDtoHAsync = nullptr;
  decltype(&::cuMemcpyDtoDAsync) memcpyDtoDAsync = nullptr;
  /// Strided copies (a tensor-parallel all_gather's slices put side by side).
  decltype(&::cuMemcpy2DAsync) memcpy2DAsync = nullptr;
  decltype(&::cuMemsetD8Async) memsetD8Async = nullptr;
  decltype(&::cuMemsetD32Async) memsetD32Async = nullptr;
  // Streams and events.
  decltype(&::cuStreamCreate) streamCreate = nullptr;
  decltype(&::cuStreamDestroy) streamDestroy = nullptr;
  decltype(&::cuStreamSynchronize) streamSynchronize = nullptr;
  decltype(&::cuStreamWaitEvent) streamWaitEvent = nullptr;
  decltype(&::cuEventCreate) eventCreate = nullptr;
  decltype(&::cuEventDestroy) eventDestroy = nullptr;
  decltype(&::cuEventRecord) eventRecord = nullptr;
  decltype(&::cuEventSynchronize) eventSynchronize = nullptr;
  decltype(&::cuEventElapsedTime) eventElapsedTime = nullptr;
  // CUDA graphs (stream capture).
  decltype(&::cuStreamBeginCapture) streamBeginCapture = nullptr;
  decltype(&::cuStreamEndCapture) streamEndCapture = nullptr;
  /// cuGraphInstantiateWithFlags (what cuda.h 12+ maps cuGraphInstantiate to).
  decltype(&::cuGraphInstantiate) graphInstantiate = nullptr;
  decltype(&::cuGraphLaunch) graphLaunch = nullptr;
  decltype(&::cuGraphExecDestroy) graphExecDestroy = nullptr;
  decltype(&::cuGraphDestroy) graphDestroy = nullptr;
  // Errors.
  decltype(&::cuGetErrorName) getErrorName = nullptr;
  decltype(&::cuGetErrorString) getErrorString = nullptr;

 private:
  CudaDriver() = default;
  void* library_ = nullptr;
  bool emulated_ = false;
};

}  // namespace ingot
