// A fake CUDA driver (every entry point CudaDriver resolves) for CPU tests of the plumbing.
//
// Device memory is host memory and asynchronous copies happen at once. Modules are text
// images (fake_libcuda.h: kCubinMagic), the PTX "JIT" links PTX into such an image, and
// counters say what was loaded, linked and set, so kernel loading and the PTX cache can be
// checked without a GPU. Kernels never run: a launch is recorded (name, grid, block), into
// the launch log, or into the graph a stream capture is building; a graph launch appends
// its recorded launches to the log, marked as replayed. Stream-ordered copies and memsets
// (and the fake NCCL's collectives and fake cuBLASLt's fills, through fakeCudaDefer) made
// while a capture is open are recorded into the graph too and run when it is launched, in
// capture order, so a replay moves data as a real one would.
// Shared with the fake libcuda + libnccl of runtime/dist (which adds cuStreamQuery).
//
// Executing mode (built with INGOT_FAKE_CUDA_EXECUTING: libingot_cuda_emulated.so, the driver
// INGOT_CUDA_DRIVER=emulated selects): the device is the SIMT emulator (core/simt/emulator.h).
// Device memory is the emulator's (filled with NaN bytes when allocated, checked in kernels);
// a module is a "simt" source image, built for the CPU; a launch runs the kernel there, its
// parameters copied as CUDA copies them, and a graph launch runs its captured kernels with
// the parameters of their capture. A launch the emulator stops (an out-of-bounds access, a
// divergent barrier, ...) prints its report and fails with CUDA_ERROR_LAUNCH_FAILED, and every
// later launch and synchronization too (a sticky error, as a real context's). Events record
// the host clock: work is synchronous, so elapsed times are the emulation's wall time.
//
// The state the entry points share is fake_libcuda_state.h's; memory, streams, events and
// graphs are in fake_libcuda_streams.cc.
#include "testing/cuda/fake_libcuda.h"

#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "testing/cuda/fake_libcuda_state.h"

#ifdef INGOT_FAKE_CUDA_EXECUTING
#include "core/simt/emulator.h"
#endif

using namespace ingot::fake_cuda;  // the entry points below use the shared state unqualified

namespace ingot::fake_cuda {

std::mutex gMutex;
FakeCudaStats gStats{};
std::vector<FakeLaunch> gLaunches;
thread_local bool gCapturing = false;
thread_local std::vector<FakeGraphNode> gCaptured;
bool gReplaying = false;
std::vector<std::string> gLoadedImages;
int gDriverVersion = 13000;
int gCcMajor = 9, gCcMinor = 0;
CUresult gSticky = CUDA_SUCCESS;

#ifdef INGOT_FAKE_CUDA_EXECUTING
/// Runs a launch on the SIMT emulator; its error (and the report on stderr) when it fails.
CUresult execute(const FakeLaunch& launch) {
  {
    std::lock_guard<std::mutex> lock(gMutex);
    if (gSticky != CUDA_SUCCESS) return gSticky;
  }
  std::vector<void*> args;
  for (std::vector<unsigned char>& p : *launch.params) args.push_back(p.data());
  const ingot::simt::LaunchResult result = ingot::simt::launch(
      *launch.simt, *launch.kernel, {launch.dims[0], launch.dims[1], launch.dims[2]},
      {launch.dims[3], launch.dims[4], launch.dims[5]}, launch.shared, args.data());
  if (result.ok) return CUDA_SUCCESS;
  // Any diagnostic fails the launch, a race too (the kernel ran to its end then): a kernel
  // that passes under emulation is clean.
  std::fprintf(stderr, "ingot emulated CUDA: %s failed:\n%s", launch.name.c_str(),
               result.report().c_str());
  std::lock_guard<std::mutex> lock(gMutex);
  gSticky = CUDA_ERROR_LAUNCH_FAILED;
  return gSticky;
}
#endif

/// The sticky error of a failed launch (CUDA_SUCCESS when none).
CUresult sticky() {
  std::lock_guard<std::mutex> lock(gMutex);
  return gSticky;
}

}  // namespace ingot::fake_cuda

namespace {

/// The emulated device's compute capability: INGOT_SIMT_SM ("80", "89", "90", ...; default
/// 90), which is also the __CUDA_ARCH__ its modules are built with.
void emulatedComputeCapability() {
  if (!kExecuting) return;
  const char* sm = std::getenv("INGOT_SIMT_SM");
  const int cc = sm ? std::atoi(sm) : 0;
  if (cc >= 70 && cc < 200) gCcMajor = cc / 10, gCcMinor = cc % 10;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

void writeLog(FakeLink* link, const std::string& text) {
  if (!link->errorLog || link->errorLogBytes == 0) return;
  std::strncpy(link->errorLog, text.c_str(), link->errorLogBytes - 1);
  link->errorLog[link->errorLogBytes - 1] = 0;
}

}  // namespace

extern "C" {

// ------------------------------------------------------------------ controls for tests
void fakeCudaReset() {
  std::lock_guard<std::mutex> lock(gMutex);
  const int live = gStats.liveModules, graphs = gStats.liveGraphExecs;
  gStats = FakeCudaStats{};
  gStats.liveModules = live;  // modules and graphs still alive stay counted until freed
  gStats.liveGraphExecs = graphs;
  gLoadedImages.clear();
  gLaunches.clear();
  gDriverVersion = 13000;
  gCcMajor = 9;
  gCcMinor = 0;
  emulatedComputeCapability();
  gSticky = CUDA_SUCCESS;
}
const FakeCudaStats* fakeCudaStats() { return &gStats; }
int fakeCudaLaunchCount() {
  std::lock_guard<std::mutex> lock(gMutex);
  return static_cast<int>(gLaunches.size());
}
const char* fakeCudaLaunch(int i, unsigned* dims, int* fromGraph) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (i < 0 || i >= static_cast<int>(gLaunches.size())) return "";
  std::memcpy(dims, gLaunches[i].dims, sizeof(gLaunches[i].dims));
  *fromGraph = gLaunches[i].fromGraph;
  return gLaunches[i].name.c_str();
}
int fakeCudaDefer(void (*run)(void*), void* arg, void (*release)(void*)) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (!gCapturing) return 0;
  std::shared_ptr<void> owned(arg, release);
  gCaptured.push_back(FakeGraphNode{FakeLaunch{}, [run, owned] { run(owned.get()); }});
  return 1;
}
void fakeCudaLogOp(const char* name, const unsigned* dims) {
  std::lock_guard<std::mutex> lock(gMutex);
  FakeLaunch op{name, {}, gReplaying};
  std::memcpy(op.dims, dims, sizeof(op.dims));
  gLaunches.push_back(op);
}
void fakeCudaSetDriverVersion(int version) { gDriverVersion = version; }
void fakeCudaSetComputeCapability(int major, int minor) {
  gCcMajor = major;
  gCcMinor = minor;
}
const char* fakeCudaLoadedImage(int i) {
  std::lock_guard<std::mutex> lock(gMutex);
  return i >= 0 && i < static_cast<int>(gLoadedImages.size()) ? gLoadedImages[i].c_str() : "";
}

// ------------------------------------------------------------------ devices and contexts
CUresult cuInit(unsigned int) {
  std::lock_guard<std::mutex> lock(gMutex);
  emulatedComputeCapability();
  return CUDA_SUCCESS;
}
CUresult cuDriverGetVersion(int* version) {
  *version = gDriverVersion;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetCount(int* count) {
  // The emulated machine has one GPU unless INGOT_SIMT_DEVICES says more (tensor-parallel
  // ranks one per GPU); they share the emulator's memory and launch queue.
  const char* devices = std::getenv("INGOT_SIMT_DEVICES");
  *count = kExecuting && devices && std::atoi(devices) > 0 ? std::atoi(devices) : 1;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGet(CUdevice* device, int ordinal) { *device = ordinal; return CUDA_SUCCESS; }
CUresult cuDeviceGetName(char* name, int len, CUdevice) {
  std::strncpy(name, kExecuting ? "Ingot SIMT emulator" : "Fake GPU", len);
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice) {
  // The emulated device has an H200's 132 SMs (INGOT_SIMT_SMS sets another count), so the
  // backend sizes grids (split-KV) as it would there.
  const char* sms = std::getenv("INGOT_SIMT_SMS");
  *value = attribute == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR   ? gCcMajor
           : attribute == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR ? gCcMinor
           : attribute == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT && kExecuting
               ? (sms && std::atoi(sms) > 0 ? std::atoi(sms) : 132)
               : 0;
  return CUDA_SUCCESS;
}
CUresult cuDeviceTotalMem(size_t* bytes, CUdevice) {
#ifdef INGOT_FAKE_CUDA_EXECUTING
  *bytes = ingot::simt::deviceMemoryTotal();
#else
  *bytes = size_t{16} << 30;
#endif
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice) {
  *context = reinterpret_cast<CUcontext>(0x1);
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease(CUdevice) { return CUDA_SUCCESS; }
CUresult cuCtxSetCurrent(CUcontext) { return CUDA_SUCCESS; }
CUresult cuCtxSynchronize() { return sticky(); }

// ------------------------------------------------------------------ modules and the linker
CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  const char* text = static_cast<const char*>(image);
#ifdef INGOT_FAKE_CUDA_EXECUTING
  {
    // Only the emulator's source images: a cubin or PTX holds GPU code it cannot run.
    const size_t magic = std::strlen(ingot::simt::kSimtImageMagic);
    if (!text || std::strncmp(text, ingot::simt::kSimtImageMagic, magic) != 0) {
      std::lock_guard<std::mutex> lock(gMutex);
      ++gStats.moduleLoadFailures;
      return CUDA_ERROR_INVALID_IMAGE;
    }
    ingot::simt::ModuleOptions options;
    options.arch = gCcMajor * 100 + gCcMinor * 10;
    std::string error;
    std::shared_ptr<ingot::simt::Module> built = ingot::simt::loadModule(text + magic, options, &error);
    if (!built) {
      std::fprintf(stderr, "ingot emulated CUDA: cuModuleLoadData: %s\n", error.c_str());
      std::lock_guard<std::mutex> lock(gMutex);
      ++gStats.moduleLoadFailures;
      return CUDA_ERROR_INVALID_IMAGE;
    }
    std::lock_guard<std::mutex> lock(gMutex);
    auto* m = new FakeModule{text, {}, std::move(built)};
    gLoadedImages.push_back(ingot::simt::kSimtImageMagic);
    ++gStats.moduleLoads;
    ++gStats.liveModules;
    *module = reinterpret_cast<CUmodule>(m);
    return CUDA_SUCCESS;
  }
#endif
  std::lock_guard<std::mutex> lock(gMutex);
  size_t magic = std::strlen(ingot::fake_cuda::kCubinMagic);
  if (!text || std::strncmp(text, ingot::fake_cuda::kCubinMagic, magic) != 0) {
    ++gStats.moduleLoadFailures;
    return CUDA_ERROR_INVALID_IMAGE;
  }
  auto* m = new FakeModule{text, {}};
  gLoadedImages.push_back(m->image);
  ++gStats.moduleLoads;
  ++gStats.liveModules;
  *module = reinterpret_cast<CUmodule>(m);
  return CUDA_SUCCESS;
}
CUresult cuModuleUnload(CUmodule module) {
  std::lock_guard<std::mutex> lock(gMutex);
  auto* m = reinterpret_cast<FakeModule*>(module);
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  for (void* f : m->functions) delete static_cast<FakeFunction*>(f);
  delete m;
  ++gStats.moduleUnloads;
  --gStats.liveModules;
  return CUDA_SUCCESS;
}
CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  std::lock_guard<std::mutex> lock(gMutex);
  auto* m = reinterpret_cast<FakeModule*>(module);
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
#ifdef INGOT_FAKE_CUDA_EXECUTING
  const ingot::simt::KernelEntry* kernel = ingot::simt::findKernel(*m->simt, name);
  if (!kernel) return CUDA_ERROR_NOT_FOUND;
  auto* f = new FakeFunction{m, name, m->simt, kernel};
#else
  if (!contains(m->image, std::string("entry:") + name) &&
      !contains(m->image, std::string(".entry ") + name))
    return CUDA_ERROR_NOT_FOUND;
  auto* f = new FakeFunction{m, name};
#endif
  m->functions.push_back(f);
  *function = reinterpret_cast<CUfunction>(f);
  return CUDA_SUCCESS;
}
CUresult cuFuncSetAttribute(CUfunction function, CUfunction_attribute attribute, int value) {
  if (!function) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard<std::mutex> lock(gMutex);
  ++gStats.funcSetAttributes;
  gStats.lastFuncAttribute = attribute;
  gStats.lastFuncAttributeValue = value;
  return CUDA_SUCCESS;
}
CUresult cuLaunchKernel(CUfunction function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared, CUstream, void** params, void**) {
  if (!function) return CUDA_ERROR_INVALID_HANDLE;
  if (!params) return CUDA_ERROR_INVALID_VALUE;
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 || bx * by * bz > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  auto* f = reinterpret_cast<FakeFunction*>(function);
  FakeLaunch launch{f->name, {gx, gy, gz, bx, by, bz}, false};
#ifdef INGOT_FAKE_CUDA_EXECUTING
  launch.simt = f->simt;
  launch.kernel = f->kernel;
  launch.shared = shared;
  launch.params = std::make_shared<std::vector<std::vector<unsigned char>>>();
  const std::vector<size_t> sizes = ingot::simt::kernelParamSizes(*f->kernel);
  for (size_t i = 0; i < sizes.size(); ++i) {  // copied now, as a CUDA launch does
    const auto* bytes = static_cast<const unsigned char*>(params[i]);
    launch.params->emplace_back(bytes, bytes + sizes[i]);
  }
  {
    std::lock_guard<std::mutex> lock(gMutex);
    if (gCapturing) {
      gCaptured.push_back(FakeGraphNode{launch, nullptr});
      return CUDA_SUCCESS;
    }
    gLaunches.push_back(launch);
  }
  return execute(launch);
#else
  (void)shared;
  std::lock_guard<std::mutex> lock(gMutex);
  if (gCapturing) gCaptured.push_back(FakeGraphNode{launch, nullptr});
  else gLaunches.push_back(launch);
  return CUDA_SUCCESS;
#endif
}
CUresult cuLinkCreate(unsigned int numOptions, CUjit_option* options, void** values,
                      CUlinkState* state) {
  auto* link = new FakeLink();
  for (unsigned i = 0; i < numOptions; ++i) {
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER) link->errorLog = static_cast<char*>(values[i]);
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
      link->errorLogBytes = reinterpret_cast<size_t>(values[i]);
  }
  std::lock_guard<std::mutex> lock(gMutex);
  ++gStats.linkCreates;
  *state = reinterpret_cast<CUlinkState>(link);
  return CUDA_SUCCESS;
}
CUresult cuLinkAddData(CUlinkState state, CUjitInputType type, void* data, size_t size,
                       const char* name, unsigned int, CUjit_option*, void**) {
  auto* link = reinterpret_cast<FakeLink*>(state);
  if (!link || !data) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_JIT_INPUT_PTX) return CUDA_ERROR_INVALID_VALUE;
  std::string ptx(static_cast<const char*>(data), size);
  if (!ptx.empty() && ptx.back() == 0) ptx.pop_back();  // the JIT takes NUL-terminated PTX
  if (!contains(ptx, ".version")) {
    writeLog(link, std::string("ptxas fatal: fake: ") + (name ? name : "input") +
                       " has no .version directive");
    return CUDA_ERROR_INVALID_PTX;
  }
  link->ptx += ptx;
  return CUDA_SUCCESS;
}
CUresult cuLinkComplete(CUlinkState state, void** cubin, size_t* size) {
  auto* link = reinterpret_cast<FakeLink*>(state);
  if (!link || link->ptx.empty()) return CUDA_ERROR_INVALID_VALUE;
  link->cubin = std::string(ingot::fake_cuda::kCubinMagic) + " jit\n" + link->ptx;
  *cubin = link->cubin.data();
  *size = link->cubin.size();
  std::lock_guard<std::mutex> lock(gMutex);
  ++gStats.linkCompletes;
  return CUDA_SUCCESS;
}
CUresult cuLinkDestroy(CUlinkState state) {
  delete reinterpret_cast<FakeLink*>(state);
  return CUDA_SUCCESS;
}

#ifdef INGOT_FAKE_CUDA_EXECUTING
/// Present in the emulated driver only: CudaDriver::emulated() looks for it.
int ingotSimtEmulatedDriver() { return 1; }
/// The tensor-core mutation (core/simt/emulator.h, setScrambledFragmentLayout), for tests
/// that show they catch a wrong fragment layout.
void fakeCudaSetScrambledFragments(int scrambled) {
  ingot::simt::setScrambledFragmentLayout(scrambled != 0);
}
#endif

// ------------------------------------------------------------------ errors
CUresult cuGetErrorName(CUresult error, const char** name) {
  switch (error) {
    case CUDA_SUCCESS: *name = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *name = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_INVALID_IMAGE: *name = "CUDA_ERROR_INVALID_IMAGE"; break;
    case CUDA_ERROR_INVALID_PTX: *name = "CUDA_ERROR_INVALID_PTX"; break;
    case CUDA_ERROR_INVALID_HANDLE: *name = "CUDA_ERROR_INVALID_HANDLE"; break;
    case CUDA_ERROR_NOT_FOUND: *name = "CUDA_ERROR_NOT_FOUND"; break;
    case CUDA_ERROR_NOT_READY: *name = "CUDA_ERROR_NOT_READY"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *name = "CUDA_ERROR_NOT_SUPPORTED"; break;
    case CUDA_ERROR_LAUNCH_FAILED: *name = "CUDA_ERROR_LAUNCH_FAILED"; break;
    default: *name = "CUDA_ERROR_FAKE"; break;
  }
  return CUDA_SUCCESS;
}
CUresult cuGetErrorString(CUresult error, const char** text) {
  *text = kExecuting && error == CUDA_ERROR_LAUNCH_FAILED
              ? "the SIMT emulator stopped a kernel; its report is on stderr"
          : kExecuting && error == CUDA_ERROR_INVALID_IMAGE
              ? "the emulated driver loads only simt source images; see stderr"
              : "fake driver error";
  return CUDA_SUCCESS;
}

}  // extern "C"
