// The SIMT emulator's ABI between emulated kernel code and the engine that runs it.
#pragma once

// Emulated kernels are CUDA C++ compiled by the host compiler into a shared object
// (codegen/cuda/emulator/simt_module.cc). Every emulated CUDA thread runs on a fiber
// whose stack sits in a region of kStackRegionBytes aligned to its size; the region's
// first page is a guard, the second holds the thread's `Thread` record, the rest is
// stack. Device code finds its record from its own frame address (`self()` below), so
// threadIdx, the block's shared arena and the engine's entry points cost a mask and a
// load, and the kernel module needs no symbol of the engine at link or load time.
//
// Plain C++ with no includes: the device prelude (device.h) and the engine both use it.

namespace ingot {
namespace simt {

/// Size and alignment of one fiber's stack region: guard page, Thread page, stack.
constexpr unsigned long kStackRegionBytes = 1ul << 16;
/// Offset of the Thread record within its region (after the guard page).
constexpr unsigned long kThreadRecordOffset = 4096;
/// Bytes of stack below the region's top (the rest of the region).
constexpr unsigned long kStackBytes = kStackRegionBytes - 2 * 4096;

struct Dim3 {
  unsigned x, y, z;
};

/// Where an instrumented memory access, a barrier or a warp collective is in the source:
/// the instrumentation pass emits one per access site from the debug line table; the
/// prelude builds the others from __builtin_FILE/__builtin_LINE.
struct Site {
  const char *file;
  unsigned line;
  unsigned column;
  const char *function;  ///< mangled name of the innermost (inlined) function, or null
};

/// Bits of an access's `info` word (the low 32 bits are its size in bytes).
constexpr unsigned long long kAccessWrite = 1ull << 32;
constexpr unsigned long long kAccessAtomic = 1ull << 33;

/// Block-wide barriers.
enum BarrierKind : int {
  kBarrierSync = 0,   ///< __syncthreads
  kBarrierOr = 1,     ///< __syncthreads_or: nonzero if any thread's value is
  kBarrierAnd = 2,    ///< __syncthreads_and: nonzero if every thread's value is
  kBarrierCount = 3,  ///< __syncthreads_count: threads whose value is nonzero
};

/// Warp collectives (one record per lane; the last lane to arrive computes for all).
enum WarpOp : int {
  kWarpSync = 0,       ///< __syncwarp
  kWarpShflIdx = 1,    ///< __shfl_sync: a = source lane, b = width
  kWarpShflUp = 2,     ///< __shfl_up_sync: a = delta, b = width
  kWarpShflDown = 3,   ///< __shfl_down_sync: a = delta, b = width
  kWarpShflXor = 4,    ///< __shfl_xor_sync: a = lane mask, b = width
  kWarpBallot = 5,     ///< __ballot_sync / __any_sync / __all_sync (in: int predicate)
  kWarpMmaM16N8K16Bf16 = 6,  ///< mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
  kWarpWmmaLoad = 7,   ///< nvcuda::wmma::load_matrix_sync (in: WmmaMemory)
  kWarpWmmaStore = 8,  ///< nvcuda::wmma::store_matrix_sync (in: WmmaMemory)
  kWarpWmmaMma = 9,    ///< nvcuda::wmma::mma_sync, bf16 m16n16k16, f32 accumulators
  /// __activemask: waits until no other lane of the warp can run on, then returns the lanes
  /// that reached it (the lanes converged there; exited lanes and lanes waiting elsewhere
  /// are not active).
  kWarpActiveMask = 10,
};

/// Operand kinds of the wmma fragments the emulator implements (bf16 16x16x16, f32 acc).
enum WmmaUse : int { kWmmaA = 0, kWmmaB = 1, kWmmaAcc = 2 };

/// What a lane passes to kWarpWmmaLoad / kWarpWmmaStore: the tile in memory and where its
/// fragment elements are (8 per lane: bf16 for A and B, f32 for the accumulator).
struct WmmaMemory {
  void *pointer;          ///< the tile's first element
  unsigned long long ldm; ///< leading dimension in elements
  int use;                ///< WmmaUse
  int rowMajor;           ///< layout of the tile in memory
  void *fragment;         ///< this lane's 8 elements
};

/// What a lane passes to kWarpMmaM16N8K16Bf16: its A, B and C/D fragment registers.
struct MmaFragments {
  const unsigned *a;  ///< 4 registers, 2 bf16 each
  const unsigned *b;  ///< 2 registers
  float *c;           ///< 4 accumulators, read and written
};

/// What a lane passes to kWarpWmmaMma: its d, a, b, c fragments (8 elements each).
struct WmmaMmaFragments {
  float *d;
  const unsigned short *a;
  const unsigned short *b;
  const float *c;
};

struct Thread;

/// The engine's entry points, reached through Thread::ops.
struct Ops {
  /// A block-wide barrier; returns the reduction of kBarrierOr/And/Count.
  int (*barrier)(Thread *self, int kind, int value, const Site *site);
  /// A warp collective over the lanes of `mask` (`in` and `out` point to this lane's
  /// operands, a and b are the op's scalars); returns a 32-bit result (ballots).
  unsigned (*warp)(Thread *self, int op, unsigned mask, const void *in, void *out, int a,
                   int b, const Site *site);
  /// An instrumented memory access (the pass calls it before every load and store).
  void (*access)(Thread *self, const void *address, unsigned long long info, const Site *site);
  /// Unused (kept for the table's layout): __activemask is the warp op kWarpActiveMask.
  unsigned (*activeMask)(Thread *self);
  /// A device-side trap (__trap, a failed assert): ends the launch with an error.
  void (*trap)(Thread *self, const char *message, const Site *site);
};

/// One emulated CUDA thread; lives in its fiber's stack region (kThreadRecordOffset).
struct Thread {
  Dim3 thread_idx, block_idx, block_dim, grid_dim;
  unsigned lane;        ///< threadIdx linearized, mod 32
  unsigned linear;      ///< threadIdx linearized (x fastest)
  unsigned char *shared;  ///< the block's shared arena (static arrays, then dynamic)
  const Ops *ops;
  unsigned long long flops;  ///< scalar floating-point operations (the pass counts them)
  void *block;               ///< the engine's block (opaque to device code)
};

/// An entry of a module's shared-memory layout (emitted by the instrumentation pass as
/// `__ingot_simt_shared_layout`): one `__shared__` array, at `offset` in the arena.
struct SharedVariable {
  const char *name;  ///< mangled symbol name
  unsigned long long offset;
  unsigned long long size;
};
struct SharedLayout {
  unsigned long long count;
  /// Where the dynamic shared memory (extern __shared__) starts: after every static array
  /// and its red zone.
  unsigned long long dynamic_offset;
  const SharedVariable *variables;
};
/// Red zone before, between and after the arrays of the arena (bytes).
constexpr unsigned long long kSharedRedZone = 64;

/// A kernel of an emulated module (the module's `__ingot_simt_kernels` table, generated
/// after the kernel source by simt_module.cc): its name, the __launch_bounds__ maximum (0
/// when none), and a trampoline that calls it with the launch's parameters.
struct KernelEntry {
  const char *name;
  int max_threads;
  void (*invoke)(void **args);
  int num_params;
  const unsigned long long *param_sizes;
  const unsigned long long *param_aligns;
};
struct KernelTable {
  unsigned long long count;
  const KernelEntry *kernels;
};

}  // namespace simt
}  // namespace ingot
