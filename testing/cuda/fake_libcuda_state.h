// The fake CUDA driver's state, shared by its entry points in fake_libcuda.cc (which defines
// it and says what the fake does) and fake_libcuda_streams.cc. Internal to the fake driver:
// tests use fake_libcuda.h.
#pragma once

#include <cuda.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "testing/cuda/fake_libcuda.h"

#ifdef INGOT_FAKE_CUDA_EXECUTING
#include "core/simt/emulator.h"
#endif

// Hidden: every library that builds the fake in (the fake libcuda, the fake libcuda +
// libnccl, the emulated driver) keeps its own state, which no library loaded before it can
// interpose.
#pragma GCC visibility push(hidden)

namespace ingot::fake_cuda {

#ifdef INGOT_FAKE_CUDA_EXECUTING
constexpr bool kExecuting = true;
#else
constexpr bool kExecuting = false;
#endif

struct FakeModule {
  std::string image;
  std::vector<void*> functions;
#ifdef INGOT_FAKE_CUDA_EXECUTING
  std::shared_ptr<ingot::simt::Module> simt;
#endif
};
struct FakeFunction {
  FakeModule* module;
  std::string name;
#ifdef INGOT_FAKE_CUDA_EXECUTING
  std::shared_ptr<ingot::simt::Module> simt;  // kept alive by every launch that holds it
  const ingot::simt::KernelEntry* kernel = nullptr;
#endif
};
struct FakeLink {
  std::string ptx;
  std::string cubin;
  char* errorLog = nullptr;
  size_t errorLogBytes = 0;
};

/// One recorded kernel launch.
struct FakeLaunch {
  std::string name;
  unsigned dims[6];  // grid x, y, z, block x, y, z
  bool fromGraph;
#ifdef INGOT_FAKE_CUDA_EXECUTING
  /// What a captured launch runs at each graph launch: the kernel, its dynamic shared
  /// memory and its parameters as they were when it was captured.
  std::shared_ptr<ingot::simt::Module> simt;
  const ingot::simt::KernelEntry* kernel = nullptr;
  unsigned shared = 0;
  std::shared_ptr<std::vector<std::vector<unsigned char>>> params;
#endif
};
/// A captured graph: the launches and stream operations made while its capture was open,
/// in order (an operation when `op` is set, else the launch).
struct FakeGraphNode {
  FakeLaunch launch;
  std::function<void()> op;
};
struct FakeGraph {
  std::vector<FakeGraphNode> nodes;
};

extern std::mutex gMutex;
extern FakeCudaStats gStats;
extern std::vector<FakeLaunch> gLaunches;
/// The capture the calling thread has open (a real driver keeps one per stream; here each
/// thread captures its own stream, as tensor-parallel ranks do).
extern thread_local bool gCapturing;
extern thread_local std::vector<FakeGraphNode> gCaptured;
/// Set while a graph launch runs its operations (a logged operation is marked replayed).
extern bool gReplaying;
extern std::vector<std::string> gLoadedImages;
extern int gDriverVersion;
/// The device's compute capability (9.0 unless a test sets another; reset restores it).
extern int gCcMajor, gCcMinor;
/// The first failed launch's error, returned by every later launch and synchronization.
extern CUresult gSticky;

#ifdef INGOT_FAKE_CUDA_EXECUTING
/// Runs a launch on the SIMT emulator; its error (and the report on stderr) when it fails.
CUresult execute(const FakeLaunch& launch);
#endif

/// The sticky error of a failed launch (CUDA_SUCCESS when none).
CUresult sticky();

}  // namespace ingot::fake_cuda

#pragma GCC visibility pop
