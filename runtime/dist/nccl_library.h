// NcclLibrary: NCCL and the CUDA stream calls it needs, opened with dlopen at run time.
#pragma once

#include <cuda.h>
#include <nccl.h>

#include <memory>
#include <string>

#include "core/base/status.h"

namespace ingot {

/// Oldest NCCL the runtime accepts: nonblocking communicators, ncclCommGetAsyncError
/// polling of init, and ncclCommAbort of a communicator still initializing all behave as
/// documented from 2.19 on (NCCL_VERSION code 21900).
constexpr int kMinNcclVersion = 21900;

/// The NCCL entry points Ingot uses, resolved from libnccl.so.2, plus the three CUDA
/// driver stream calls the communicator needs (from libcuda.so.1, which CudaDriver has
/// already opened). Nothing links libnccl: it is 200+ MiB, absent on most machines without
/// GPUs, and a binary built here must start there; only a process that forms an NCCL group
/// opens it. NCCL carries its own static CUDA runtime, which uses the driver context current
/// on the calling thread, so it cooperates with the driver-API backend.
class NcclLibrary {
 public:
  /// The process-wide library, opened on first success. Looks in order at
  /// $INGOT_NCCL_LIBRARY (only there when it is set), then "libnccl.so.2" on the loader's
  /// search path, then the library CMake found at build time. The error lists every place
  /// tried and why each failed.
  static StatusOr<std::shared_ptr<const NcclLibrary>> load();
  /// Opens the library at `path` (not cached); for load() and tests.
  static StatusOr<std::shared_ptr<const NcclLibrary>> loadFrom(const std::string& path);
  ~NcclLibrary();
  NcclLibrary(const NcclLibrary&) = delete;
  NcclLibrary& operator=(const NcclLibrary&) = delete;

  /// NCCL_VERSION code of the opened library (22809 for 2.28.9) and its text form.
  int version() const { return version_; }
  std::string versionString() const;
  /// The file that was opened, for messages.
  const std::string& path() const { return path_; }

  /// "ncclAllReduce: remote process exited or there was a network error (<last error>)".
  std::string describe(const char* call, ncclResult_t result, ncclComm_t comm) const;
  /// "cuStreamQuery: CUDA_ERROR_LAUNCH_FAILED (...)".
  std::string describeCuda(const char* call, CUresult result) const;

  decltype(&::ncclGetVersion) getVersion = nullptr;
  decltype(&::ncclGetUniqueId) getUniqueId = nullptr;
  decltype(&::ncclCommInitRankConfig) commInitRankConfig = nullptr;
  decltype(&::ncclCommGetAsyncError) commGetAsyncError = nullptr;
  decltype(&::ncclCommFinalize) commFinalize = nullptr;
  decltype(&::ncclCommDestroy) commDestroy = nullptr;
  decltype(&::ncclCommAbort) commAbort = nullptr;
  decltype(&::ncclAllReduce) allReduce = nullptr;
  decltype(&::ncclAllGather) allGather = nullptr;
  decltype(&::ncclGetErrorString) getErrorString = nullptr;
  decltype(&::ncclGetLastError) getLastError = nullptr;

  decltype(&::cuStreamCreate) streamCreate = nullptr;
  decltype(&::cuStreamQuery) streamQuery = nullptr;
  decltype(&::cuStreamDestroy) streamDestroy = nullptr;
  decltype(&::cuGetErrorName) cuGetErrorName = nullptr;

 private:
  NcclLibrary() = default;
  void* nccl_ = nullptr;
  void* cuda_ = nullptr;
  bool keepOpen_ = false;  // set once the library is accepted
  int version_ = 0;
  std::string path_;
};

}  // namespace ingot
