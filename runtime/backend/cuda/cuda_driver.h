// CudaDriver: the CUDA driver API, loaded at run time so the runtime starts without a GPU.
#pragma once

#include <cuda.h>

#include <memory>
#include <string>

#include "runtime/base/status.h"

namespace ingot {

/// The driver entry points Ingot uses, resolved from libcuda.so.1 with dlopen. A machine
/// without the NVIDIA driver gets an error from load(), never a failure to start.
class CudaDriver {
 public:
  /// Opens libcuda.so.1 and calls cuInit(0).
  static StatusOr<std::unique_ptr<CudaDriver>> load();
  ~CudaDriver();

  /// "cuModuleLoadData: CUDA_ERROR_NO_BINARY_FOR_GPU (no kernel image ...)" for `result`.
  std::string describe(const char* call, CUresult result) const;
  /// Ok for CUDA_SUCCESS, else an error naming the call and the driver's message.
  Status check(const char* call, CUresult result) const;

  decltype(&::cuDeviceGetCount) deviceGetCount = nullptr;
  decltype(&::cuDeviceGet) deviceGet = nullptr;
  decltype(&::cuDeviceGetName) deviceGetName = nullptr;
  decltype(&::cuDeviceGetAttribute) deviceGetAttribute = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) primaryCtxRetain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) primaryCtxRelease = nullptr;
  decltype(&::cuCtxSetCurrent) ctxSetCurrent = nullptr;
  decltype(&::cuCtxSynchronize) ctxSynchronize = nullptr;
  decltype(&::cuModuleLoadData) moduleLoadData = nullptr;
  decltype(&::cuModuleUnload) moduleUnload = nullptr;
  decltype(&::cuModuleGetFunction) moduleGetFunction = nullptr;
  decltype(&::cuMemAlloc) memAlloc = nullptr;
  decltype(&::cuMemFree) memFree = nullptr;
  decltype(&::cuMemcpyHtoD) memcpyHtoD = nullptr;
  decltype(&::cuMemcpyDtoH) memcpyDtoH = nullptr;
  decltype(&::cuLaunchKernel) launchKernel = nullptr;
  decltype(&::cuGetErrorName) getErrorName = nullptr;
  decltype(&::cuGetErrorString) getErrorString = nullptr;

 private:
  CudaDriver() = default;
  void* library_ = nullptr;
};

}  // namespace ingot
