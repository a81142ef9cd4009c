// CudaDriver: the CUDA driver API, loaded at run time so the runtime starts without a GPU.
#include "runtime/backend/cuda/cuda_driver.h"

#include <dlfcn.h>

namespace ingot {
namespace {

/// Resolves `symbol` (the versioned name cuda.h maps the API name to) into `fn`.
template <typename Fn>
Status resolve(void* library, const char* symbol, Fn& fn) {
  fn = reinterpret_cast<Fn>(::dlsym(library, symbol));
  if (!fn) return unimplemented(std::string("libcuda.so.1 has no ") + symbol);
  return okStatus();
}

}  // namespace

StatusOr<std::unique_ptr<CudaDriver>> CudaDriver::load() {
  void* library = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library)
    return notFound("no NVIDIA driver on this machine (libcuda.so.1: " +
                    std::string(::dlerror()) + ")");
  std::unique_ptr<CudaDriver> d(new CudaDriver());
  d->library_ = library;
  decltype(&::cuInit) init = nullptr;
  // Symbol names are the ABI versions cuda.h's macros select (e.g. cuMemAlloc_v2).
  INGOT_RETURN_IF_ERROR(resolve(library, "cuInit", init));
  INGOT_RETURN_IF_ERROR(resolve(library, "cuDeviceGetCount", d->deviceGetCount));
  INGOT_RETURN_IF_ERROR(resolve(library, "cuDeviceGet", d->deviceGet));
  INGOT_RETURN_IF_ERROR(resolve(library, "cuDeviceGetName", d->deviceGetName));
  INGOT_RETURN_IF_ERROR(resolve(library, "cuDeviceGetAttribute", d->deviceGetAttribute));
  INGOT_RETURN_IF_ERROR(resolve(library, "cuDevicePrimaryCtxRetain", d->primaryCtxRetain));
  INGOT_RETURN_IF_ERROR(resolve(library, "cuDevicePrimaryCtxRelease_v2", d->primaryCtxRelease));
  INGOT_RETURN_IF_ERROR(resolve(library, "cuCtxSetCurrent", d->ctxSetCurrent));
  INGOT_RETURN_IF_ERROR(resolve(library, "cuCtxSynchronize", d->ctxSynchronize));
  INGOT_RETURN_IF_ERROR(resolve(library, "cuModuleLoadData", d->moduleLoadData));
  INGOT_RETURN_IF_ERROR(resolve(library, "cuModuleUnload", d->moduleUnload));
  INGOT_RETURN_IF_ERROR(resolve(library, "cuModuleGetFunction", d->moduleGetFunction));
  INGOT_RETURN_IF_ERROR(resolve(library, "cuMemAlloc_v2", d->memAlloc));
  INGOT_RETURN_IF_ERROR(resolve(library, "cuMemFree_v2", d->memFree));
  INGOT_RETURN_IF_ERROR(resolve(library, "cuMemcpyHtoD_v2", d->memcpyHtoD));
  INGOT_RETURN_IF_ERROR(resolve(library, "cuMemcpyDtoH_v2", d->memcpyDtoH));
  INGOT_RETURN_IF_ERROR(resolve(library, "cuLaunchKernel", d->launchKernel));
  INGOT_RETURN_IF_ERROR(resolve(library, "cuGetErrorName", d->getErrorName));
  INGOT_RETURN_IF_ERROR(resolve(library, "cuGetErrorString", d->getErrorString));
  INGOT_RETURN_IF_ERROR(d->check("cuInit", init(0)));
  return d;
}

CudaDriver::~CudaDriver() {
  if (library_) ::dlclose(library_);
}

std::string CudaDriver::describe(const char* call, CUresult result) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (getErrorName) getErrorName(result, &name);
  if (getErrorString) getErrorString(result, &text);
  return std::string(call) + ": " + (name ? name : "CUDA error " + std::to_string(result)) +
         (text ? std::string(" (") + text + ")" : "");
}

Status CudaDriver::check(const char* call, CUresult result) const {
  if (result == CUDA_SUCCESS) return okStatus();
  return internalError(describe(call, result));
}

}  // namespace ingot
