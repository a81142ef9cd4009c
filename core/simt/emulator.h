// The SIMT emulator's public interface: device memory, emulated modules, launches, checks, counters.
#pragma once

// Implemented by codegen/cuda/emulator (library ingot_simt); used by the kernel tests there
// and by the emulated CUDA driver (testing/cuda/fake_libcuda.cc in its executing
// mode). A module is the CUDA C++ translation unit NVRTC would compile, built by the host
// compiler with the emulator's device prelude and instrumentation (docs/simt-emulator.md).
// Launches run synchronously: blocks spread over a small pool of host threads, the
// threads of a block as fibers on one of them.
//
// Standard C++ only, no CUDA header: both sides of the floor include it.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ingot {
namespace simt {

struct KernelEntry;  // abi.h
class Module;

/// The target name of a kernel binary that holds the CUDA C++ source for the emulator.
inline constexpr const char *kSimtTarget = "simt";
/// The first bytes of such a binary (a module image the emulated driver loads); the
/// translation unit's text follows.
inline constexpr const char *kSimtImageMagic = "INGOT-SIMT-SOURCE-1\n";

/// Work one launch (or a sum of launches) did: the input of a cost model. Bytes are the
/// sizes of the instrumented global loads and stores (atomics included); tensor FLOPs are
/// 2 M N K per warp-level MMA; scalar FLOPs count f32/f64 add, sub, mul, div, sqrt (an FMA
/// is 2), as the instrumentation pass finds them in the compiled kernel.
struct Counters {
  uint64_t launches = 0;
  uint64_t blocks = 0;
  uint64_t threads = 0;
  uint64_t global_bytes_read = 0;
  uint64_t global_bytes_written = 0;
  uint64_t tensor_flops = 0;
  uint64_t scalar_flops = 0;
  uint64_t barriers = 0;          ///< block barriers completed
  uint64_t warp_collectives = 0;  ///< warp collectives completed (shuffles, votes, MMAs)
  Counters &operator+=(const Counters &o);
};

/// What a check found, naming kernel, block, thread and source line in `message`.
struct Diagnostic {
  enum class Kind {
    kSharedOutOfBounds,  ///< a shared access outside the declared arrays
    kSharedRace,         ///< a write and another thread's access between two barriers
    kBarrierDivergence,  ///< a __syncthreads not every live thread of the block reaches
    kWarpMask,           ///< a warp collective whose mask names an exited or absent lane
    kWarpDivergence,     ///< lanes of one mask meet at different collectives
    kGlobalOutOfBounds,  ///< a global access outside every live allocation
    kHostMemory,         ///< an access to memory that is not device memory
    kTrap,               ///< __trap or an invalid launch
  };
  Kind kind;
  std::string message;
};
const char *kindName(Diagnostic::Kind kind);

/// The result of a launch: ok when it ran to the end with no diagnostic. A memory or
/// barrier error ends the launch at once (the access is not made); races are reported and
/// the launch goes on.
struct LaunchResult {
  bool ok = true;
  bool aborted = false;
  std::vector<Diagnostic> diagnostics;
  Counters counters;
  /// Every diagnostic, one per line (empty when ok).
  std::string report() const;
};

struct Dim {
  unsigned x = 1, y = 1, z = 1;
};

// ---- device memory -------------------------------------------------------------------------

/// Allocates `bytes` of emulated device memory (256-byte aligned, filled with 0xFF bytes:
/// NaN as f32, bf16 and E4M3, so a read of memory nobody wrote shows), or null when the
/// device is full. Freed memory faults on the host and is reported in kernels.
void *deviceAlloc(size_t bytes);
void deviceFree(void *pointer);
/// Whether `pointer` lies in a live allocation.
bool isDevicePointer(const void *pointer);
/// Bytes of device memory the emulated GPU has (INGOT_SIMT_DEVICE_MEMORY, default 4 GiB)
/// and bytes in use.
size_t deviceMemoryTotal();
size_t deviceMemoryUsed();

// ---- modules -----------------------------------------------------------------------------

struct ModuleOptions {
  /// __CUDA_ARCH__ of the build (800, 900, ...).
  int arch = 900;
  /// Build cache folder: "" = $INGOT_SIMT_CACHE, else $XDG_CACHE_HOME/ingot/simt, else
  /// ~/.cache/ingot/simt.
  std::string cache_dir;
};

/// Builds (or finds in the cache) and loads the module of CUDA C++ `source`; null and
/// `error` set on a compile or load failure (the compiler's messages included).
std::shared_ptr<Module> loadModule(const std::string &source, const ModuleOptions &options,
                                   std::string *error);

/// A kernel of `module` by its extern "C" name, or null.
const KernelEntry *findKernel(const Module &module, const std::string &name);
/// Bytes of each parameter of `kernel` (what a launch reads through each args[i]).
std::vector<size_t> kernelParamSizes(const KernelEntry &kernel);
const char *kernelName(const KernelEntry &kernel);

// ---- launches ------------------------------------------------------------------------------

/// Runs `kernel` of `module` on `grid` x `block` threads with `dynamic_shared` bytes of
/// dynamic shared memory; args[i] points to the i-th parameter's value (copied at once, as a
/// CUDA launch does). Returns when every block has finished or the launch was aborted.
LaunchResult launch(const Module &module, const KernelEntry &kernel, Dim grid, Dim block,
                    unsigned dynamic_shared, void **args);

/// Sum over every launch since the process started (or the last resetTotals()).
Counters totals();
void resetTotals();

/// Test hooks of the tensor-core emulation: a deliberately wrong fragment layout (lanes of
/// the A operand's row groups swapped), so tests that must catch a layout error can be seen
/// to fail. Off by default.
void setScrambledFragmentLayout(bool scrambled);

}  // namespace simt
}  // namespace ingot
