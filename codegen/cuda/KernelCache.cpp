//===- KernelCache.cpp - on-disk cache of compiled CUDA kernels -----------===//
#include "codegen/cuda/KernelCache.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "xxhash.h"

namespace ingot::codegen {
namespace {

/// Entry layout: magic, key (32 hex digits), payload size and xxh64 (little-endian u64),
/// payload. Bump the magic's digit when the layout changes: old entries then fail the check.
constexpr char kMagic[8] = {'I', 'N', 'G', 'O', 'T', 'K', 'C', '1'};
constexpr size_t kKeyChars = 32;
constexpr size_t kHeaderBytes = sizeof(kMagic) + kKeyChars + 2 * sizeof(uint64_t);

void appendField(std::string &out, const std::string &field) {
  uint64_t n = field.size();
  out.append(reinterpret_cast<const char *>(&n), sizeof(n));
  out += field;
}

/// Holds flock(LOCK_EX) on a file while alive; a lock that cannot be taken is no lock.
class FileLock {
public:
  explicit FileLock(const std::string &path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ >= 0 && ::flock(fd_, LOCK_EX) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~FileLock() {
    if (fd_ >= 0) {
      ::flock(fd_, LOCK_UN);
      ::close(fd_);
    }
  }
  FileLock(const FileLock &) = delete;
  FileLock &operator=(const FileLock &) = delete;

private:
  int fd_ = -1;
};

} // namespace

KernelCache::KernelCache(std::string directory) : directory_(std::move(directory)) {}

std::string KernelCache::defaultDirectory() {
  if (const char *dir = std::getenv("INGOT_KERNEL_CACHE"))
    return dir;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/ingot/kernels";
  if (const char *home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/ingot/kernels";
  return "";
}

std::string KernelCache::key(const std::string &source, const std::vector<std::string> &options,
                             const std::string &target, const std::string &compilerVersion) {
  std::string text;
  appendField(text, "ingot-kernel-cache-key-1");
  appendField(text, source);
  appendField(text, std::to_string(options.size()));
  for (const std::string &o : options)
    appendField(text, o);
  appendField(text, target);
  appendField(text, compilerVersion);
  XXH128_hash_t h = XXH3_128bits(text.data(), text.size());
  char hex[kKeyChars + 1];
  std::snprintf(hex, sizeof(hex), "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return hex;
}

std::string KernelCache::entryPath(const std::string &key) const {
  return directory_ + "/" + key + ".bin";
}

std::optional<std::vector<uint8_t>> KernelCache::lookup(const std::string &key) const {
  if (!enabled() || key.size() != kKeyChars)
    return std::nullopt;
  const std::string path = entryPath(key);
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    return std::nullopt;
  const auto fileSize = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  char header[kHeaderBytes];
  bool valid = fileSize >= kHeaderBytes && in.read(header, kHeaderBytes);
  uint64_t size = 0, hash = 0;
  std::vector<uint8_t> data;
  if (valid) {
    std::memcpy(&size, header + sizeof(kMagic) + kKeyChars, sizeof(size));
    std::memcpy(&hash, header + sizeof(kMagic) + kKeyChars + sizeof(size), sizeof(hash));
    valid = std::memcmp(header, kMagic, sizeof(kMagic)) == 0 &&
            std::memcmp(header + sizeof(kMagic), key.data(), kKeyChars) == 0 &&
            size == fileSize - kHeaderBytes;
  }
  if (valid) {
    data.resize(size);
    valid = size == 0 || in.read(reinterpret_cast<char *>(data.data()),
                                 static_cast<std::streamsize>(size));
    valid = valid && XXH64(data.data(), data.size(), 0) == hash;
  }
  if (!valid) {
    // Removed so the recompiled entry replaces it; a concurrent writer's rename is atomic,
    // so at worst a good entry is removed and compiled once more.
    std::error_code ec;
    std::filesystem::remove(path, ec);
    return std::nullopt;
  }
  return data;
}

Status KernelCache::store(const std::string &key, const std::vector<uint8_t> &data) const {
  if (!enabled())
    return okStatus();
  if (key.size() != kKeyChars)
    return invalidArgument("kernel cache: malformed key '" + key + "'");
  std::error_code ec;
  std::filesystem::create_directories(directory_, ec);
  if (ec)
    return invalidArgument("kernel cache: cannot create " + directory_ + ": " + ec.message());
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = entryPath(key) + ".tmp." + std::to_string(::getpid()) + "." +
                          std::to_string(counter.fetch_add(1));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    uint64_t size = data.size(), hash = XXH64(data.data(), data.size(), 0);
    out.write(kMagic, sizeof(kMagic));
    out.write(key.data(), kKeyChars);
    out.write(reinterpret_cast<const char *>(&size), sizeof(size));
    out.write(reinterpret_cast<const char *>(&hash), sizeof(hash));
    out.write(reinterpret_cast<const char *>(data.data()), static_cast<std::streamsize>(size));
    out.close();
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return invalidArgument("kernel cache: cannot write " + tmp);
    }
  }
  std::filesystem::rename(tmp, entryPath(key), ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    return invalidArgument("kernel cache: cannot rename " + tmp + " to " + entryPath(key) +
                           ": " + ec.message());
  }
  return okStatus();
}

StatusOr<std::vector<uint8_t>>
KernelCache::getOrCompute(const std::string &key,
                          const std::function<StatusOr<std::vector<uint8_t>>()> &compute,
                          bool *hit, std::string *storeError) const {
  if (hit)
    *hit = false;
  if (!enabled())
    return compute();
  if (std::optional<std::vector<uint8_t>> cached = lookup(key)) {
    if (hit)
      *hit = true;
    return std::move(*cached);
  }
  std::error_code ec;
  std::filesystem::create_directories(directory_, ec);
  FileLock lock(directory_ + "/" + key + ".lock");
  // Another process may have compiled it while this one waited for the lock.
  if (std::optional<std::vector<uint8_t>> cached = lookup(key)) {
    if (hit)
      *hit = true;
    return std::move(*cached);
  }
  StatusOr<std::vector<uint8_t>> computed = compute();
  if (!computed.ok())
    return computed;
  Status stored = store(key, *computed);
  if (!stored.ok() && storeError)
    *storeError = stored.message();
  return computed;
}

} // namespace ingot::codegen
