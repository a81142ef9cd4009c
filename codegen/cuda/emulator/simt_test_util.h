// Helpers of the SIMT emulator's tests: a module from CUDA source, typed device buffers, launches.
#pragma once

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codegen/cuda/emulator/include/ingot_simt/abi.h"
#include "core/simt/emulator.h"

namespace ingot {
namespace simt {
namespace testing {

/// `count` elements of T in emulated device memory, freed with it.
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t count) : count_(count) {
    data_ = static_cast<T *>(deviceAlloc(sizeof(T) * (count ? count : 1)));
    EXPECT_NE(data_, nullptr);
  }
  explicit DeviceArray(const std::vector<T> &values) : DeviceArray(values.size()) {
    std::memcpy(data_, values.data(), sizeof(T) * values.size());
  }
  ~DeviceArray() { deviceFree(data_); }
  DeviceArray(const DeviceArray &) = delete;
  DeviceArray &operator=(const DeviceArray &) = delete;
  T *get() const { return data_; }
  std::vector<T> read() const { return std::vector<T>(data_, data_ + count_); }

 private:
  size_t count_;
  T *data_ = nullptr;
};

/// A module built from `source` for `arch` (a test failure, and null, when it does not build).
inline std::shared_ptr<Module> build(const std::string &source, int arch = 900) {
  ModuleOptions options;
  options.arch = arch;
  std::string error;
  std::shared_ptr<Module> m = loadModule(source, options, &error);
  EXPECT_NE(m, nullptr) << error;
  return m;
}

/// Runs kernel `name` of `m` with `args` (values, each passed by pointer as cuLaunchKernel
/// takes them).
template <class... A>
LaunchResult run(const Module &m, const char *name, Dim grid, Dim block, unsigned shared,
                 A... args) {
  const KernelEntry *k = findKernel(m, name);
  if (!k) {
    ADD_FAILURE() << "no kernel " << name;
    return LaunchResult{false, true, {}, {}};
  }
  void *argv[sizeof...(A) + 1] = {static_cast<void *>(&args)...};
  return launch(m, *k, grid, block, shared, argv);
}

/// Whether `r` holds a diagnostic of `kind` whose message contains every one of `parts`.
inline bool reported(const LaunchResult &r, Diagnostic::Kind kind,
                     const std::vector<std::string> &parts) {
  for (const Diagnostic &d : r.diagnostics) {
    if (d.kind != kind) continue;
    bool all = true;
    for (const std::string &p : parts) all &= d.message.find(p) != std::string::npos;
    if (all) return true;
  }
  return false;
}

}  // namespace testing
}  // namespace simt
}  // namespace ingot
