// NcclLibrary: NCCL and the CUDA stream calls it needs, opened with dlopen at run time.
#include "runtime/dist/nccl_library.h"

#include "runtime/backend/cuda/cuda_driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <vector>

namespace ingot {
namespace {

/// Resolves `symbol` from `library` (named `file` in the error) into `fn`.
template <typename Fn>
Status resolve(void* library, const std::string& file, const char* symbol, Fn& fn) {
  fn = reinterpret_cast<Fn>(::dlsym(library, symbol));
  if (!fn) return unimplemented(file + " has no " + symbol + " (NCCL too old or not NCCL)");
  return okStatus();
}

std::string versionText(int code) {
  // NCCL_VERSION: X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z after.
  int major = code >= 10000 ? code / 10000 : code / 1000;
  int minor = code >= 10000 ? code / 100 % 100 : code / 100 % 10;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

}  // namespace

StatusOr<std::shared_ptr<const NcclLibrary>> NcclLibrary::loadFrom(const std::string& path) {
  void* nccl = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!nccl) return notFound(std::string(::dlerror()));
  std::shared_ptr<NcclLibrary> lib(new NcclLibrary());
  lib->nccl_ = nccl;
  lib->path_ = path;
  INGOT_RETURN_IF_ERROR(resolve(nccl, path, "ncclGetVersion", lib->getVersion));
  INGOT_RETURN_IF_ERROR(resolve(nccl, path, "ncclGetUniqueId", lib->getUniqueId));
  INGOT_RETURN_IF_ERROR(resolve(nccl, path, "ncclCommInitRankConfig", lib->commInitRankConfig));
  INGOT_RETURN_IF_ERROR(resolve(nccl, path, "ncclCommGetAsyncError", lib->commGetAsyncError));
  INGOT_RETURN_IF_ERROR(resolve(nccl, path, "ncclCommFinalize", lib->commFinalize));
  INGOT_RETURN_IF_ERROR(resolve(nccl, path, "ncclCommDestroy", lib->commDestroy));
  INGOT_RETURN_IF_ERROR(resolve(nccl, path, "ncclCommAbort", lib->commAbort));
  INGOT_RETURN_IF_ERROR(resolve(nccl, path, "ncclAllReduce", lib->allReduce));
  INGOT_RETURN_IF_ERROR(resolve(nccl, path, "ncclAllGather", lib->allGather));
  INGOT_RETURN_IF_ERROR(resolve(nccl, path, "ncclGetErrorString", lib->getErrorString));
  INGOT_RETURN_IF_ERROR(resolve(nccl, path, "ncclGetLastError", lib->getLastError));
  if (lib->getVersion(&lib->version_) != ncclSuccess)
    return internalError(path + ": ncclGetVersion failed");
  if (lib->version_ < kMinNcclVersion)
    return unimplemented(path + " is NCCL " + versionText(lib->version_) + "; Ingot needs " +
                         versionText(kMinNcclVersion) + " or newer");

  // NCCL itself needs the driver, so libcuda is loaded by now on any working machine (the
  // emulated CUDA stack is driver and NCCL in one library).
  StatusOr<std::string> emulated = emulatedCudaLibrary();
  const std::string cuda = emulated.ok() ? *emulated : "libcuda.so.1";
  lib->cuda_ = ::dlopen(cuda.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib->cuda_)
    return failedPrecondition(path + " opened, but NCCL needs the NVIDIA driver (" +
                              std::string(::dlerror()) + ")");
  INGOT_RETURN_IF_ERROR(resolve(lib->cuda_, cuda, "cuStreamCreate", lib->streamCreate));
  INGOT_RETURN_IF_ERROR(resolve(lib->cuda_, cuda, "cuStreamQuery", lib->streamQuery));
  INGOT_RETURN_IF_ERROR(resolve(lib->cuda_, cuda, "cuStreamDestroy_v2", lib->streamDestroy));
  INGOT_RETURN_IF_ERROR(resolve(lib->cuda_, cuda, "cuGetErrorName", lib->cuGetErrorName));
  lib->keepOpen_ = true;
  return std::shared_ptr<const NcclLibrary>(std::move(lib));
}

StatusOr<std::shared_ptr<const NcclLibrary>> NcclLibrary::load() {
  static std::mutex mu;
  static std::shared_ptr<const NcclLibrary> loaded;
  std::lock_guard<std::mutex> lock(mu);
  if (loaded) return loaded;

  if (StatusOr<std::string> emulated = emulatedCudaLibrary(); emulated.ok()) {
    auto lib = loadFrom(*emulated);
    if (!lib.ok()) return lib.status().withPrefix("the emulated NCCL (INGOT_CUDA_DRIVER=emulated)");
    return loaded = *lib;
  }
  if (const char* env = std::getenv("INGOT_NCCL_LIBRARY"); env && *env) {
    auto lib = loadFrom(env);
    if (!lib.ok())
      return lib.status().withPrefix("NCCL from $INGOT_NCCL_LIBRARY=" + std::string(env));
    return loaded = *lib;
  }
  std::vector<std::string> candidates = {"libnccl.so.2"};
#ifdef INGOT_NCCL_BUILD_LIBRARY
  candidates.push_back(INGOT_NCCL_BUILD_LIBRARY);
#endif
  std::string tried;
  for (const std::string& path : candidates) {
    auto lib = loadFrom(path);
    if (lib.ok()) return loaded = *lib;
    // A library that opened but is unusable (too old, missing symbols) is the answer.
    if (lib.status().code() != StatusCode::kNotFound) return lib.status();
    tried += (tried.empty() ? "" : "; ") + lib.status().message();
  }
  return notFound("NCCL not found (tried " + tried +
                  "); install NCCL 2.19 or newer or set INGOT_NCCL_LIBRARY to libnccl.so.2");
}

NcclLibrary::~NcclLibrary() {
  // A library that was accepted stays open: NCCL's proxy and bootstrap threads may outlive
  // the last communicator, and unloading code they run crashes the process at exit. One that
  // was refused never ran anything.
  if (keepOpen_) return;
  if (nccl_) ::dlclose(nccl_);
  if (cuda_) ::dlclose(cuda_);
}

std::string NcclLibrary::versionString() const { return versionText(version_); }

std::string NcclLibrary::describe(const char* call, ncclResult_t result, ncclComm_t comm) const {
  std::string text = std::string(call) + ": " +
                     (getErrorString ? getErrorString(result) : "NCCL error") + " (code " +
                     std::to_string(static_cast<int>(result)) + ")";
  const char* last = getLastError ? getLastError(comm) : nullptr;
  if (last && *last) text += ": " + std::string(last);
  return text;
}

std::string NcclLibrary::describeCuda(const char* call, CUresult result) const {
  const char* name = nullptr;
  if (cuGetErrorName) cuGetErrorName(result, &name);
  return std::string(call) + ": " + (name ? name : "CUDA error " + std::to_string(result));
}

}  // namespace ingot
