// PtxJitCache: PTX JIT-compiled by the driver's linker, kept on disk as cubins between runs.
#pragma once

#include <cuda.h>

#include <string>
#include <string_view>

#include "runtime/backend/cuda/cuda_driver.h"
#include "core/base/status.h"

namespace ingot {

/// The PTX JIT (cuLinkCreate / cuLinkAddData(CU_JIT_INPUT_PTX) / cuLinkComplete) for the
/// device of the current context, with a disk cache so a machine JITs a given PTX once per
/// GPU arch and driver: JIT output for generic compute_80 PTX takes seconds for a real model,
/// a cached cubin milliseconds.
///
/// An entry is `<dir>/<key>.cubin`, key = xxh64 of (PTX bytes, "sm_XY", driver version) in
/// 16 hex digits, written to a temporary file and renamed, so readers never see a partial
/// entry. An entry the driver refuses to load is deleted and rebuilt (one line on stderr);
/// a folder that cannot be written is a warning (once per cache), never an error.
class PtxJitCache {
 public:
  /// The folder for a KernelModuleOptions::ptx_cache_dir value: a path is itself; "" means
  /// $INGOT_PTX_CACHE, else $XDG_CACHE_HOME/ingot/ptx, else $HOME/.cache/ingot/ptx. "none"
  /// (as the option or the variable) and an empty $INGOT_PTX_CACHE disable the cache: "".
  static std::string resolveDir(const std::string& option);
  /// The entry name's key for `ptx` JIT-compiled for `arch` ("sm_90") by driver `version`.
  static std::string key(std::string_view ptx, const std::string& arch, int driverVersion);

  /// A cache in `dir` ("" = none: every load JITs) for a device of arch `arch` ("sm_90").
  /// Reads the driver version (part of the key) from `driver`.
  static StatusOr<PtxJitCache> open(CudaDriver& driver, std::string dir, std::string arch);

  /// Loads `ptx` as a module for the current context: the cached cubin when there is one that
  /// loads, else JIT-compiled and stored. `what` names the binary in errors ("kernel 'k'
  /// (compute_80)"); `fromCache` (optional) says whether the cache served it.
  StatusOr<CUmodule> load(std::string_view ptx, const std::string& what, bool* fromCache);

  /// JIT-compiles `ptx` for the current context's device; the cubin's bytes. Errors carry the
  /// JIT's error log.
  StatusOr<std::string> jit(std::string_view ptx, const std::string& what) const;

  const std::string& dir() const { return dir_; }

 private:
  PtxJitCache(CudaDriver& driver, std::string dir, std::string arch, int driverVersion)
      : driver_(&driver), dir_(std::move(dir)), arch_(std::move(arch)),
        driverVersion_(driverVersion) {}
  /// Writes `cubin` as the entry at `path` (temporary file + rename); false after warning.
  bool store(const std::string& path, const std::string& cubin);

  CudaDriver* driver_;
  std::string dir_;
  std::string arch_;
  int driverVersion_;
  bool warnedUnwritable_ = false;
};

}  // namespace ingot
