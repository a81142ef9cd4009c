// PtxJitCache: PTX JIT-compiled by the driver's linker, kept on disk as cubins between runs.
#include "runtime/backend/cuda/ptx_jit_cache.h"

#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

namespace ingot {
namespace {

/// Bumped when what an entry holds changes, so old entries are simply never looked up.
constexpr const char* kKeyDomain = "ingot-ptx-jit-v1";
/// The JIT's error log; ptxas errors are a few lines each.
constexpr size_t kJitLogBytes = 16 << 10;

/// Reads the whole file at `path`; false when it cannot be opened or read.
bool readFile(const std::string& path, std::string* bytes) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return false;
  bytes->clear();
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), f.get())) > 0) bytes->append(buffer, n);
  return !std::ferror(f.get());
}

}  // namespace

std::string PtxJitCache::resolveDir(const std::string& option) {
  if (option == "none") return "";
  if (!option.empty()) return option;
  if (const char* env = std::getenv("INGOT_PTX_CACHE")) {
    std::string value = env;
    return value == "none" ? "" : value;  // set but empty: no cache, as INGOT_KERNEL_CACHE
  }
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg) return std::string(xdg) + "/ingot/ptx";
  const char* home = std::getenv("HOME");
  if (home && *home) return std::string(home) + "/.cache/ingot/ptx";
  return "";  // nowhere to keep it
}

std::string PtxJitCache::key(std::string_view ptx, const std::string& arch, int driverVersion) {
  std::unique_ptr<XXH64_state_t, XXH_errorcode (*)(XXH64_state_t*)> state(XXH64_createState(),
                                                                          &XXH64_freeState);
  XXH64_reset(state.get(), 0);
  // Each part is followed by a NUL, so no two different inputs hash the same byte stream.
  std::string version = std::to_string(driverVersion);
  for (std::string_view part : {std::string_view(kKeyDomain), ptx, std::string_view(arch),
                                std::string_view(version)}) {
    XXH64_update(state.get(), part.data(), part.size());
    XXH64_update(state.get(), "", 1);
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx",
                static_cast<unsigned long long>(XXH64_digest(state.get())));
  return hex;
}

StatusOr<PtxJitCache> PtxJitCache::open(CudaDriver& driver, std::string dir, std::string arch) {
  int version = 0;
  INGOT_RETURN_IF_ERROR(driver.check("cuDriverGetVersion", driver.driverGetVersion(&version)));
  return PtxJitCache(driver, std::move(dir), std::move(arch), version);
}

StatusOr<std::string> PtxJitCache::jit(std::string_view ptx, const std::string& what) const {
  std::string log(kJitLogBytes, '\0');
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {log.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(log.size()))};
  auto failure = [&](const char* call, CUresult result) {
    std::string text = log.c_str();
    return internalError(what + ": PTX JIT for " + arch_ + ": " + driver_->describe(call, result) +
                         (text.empty() ? "" : ": " + text));
  };
  CUlinkState state = nullptr;
  CUresult r = driver_->linkCreate(2, options, values, &state);
  if (r != CUDA_SUCCESS) return failure("cuLinkCreate", r);
  std::unique_ptr<CUlinkState_st, CUresult (*)(CUlinkState)> link(state, driver_->linkDestroy);
  std::string input(ptx);  // the JIT reads PTX as a NUL-terminated string
  r = driver_->linkAddData(state, CU_JIT_INPUT_PTX, input.data(), input.size() + 1, "ingot.ptx",
                           0, nullptr, nullptr);
  if (r != CUDA_SUCCESS) return failure("cuLinkAddData", r);
  void* cubin = nullptr;
  size_t size = 0;
  r = driver_->linkComplete(state, &cubin, &size);
  if (r != CUDA_SUCCESS) return failure("cuLinkComplete", r);
  if (!cubin || size == 0) return internalError(what + ": PTX JIT for " + arch_ + " gave no cubin");
  return std::string(static_cast<const char*>(cubin), size);  // owned by the link state
}

StatusOr<CUmodule> PtxJitCache::load(std::string_view ptx, const std::string& what,
                                     bool* fromCache) {
  if (fromCache) *fromCache = false;
  std::string path;
  if (!dir_.empty()) {
    path = dir_ + "/" + key(ptx, arch_, driverVersion_) + ".cubin";
    std::string cached;
    if (readFile(path, &cached)) {
      CUmodule module = nullptr;
      CUresult r = driver_->moduleLoadData(&module, cached.c_str());
      if (r == CUDA_SUCCESS) {
        if (fromCache) *fromCache = true;
        return module;
      }
      std::fprintf(stderr, "ingot: PTX cache entry %s does not load (%s); rebuilding it\n",
                   path.c_str(), driver_->describe("cuModuleLoadData", r).c_str());
      std::remove(path.c_str());
    }
  }
  INGOT_ASSIGN_OR_RETURN(std::string cubin, jit(ptx, what));
  if (!path.empty()) store(path, cubin);
  CUmodule module = nullptr;
  CUresult r = driver_->moduleLoadData(&module, cubin.c_str());
  if (r != CUDA_SUCCESS)
    return internalError(what + ": loading the JIT output for " + arch_ + ": " +
                         driver_->describe("cuModuleLoadData", r));
  return module;
}

bool PtxJitCache::store(const std::string& path, const std::string& cubin) {
  static std::atomic<unsigned> counter{0};
  auto warn = [&](const std::string& why) {
    if (!warnedUnwritable_)
      std::fprintf(stderr,
                   "ingot: warning: PTX cache folder %s is not writable (%s); JIT results are "
                   "not kept (INGOT_PTX_CACHE picks another folder, 'none' turns it off)\n",
                   dir_.c_str(), why.c_str());
    warnedUnwritable_ = true;
    return false;
  };
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return warn(ec.message());
  std::string temp = path + ".tmp." + std::to_string(::getpid()) + "." +
                     std::to_string(counter.fetch_add(1));
  FILE* f = std::fopen(temp.c_str(), "wb");
  if (!f) return warn(std::strerror(errno));
  bool written = std::fwrite(cubin.data(), 1, cubin.size(), f) == cubin.size();
  int savedErrno = errno;
  if (std::fclose(f) != 0 && written) {
    written = false;
    savedErrno = errno;
  }
  if (!written) {
    std::remove(temp.c_str());
    return warn(std::strerror(savedErrno));
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    savedErrno = errno;
    std::remove(temp.c_str());
    return warn(std::strerror(savedErrno));
  }
  return true;
}

}  // namespace ingot
