// The SIMT emulator's internal state: workers, blocks being run, warps, the shared arena's shadow.
#pragma once

#include <boost/context/detail/fcontext.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/cuda/emulator/include/ingot_simt/abi.h"
#include "core/simt/emulator.h"

namespace ingot {
namespace simt {

namespace ctx = boost::context::detail;

class Module;
struct Launch;
struct Worker;

/// What a blocked thread waits for.
enum class ThreadState : uint8_t { kReady, kAtBarrier, kInWarp, kExited };

/// One CUDA thread of the block being run: its fiber and what it waits on.
struct ThreadSlot {
  ctx::fcontext_t fiber = nullptr;
  ThreadState state = ThreadState::kReady;
  Site site{};  ///< where it waits (copied: the caller's Site lives on its stack)
  int op = 0;   ///< barrier kind or warp op it waits in
  unsigned mask = 0;
  int value = 0;   ///< barrier predicate
  int result = 0;  ///< barrier reduction / ballot, set when released
  const void *in = nullptr;
  void *out = nullptr;
  int a = 0, b = 0;
};

/// A warp collective some lanes have reached and others not yet.
struct PendingCollective {
  unsigned mask = 0;
  unsigned arrived = 0;
  int op = 0;
  Site site{};
};

struct Warp {
  unsigned exists = 0;  ///< lanes the block has (a partial last warp has fewer)
  unsigned exited = 0;
  uint32_t syncs = 0;   ///< completed collectives (orders shared accesses of its lanes)
  unsigned at_activemask = 0;  ///< lanes waiting in __activemask (most warps: none)
  std::vector<PendingCollective> pending;
};

/// Race-detection state of one byte of the shared arena: its last write and its reads
/// since, each with the interval (block and barrier) and the warp's sync count then.
struct ShadowByte {
  uint32_t write_interval = 0, write_sync = 0;
  uint32_t read_interval = 0, read_sync = 0;
  uint16_t writer = 0, reader = 0;
  uint16_t reader_warp = 0;  ///< 0xffff: readers of several warps
  uint16_t pad = 0;
  const Site *write_site = nullptr;
  const Site *read_site = nullptr;
};

/// The block a worker is running.
struct BlockRun {
  Launch *launch = nullptr;
  Worker *worker = nullptr;
  Dim3 index{};
  unsigned num_threads = 0;
  unsigned live = 0;
  std::vector<ThreadSlot> slots;
  std::vector<Warp> warps;
  std::vector<unsigned> ready;  ///< FIFO of thread indices to resume
  size_t ready_head = 0;
  unsigned at_barrier = 0;
  bool aborted = false;
  /// Race intervals: a new one at the block's start and at every barrier (per worker).
  uint32_t interval = 0;
  Counters counters;
  /// The allocation the block's last global access hit (no allocation is freed while a
  /// launch runs, so it holds for the block): most accesses skip the page-table lookup.
  uintptr_t hit_base = 0;
  size_t hit_bytes = 0;
};

/// A host thread that runs blocks: its fiber stacks, shared arena and shadow.
struct Worker {
  unsigned char *stacks = nullptr;  ///< kMaxThreads regions of kStackRegionBytes
  size_t stack_bytes = 0;
  void *mapping = nullptr;  ///< what mmap returned (the regions are aligned within it)
  size_t mapping_bytes = 0;
  std::vector<unsigned char> arena_storage;
  unsigned char *arena = nullptr;  ///< aligned start in arena_storage
  size_t arena_bytes = 0;          ///< bytes the current launch uses
  std::vector<uint8_t> arena_valid;  ///< 1 where a declared array (or dynamic memory) is
  std::vector<ShadowByte> shadow;
  uint32_t next_interval = 0;
  ctx::fcontext_t scheduler = nullptr;
  BlockRun block;
  ~Worker();
  Thread *record(unsigned t) const {
    return reinterpret_cast<Thread *>(stacks + t * kStackRegionBytes + kThreadRecordOffset);
  }
};

/// One launch: the kernel, its shape and parameters, and what its blocks found.
struct Launch {
  const Module *module = nullptr;
  const KernelEntry *kernel = nullptr;
  Dim grid, block;
  unsigned dynamic_shared = 0;
  size_t static_shared = 0;
  std::vector<std::unique_ptr<unsigned char[]>> param_storage;
  std::vector<void *> args;
  std::atomic<uint64_t> next_block{0};
  uint64_t num_blocks = 0;
  std::atomic<bool> aborted{false};
  std::mutex mutex;  ///< guards diagnostics and counters
  std::vector<Diagnostic> diagnostics;
  std::vector<std::string> reported;  ///< dedupe keys of reported races
  Counters counters;
};

/// Limits of the emulated device.
constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr size_t kMaxSharedPerBlock = 227 * 1024;  ///< sm_90's opt-in limit
constexpr size_t kMaxDiagnostics = 32;

// ---- engine internals shared by the .cc files ----------------------------------------------

/// Records a diagnostic for `t` (kernel, block, thread and site in the message).
void report(Thread *t, Diagnostic::Kind kind, const std::string &what, const Site *site);
/// Records a diagnostic and ends the block (and the launch) at once: never returns.
[[noreturn]] void fail(Thread *t, Diagnostic::Kind kind, const std::string &what, const Site *site);
/// Suspends the calling fiber until the scheduler resumes it.
void yieldToScheduler(Thread *t);
/// Makes thread `index` of the block ready to run.
void makeReady(BlockRun &block, unsigned index);

/// "file:line" of a site.
std::string where(const Site *site);
/// "(x,y,z)".
std::string dimText(const Dim3 &d);

/// Warp collectives (simt_warp.cc).
unsigned warpCollective(Thread *t, int op, unsigned mask, const void *in, void *out, int a,
                        int b, const Site *site);
/// Releases the lanes of warp `warpIndex` waiting at __activemask once no lane of it can run
/// on (called whenever one of its lanes blocks or exits).
void activeMaskCheck(BlockRun &block, unsigned warpIndex);
/// Called when lane `lane` of warp `w` exits: fails a pending collective that names it.
void warpLaneExited(Thread *t, Warp &warp, unsigned lane);
/// Describes what the threads of a stuck block wait for (a deadlock).
std::string describeWaits(const BlockRun &block);

/// Memory checks (simt_checks.cc).
void checkAccess(Thread *t, const void *address, unsigned long long info, const Site *site);
/// Prepares the worker's arena and shadow for `launch` (sizes, the declared-array map).
void prepareArena(Worker &worker, const Launch &launch);

/// The heap of device memory (device_heap.cc): the allocation holding [address, +bytes).
/// Returns 0 when inside one, 1 when it overruns one, 2 when in no allocation, and 3 when
/// the address is not in the device range at all.
int classifyDeviceRange(uintptr_t address, size_t bytes, uintptr_t *base, size_t *size);

/// The module's data segments and its shared layout (simt_module.cc).
bool moduleContains(const Module &module, uintptr_t address);
const SharedLayout *moduleSharedLayout(const Module &module);
std::string demangle(const char *name);

bool scrambledFragmentLayout();

}  // namespace simt
}  // namespace ingot
