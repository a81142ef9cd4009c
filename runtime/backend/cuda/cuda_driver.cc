// CudaDriver: the CUDA driver API, loaded at run time so the runtime starts without a GPU.
#include "runtime/backend/cuda/cuda_driver.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <type_traits>
#include <utility>

namespace ingot {
namespace {

// (member, API name) for every entry point. The API name passes through cuda.h's macros
// before it is used, so `INGOT_CUDA_SYMBOL(api)` is the exported ABI symbol
// (cuMemGetInfo -> cuMemGetInfo_v2, cuGraphInstantiate -> cuGraphInstantiateWithFlags) and
// `decltype(&::api)` is the type of that symbol.
#define INGOT_CUDA_DRIVER_ENTRY_POINTS(X)                      \
  X(init, cuInit)                                              \
  X(driverGetVersion, cuDriverGetVersion)                      \
  X(deviceGetCount, cuDeviceGetCount)                          \
  X(deviceGet, cuDeviceGet)                                    \
  X(deviceGetName, cuDeviceGetName)                            \
  X(deviceGetAttribute, cuDeviceGetAttribute)                  \
  X(deviceTotalMem, cuDeviceTotalMem)                          \
  X(primaryCtxRetain, cuDevicePrimaryCtxRetain)                \
  X(primaryCtxRelease, cuDevicePrimaryCtxRelease)              \
  X(ctxSetCurrent, cuCtxSetCurrent)                            \
  X(ctxSynchronize, cuCtxSynchronize)                          \
  X(moduleLoadData, cuModuleLoadData)                          \
  X(moduleUnload, cuModuleUnload)                              \
  X(moduleGetFunction, cuModuleGetFunction)                    \
  X(funcSetAttribute, cuFuncSetAttribute)                      \
  X(launchKernel, cuLaunchKernel)                              \
  X(linkCreate, cuLinkCreate)                                  \
  X(linkAddData, cuLinkAddData)                                \
  X(linkComplete, cuLinkComplete)                              \
  X(linkDestroy, cuLinkDestroy)                                \
  X(memGetInfo, cuMemGetInfo)                                  \
  X(memAlloc, cuMemAlloc)                                      \
  X(memFree, cuMemFree)                                        \
  X(memAllocHost, cuMemAllocHost)                              \
  X(memFreeHost, cuMemFreeHost)                                \
  X(memcpyHtoD, cuMemcpyHtoD)                                  \
  X(memcpyDtoH, cuMemcpyDtoH)                                  \
  X(memcpyHtoDAsync, cuMemcpyHtoDAsync)                        \
  X(memcpyDtoHAsync, cuMemcpyDtoHAsync)                        \
  X(memcpyDtoDAsync, cuMemcpyDtoDAsync)                        \
  X(memcpy2DAsync, cuMemcpy2DAsync)                            \
  X(memsetD8Async, cuMemsetD8Async)                            \
  X(memsetD32Async, cuMemsetD32Async)                          \
  X(streamCreate, cuStreamCreate)                              \
  X(streamDestroy, cuStreamDestroy)                            \
  X(streamSynchronize, cuStreamSynchronize)                    \
  X(streamWaitEvent, cuStreamWaitEvent)                        \
  X(eventCreate, cuEventCreate)                                \
  X(eventDestroy, cuEventDestroy)                              \
  X(eventRecord, cuEventRecord)                                \
  X(eventSynchronize, cuEventSynchronize)                      \
  X(eventElapsedTime, cuEventElapsedTime)                      \
  X(streamBeginCapture, cuStreamBeginCapture)                  \
  X(streamEndCapture, cuStreamEndCapture)                      \
  X(graphInstantiate, cuGraphInstantiate)                      \
  X(graphLaunch, cuGraphLaunch)                                \
  X(graphExecDestroy, cuGraphExecDestroy)                      \
  X(graphDestroy, cuGraphDestroy)                              \
  X(getErrorName, cuGetErrorName)                              \
  X(getErrorString, cuGetErrorString)

#define INGOT_CUDA_STRINGIFY_(x) #x
/// The symbol `api` names after cuda.h's macros are applied (one extra expansion level).
#define INGOT_CUDA_SYMBOL(api) INGOT_CUDA_STRINGIFY_(api)

// The table and the header agree: each member has exactly the type of the symbol it gets.
#define INGOT_CUDA_CHECK_TYPE(member, api)                                             \
  static_assert(std::is_same_v<decltype(std::declval<CudaDriver&>().member), decltype(&::api)>, \
                "CudaDriver::" #member " does not have the type of " #api);
INGOT_CUDA_DRIVER_ENTRY_POINTS(INGOT_CUDA_CHECK_TYPE)
#undef INGOT_CUDA_CHECK_TYPE
// ... and every member is in the table (else it would stay null after load()): the class
// holds exactly the table's function pointers plus the library handle and the emulated flag
// (padded to a pointer).
#define INGOT_CUDA_COUNT(member, api) +1
static_assert(sizeof(CudaDriver) ==
                  sizeof(void*) * (2 + (0 INGOT_CUDA_DRIVER_ENTRY_POINTS(INGOT_CUDA_COUNT))),
              "a CudaDriver member is missing from INGOT_CUDA_DRIVER_ENTRY_POINTS");
#undef INGOT_CUDA_COUNT

/// Resolves `symbol` from `library` (opened from `path`) into `fn`.
template <typename Fn>
Status resolve(void* library, const std::string& path, const char* symbol, Fn& fn) {
  fn = reinterpret_cast<Fn>(::dlsym(library, symbol));
  if (!fn) return unimplemented(path + " has no " + symbol + " (driver too old?)");
  return okStatus();
}

}  // namespace

const std::vector<CudaDriverEntryPoint>& CudaDriver::entryPoints() {
#define INGOT_CUDA_ENTRY(member, api) {#member, INGOT_CUDA_SYMBOL(api)},
  static const std::vector<CudaDriverEntryPoint> table = {
      INGOT_CUDA_DRIVER_ENTRY_POINTS(INGOT_CUDA_ENTRY)};
#undef INGOT_CUDA_ENTRY
  return table;
}

StatusOr<std::string> emulatedCudaLibrary() {
  const char* choice = std::getenv("INGOT_CUDA_DRIVER");
  if (!choice || std::string(choice) != "emulated")
    return notFound("INGOT_CUDA_DRIVER is not \"emulated\"");
  constexpr const char* kName = "libingot_cuda_emulated.so";
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    std::string dir(exe, static_cast<size_t>(n));
    dir = dir.substr(0, dir.rfind('/'));
    const std::string beside = dir + "/../lib/" + kName;
    if (::access(beside.c_str(), R_OK) == 0) return beside;
  }
#ifdef INGOT_CUDA_EMULATED_LIBRARY
  if (::access(INGOT_CUDA_EMULATED_LIBRARY, R_OK) == 0) return std::string(INGOT_CUDA_EMULATED_LIBRARY);
#endif
  return failedPrecondition(std::string("INGOT_CUDA_DRIVER=emulated: no ") + kName +
                            " beside this binary (../lib) or in its build: build with "
                            "-DINGOT_BUILD_SIMT=ON");
}

StatusOr<std::unique_ptr<CudaDriver>> CudaDriver::load() {
  if (const char* choice = std::getenv("INGOT_CUDA_DRIVER"); choice && *choice) {
    std::string path = choice;
    if (path == "emulated") {
      StatusOr<std::string> emulated = emulatedCudaLibrary();
      if (!emulated.ok()) return emulated.status();
      path = *emulated;
    }
    StatusOr<std::unique_ptr<CudaDriver>> driver = loadFrom(path);
    if (!driver.ok()) return driver.status().withPrefix(std::string("INGOT_CUDA_DRIVER=") + choice);
    return driver;
  }
  StatusOr<std::unique_ptr<CudaDriver>> driver = loadFrom("libcuda.so.1");
  if (!driver.ok() && driver.status().code() == StatusCode::kNotFound)
    return notFound("no NVIDIA driver on this machine (" + driver.status().message() + ")");
  return driver;
}

StatusOr<std::unique_ptr<CudaDriver>> CudaDriver::loadFrom(const std::string& path) {
  void* library = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char* error = ::dlerror();
    std::string why = error ? error : "dlopen failed";
    // dlerror() usually starts with the name already ("libcuda.so.1: cannot open ...").
    return notFound(why.find(path) == std::string::npos ? path + ": " + why : why);
  }
  std::unique_ptr<CudaDriver> d(new CudaDriver());
  d->library_ = library;  // closed by the destructor, also on the error paths below
#define INGOT_CUDA_RESOLVE(member, api) \
  INGOT_RETURN_IF_ERROR(resolve(library, path, INGOT_CUDA_SYMBOL(api), d->member));
  INGOT_CUDA_DRIVER_ENTRY_POINTS(INGOT_CUDA_RESOLVE)
#undef INGOT_CUDA_RESOLVE
  d->emulated_ = ::dlsym(library, "ingotSimtEmulatedDriver") != nullptr;
  INGOT_RETURN_IF_ERROR(d->check("cuInit", d->init(0)));
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
