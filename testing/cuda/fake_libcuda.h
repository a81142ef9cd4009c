// Controls of the fake libcuda (fake_libcuda.cc) that CPU tests of the CUDA plumbing use.
#pragma once

#include <cstddef>

extern "C" {

/// What the fake driver has been asked to do since the last fakeCudaReset().
struct FakeCudaStats {
  int moduleLoads;           // successful cuModuleLoadData calls
  int moduleLoadFailures;    // images cuModuleLoadData refused (not a fake cubin)
  int moduleUnloads;         // cuModuleUnload calls
  int liveModules;           // loaded and not yet unloaded
  int linkCreates;           // cuLinkCreate calls (PTX JIT sessions)
  int linkCompletes;         // cuLinkComplete calls that produced a cubin
  int funcSetAttributes;     // cuFuncSetAttribute calls
  int lastFuncAttribute;     // the attribute of the last one (CUfunction_attribute)
  int lastFuncAttributeValue;
  int captures;              // cuStreamBeginCapture calls
  int graphLaunches;         // cuGraphLaunch calls
  int liveGraphExecs;        // instantiated and not yet destroyed (not reset)
  int copies2d;              // cuMemcpy2DAsync calls
};

/// Function types of the controls; a test resolves them with dlsym by the names below.
using FakeCudaResetFn = void (*)();                          // "fakeCudaReset"
using FakeCudaStatsFn = const FakeCudaStats* (*)();          // "fakeCudaStats"
using FakeCudaSetDriverVersionFn = void (*)(int version);    // "fakeCudaSetDriverVersion"
/// The device's compute capability (default 9.0, restored by the reset).
using FakeCudaSetComputeCapabilityFn = void (*)(int major, int minor);  // "fakeCudaSetComputeCapability"
/// The i-th image cuModuleLoadData accepted since the reset ("" past the end).
using FakeCudaLoadedImageFn = const char* (*)(int i);        // "fakeCudaLoadedImage"
/// Launches recorded since the reset (a graph launch appends the launches it captured).
using FakeCudaLaunchCountFn = int (*)();                     // "fakeCudaLaunchCount"
/// Launch i: its kernel's name; `dims` gets grid x, y, z and block x, y, z, `fromGraph`
/// whether a graph launch replayed it.
using FakeCudaLaunchFn = const char* (*)(int i, unsigned* dims, int* fromGraph);  // "fakeCudaLaunch"
/// The emulated driver only: a deliberately wrong tensor-core fragment layout while nonzero.
using FakeCudaSetScrambledFragmentsFn = void (*)(int);  // "fakeCudaSetScrambledFragments"

/// For the other fakes (libnccl, libcublasLt) and their stream work: while a capture is open,
/// records run(arg) into the graph (run at each launch of it, in order; release(arg) when
/// the last graph holding it goes) and returns 1; otherwise returns 0 and the caller does
/// the work at once.
int fakeCudaDefer(void (*run)(void*), void* arg, void (*release)(void*));
using FakeCudaDeferFn = int (*)(void (*)(void*), void*, void (*)(void*));  // "fakeCudaDefer"
/// Appends an operation to the launch log as if it were a launch named `name` with
/// dims[0..5] (marked replayed when a graph launch runs it), so tests see e.g. a fake
/// collective in order among the kernels.
void fakeCudaLogOp(const char* name, const unsigned* dims);

}  // extern "C"

namespace ingot::fake_cuda {

/// The prefix of an image the fake's cuModuleLoadData accepts as a cubin. A fake image is
/// text: the prefix, then anything; it holds kernel `k` when it contains "entry:k" (a fake
/// cubin made by a test) or ".entry k" (PTX, which the fake linker copies into its output).
inline constexpr const char* kCubinMagic = "FAKECUBIN";

}  // namespace ingot::fake_cuda
