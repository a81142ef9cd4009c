// The kernel table the emulator appends to an emulated translation unit: each kernel's trampoline and parameter sizes.
#pragma once

// simt_module.cc finds the `__global__` functions of a translation unit and appends
//   INGOT_SIMT_KERNEL_TABLE(INGOT_SIMT_KERNEL(name, max threads) ...)
// after its text, so the engine can call a kernel with a launch's `void **args` (each
// pointing to one parameter's value, as cuLaunchKernel takes them) and copy the parameters
// at launch time. The trampoline calls the kernel through a volatile pointer: the kernel
// stays a function of its own, which the instrumentation pass instruments (it leaves
// everything in namespace ingot::simt alone).

#include <stddef.h>

#include <type_traits>
#include <utility>

namespace ingot {
namespace simt {
namespace table {

template <class F>
struct Params;
template <class... A>
struct Params<void (*)(A...)> {
  static constexpr int count = static_cast<int>(sizeof...(A));
  static constexpr unsigned long long sizes[sizeof...(A) + 1] = {sizeof(std::decay_t<A>)..., 0};
  static constexpr unsigned long long aligns[sizeof...(A) + 1] = {alignof(std::decay_t<A>)..., 0};
  template <size_t... I>
  static void call(void (*f)(A...), void **args, std::index_sequence<I...>) {
    f(*static_cast<std::remove_cv_t<std::remove_reference_t<A>> *>(args[I])...);
  }
  template <void (*F)(A...)>
  static void invoke(void **args) {
    void (*volatile f)(A...) = F;
    call(f, args, std::index_sequence_for<A...>{});
  }
};

}  // namespace table
}  // namespace simt
}  // namespace ingot

#define INGOT_SIMT_KERNEL(name, maxThreads)                                           \
  ::ingot::simt::KernelEntry {                                                         \
    #name, (maxThreads), &::ingot::simt::table::Params<decltype(&name)>::invoke<&name>, \
        ::ingot::simt::table::Params<decltype(&name)>::count,                          \
        ::ingot::simt::table::Params<decltype(&name)>::sizes,                          \
        ::ingot::simt::table::Params<decltype(&name)>::aligns                          \
  }
