// KernelArgs: one kernel launch's arguments with their sizes, checked against the kernel ABI
// the artifact recorded (KernelDef.param_bytes) before cuLaunchKernel.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "core/base/status.h"
#include "runtime/backend/cuda/kernel_modules.h"

namespace ingot {

/// The most arguments one launch passes (the widest entry point today takes six).
constexpr size_t kMaxKernelArgs = 8;

/// The arguments of one launch as cuLaunchKernel takes them, a pointer to each argument's
/// value, with each value's size in bytes. Made by kernelArgs from the argument objects
/// themselves: it points at them, so they must outlive the launch call (cuLaunchKernel copies
/// the values; once it returns, the objects may change or go).
class KernelArgs {
 public:
  /// The pointer array for cuLaunchKernel's kernelParams (the driver only reads it).
  void** data() const { return const_cast<void**>(pointers_.data()); }
  size_t size() const { return count_; }
  /// The size in bytes of argument `i` (< size()).
  uint32_t bytes(size_t i) const { return bytes_[i]; }

 private:
  template <typename... Args>
  friend KernelArgs kernelArgs(Args&&... args);

  std::array<void*, kMaxKernelArgs> pointers_{};
  std::array<uint32_t, kMaxKernelArgs> bytes_{};
  size_t count_ = 0;
};

/// The arguments `args`, in order, each passed by its address and sized by its type: an int
/// is 4 bytes, a CUdeviceptr 8, a parameter struct its sizeof. Keep each object's type the one
/// the kernel's entry point declares. Only named objects (lvalues): a temporary would be gone
/// before the launch.
template <typename... Args>
KernelArgs kernelArgs(Args&&... args) {
  static_assert(sizeof...(Args) <= kMaxKernelArgs, "more kernel arguments than kMaxKernelArgs");
  static_assert((std::is_lvalue_reference_v<Args> && ...),
                "kernel arguments must be named objects that outlive the launch");
  static_assert((std::is_trivially_copyable_v<std::remove_reference_t<Args>> && ...),
                "kernel arguments are copied byte for byte: trivially copyable types only");
  KernelArgs out;
  ((out.pointers_[out.count_] = const_cast<void*>(static_cast<const void*>(&args)),
    out.bytes_[out.count_] = static_cast<uint32_t>(sizeof(args)), ++out.count_),
   ...);
  return out;
}

/// okStatus() when `args` match the parameters `k` takes (KernelDef.param_bytes: as many, of
/// the same sizes, in order) or `k` records none (an older artifact: unchecked); else a
/// failedPrecondition prefixed with `what` naming both lists: the artifact was compiled
/// against another kernel ABI, and launching would hand the kernel wrong arguments.
Status checkKernelArgs(const LoadedKernel& k, const KernelArgs& args, const std::string& what);

}  // namespace ingot
