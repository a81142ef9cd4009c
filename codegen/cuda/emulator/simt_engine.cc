// The SIMT emulator's engine: launches over a worker pool, the threads of a block as fibers, barriers.
#include <sys/mman.h>
#include <xmmintrin.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>

#include "codegen/cuda/emulator/simt_internal.h"

namespace ingot {
namespace simt {
namespace {

// ---- diagnostics ---------------------------------------------------------------------------

std::string threadText(const Thread *t) { return dimText(t->thread_idx); }

std::string context(const Thread *t) {
  const BlockRun &b = *static_cast<const BlockRun *>(t->block);
  return std::string(kernelName(*b.launch->kernel)) + " block " + dimText(t->block_idx) +
         " thread " + threadText(t);
}

// ---- the worker pool -------------------------------------------------------------------------

/// Host threads that run blocks. The launching thread runs blocks too; the pool adds
/// INGOT_SIMT_WORKERS - 1 threads (default: the hardware threads, at most 8).
class Pool {
 public:
  static Pool &get() {
    static Pool *pool = new Pool();  // never destroyed: workers may outlive static teardown
    return *pool;
  }

  /// Runs `body(worker)` on every pool thread and the caller, returning when all are done.
  template <class F>
  void run(F body) {
    std::unique_lock<std::mutex> lock(mutex_);
    job_ = [&body](Worker &w) { body(w); };
    remaining_ = static_cast<int>(threads_.size());
    ++generation_;
    wake_.notify_all();
    lock.unlock();
    body(caller());
    lock.lock();
    done_.wait(lock, [&] { return remaining_ == 0; });
    job_ = nullptr;
  }

 private:
  Pool() {
    unsigned n = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
    if (const char *env = std::getenv("INGOT_SIMT_WORKERS")) n = std::max(1, std::atoi(env));
    for (unsigned i = 1; i < n; ++i) threads_.emplace_back([this] { loop(); });
    for (std::thread &t : threads_) t.detach();
  }
  /// The calling thread's worker (one per host thread that launches).
  static Worker &caller() {
    static thread_local Worker worker;
    return worker;
  }
  void loop() {
    Worker worker;
    uint64_t seen = 0;
    for (;;) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      auto job = job_;
      lock.unlock();
      job(worker);
      lock.lock();
      if (--remaining_ == 0) done_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::function<void(Worker &)> job_;
  int remaining_ = 0;
  uint64_t generation_ = 0;
  std::vector<std::thread> threads_;
};

/// Launches are run one at a time (a CUDA stream's order; the fake driver has one stream).
std::mutex &launchMutex() {
  static std::mutex m;
  return m;
}

std::mutex gTotalsMutex;
Counters gTotals;

// ---- fibers ----------------------------------------------------------------------------------

/// Maps the worker's fiber regions once (kMaxThreadsPerBlock of them, aligned to their size,
/// each with its guard page); pages are committed as fibers touch them.
void ensureStacks(Worker &w) {
  if (w.stacks) return;
  const size_t bytes = static_cast<size_t>(kMaxThreadsPerBlock) * kStackRegionBytes;
  void *raw = mmap(nullptr, bytes + kStackRegionBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) {
    std::fprintf(stderr, "ingot simt: cannot map fiber stacks\n");
    std::abort();
  }
  const uintptr_t start = (reinterpret_cast<uintptr_t>(raw) + kStackRegionBytes - 1) &
                          ~(kStackRegionBytes - 1);
  w.stacks = reinterpret_cast<unsigned char *>(start);
  w.stack_bytes = bytes;
  w.mapping = raw;
  w.mapping_bytes = bytes + kStackRegionBytes;
  for (unsigned i = 0; i < kMaxThreadsPerBlock; ++i)
    mprotect(w.stacks + static_cast<size_t>(i) * kStackRegionBytes, 4096, PROT_NONE);
}

const Ops &engineOps();
void releaseBarrierIfComplete(BlockRun &b, Thread *current);

void fiberMain(ctx::transfer_t from) {
  Worker *w = static_cast<Worker *>(from.data);
  w->scheduler = from.fctx;
  // This frame is in the fiber's region: its record is found as device code finds it.
  const uintptr_t frame = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  Thread *t = reinterpret_cast<Thread *>((frame & ~(kStackRegionBytes - 1)) + kThreadRecordOffset);
  BlockRun &b = w->block;
  b.launch->kernel->invoke(b.launch->args.data());
  // The thread ends: it no longer counts for barriers; lanes waiting for it fail.
  ThreadSlot &slot = b.slots[t->linear];
  slot.state = ThreadState::kExited;
  --b.live;
  Warp &warp = b.warps[t->linear / 32];
  warp.exited |= 1u << t->lane;
  warpLaneExited(t, warp, t->lane);
  activeMaskCheck(b, t->linear / 32);
  releaseBarrierIfComplete(b, t);  // an exited thread is not live: the rest may go on
  for (;;) ctx::jump_fcontext(w->scheduler, nullptr);  // never resumed
}

/// Runs block `index` of `launch` on worker `w` to its end (or its abort).
void runBlock(Worker &w, Launch &launch, uint64_t linear) {
  BlockRun &b = w.block;
  const unsigned n = launch.block.x * launch.block.y * launch.block.z;
  b.launch = &launch;
  b.worker = &w;
  b.index = Dim3{static_cast<unsigned>(linear % launch.grid.x),
                 static_cast<unsigned>(linear / launch.grid.x % launch.grid.y),
                 static_cast<unsigned>(linear / (static_cast<uint64_t>(launch.grid.x) * launch.grid.y))};
  b.num_threads = n;
  b.live = n;
  b.at_barrier = 0;
  b.aborted = false;
  b.counters = Counters{};
  b.counters.blocks = 1;
  b.counters.threads = n;
  b.hit_base = 0;
  b.hit_bytes = 0;
  b.interval = ++w.next_interval;
  b.slots.assign(n, ThreadSlot{});
  b.warps.assign((n + 31) / 32, Warp{});
  for (unsigned i = 0; i < b.warps.size(); ++i)
    b.warps[i].exists = n - i * 32 >= 32 ? 0xffffffffu : (1u << (n - i * 32)) - 1u;
  b.ready.clear();
  b.ready_head = 0;
  // Fresh shared memory reads as NaN (0xFF bytes), as unwritten device memory does here.
  std::memset(w.arena, 0xff, w.arena_bytes);
  for (unsigned i = 0; i < n; ++i) {
    Thread *t = w.record(i);
    t->thread_idx = Dim3{i % launch.block.x, i / launch.block.x % launch.block.y,
                         i / (launch.block.x * launch.block.y)};
    t->block_idx = b.index;
    t->block_dim = Dim3{launch.block.x, launch.block.y, launch.block.z};
    t->grid_dim = Dim3{launch.grid.x, launch.grid.y, launch.grid.z};
    t->lane = i % 32;
    t->linear = i;
    t->shared = w.arena;
    t->ops = &engineOps();
    t->flops = 0;
    t->block = &b;
    unsigned char *top = w.stacks + static_cast<size_t>(i + 1) * kStackRegionBytes;
    b.slots[i].fiber = ctx::make_fcontext(top, kStackBytes, fiberMain);
    b.ready.push_back(i);
  }
  while (b.ready_head < b.ready.size() && !b.aborted) {
    const unsigned i = b.ready[b.ready_head++];
    ctx::transfer_t back = ctx::jump_fcontext(b.slots[i].fiber, &w);
    b.slots[i].fiber = back.fctx;
    if (b.ready_head > 4096 && b.ready_head * 2 > b.ready.size()) {
      b.ready.erase(b.ready.begin(), b.ready.begin() + static_cast<long>(b.ready_head));
      b.ready_head = 0;
    }
  }
  if (!b.aborted && b.live > 0) {
    // Nobody can run and some threads have not ended: a barrier or a collective that the
    // threads it waits for never reach.
    std::lock_guard<std::mutex> lock(launch.mutex);
    if (launch.diagnostics.size() < kMaxDiagnostics)
      launch.diagnostics.push_back(
          Diagnostic{Diagnostic::Kind::kBarrierDivergence,
                     std::string(kernelName(*launch.kernel)) + " block " + dimText(b.index) +
                         ": deadlock: " + describeWaits(b)});
    b.aborted = true;
  }
  if (b.aborted) launch.aborted = true;
  for (unsigned i = 0; i < n; ++i) b.counters.scalar_flops += w.record(i)->flops;
  std::lock_guard<std::mutex> lock(launch.mutex);
  launch.counters += b.counters;
}

// ---- barriers --------------------------------------------------------------------------------

/// When every live thread of `b` waits at a barrier, checks they wait at the same one and
/// releases them with its reduction. `current` is the fiber running (a diagnostic ends it).
void releaseBarrierIfComplete(BlockRun &b, Thread *current) {
  if (b.at_barrier == 0 || b.at_barrier != b.live) return;
  const ThreadSlot *first = nullptr;
  unsigned firstIndex = 0;
  int any = 0, all = 1, count = 0;
  for (unsigned i = 0; i < b.num_threads; ++i) {
    const ThreadSlot &s = b.slots[i];
    if (s.state != ThreadState::kAtBarrier) continue;
    if (!first) {
      first = &s;
      firstIndex = i;
    } else if (s.site.line != first->site.line || std::strcmp(s.site.file, first->site.file) != 0 ||
               s.op != first->op) {
      fail(current, Diagnostic::Kind::kBarrierDivergence,
           "__syncthreads not reached by every live thread of the block: thread " +
               dimText(b.worker->record(firstIndex)->thread_idx) + " waits at " +
               where(&first->site) + ", thread " + dimText(b.worker->record(i)->thread_idx) +
               " at " + where(&s.site),
           &first->site);
    }
    any |= s.value != 0;
    all &= s.value != 0;
    count += s.value != 0;
  }
  const int op = first->op;
  const int result = op == kBarrierOr ? any : op == kBarrierAnd ? all : op == kBarrierCount ? count : 0;
  for (unsigned i = 0; i < b.num_threads; ++i)
    if (b.slots[i].state == ThreadState::kAtBarrier) {
      b.slots[i].result = result;
      makeReady(b, i);
    }
  b.at_barrier = 0;
  b.interval = ++b.worker->next_interval;  // accesses before and after no longer race
  ++b.counters.barriers;
}

int barrierOp(Thread *t, int kind, int value, const Site *site) {
  BlockRun &b = *static_cast<BlockRun *>(t->block);
  ThreadSlot &slot = b.slots[t->linear];
  slot.state = ThreadState::kAtBarrier;
  slot.site = *site;
  slot.op = kind;
  slot.value = value;
  ++b.at_barrier;
  releaseBarrierIfComplete(b, t);
  activeMaskCheck(b, t->linear / 32);
  yieldToScheduler(t);
  return slot.result;
}

unsigned warpOp(Thread *t, int op, unsigned mask, const void *in, void *out, int a, int b,
                const Site *site) {
  return warpCollective(t, op, mask, in, out, a, b, site);
}

unsigned activeMaskOp(Thread *t) {
  BlockRun &b = *static_cast<BlockRun *>(t->block);
  const Warp &w = b.warps[t->linear / 32];
  return w.exists & ~w.exited;  // not called by the prelude (kWarpActiveMask is)
}

void trapOp(Thread *t, const char *message, const Site *site) {
  fail(t, Diagnostic::Kind::kTrap, message, site);
}

const Ops &engineOps() {
  static const Ops ops{barrierOp, warpOp, checkAccess, activeMaskOp, trapOp};
  return ops;
}

/// The launch's blocks on one worker; FTZ/DAZ on, as --use_fast_math's flush-to-zero.
void workOn(Worker &w, Launch &launch) {
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(csr | 0x8040u);  // FTZ (bit 15) and DAZ (bit 6)
  ensureStacks(w);
  prepareArena(w, launch);
  for (;;) {
    if (launch.aborted.load()) break;
    const uint64_t i = launch.next_block.fetch_add(1);
    if (i >= launch.num_blocks) break;
    runBlock(w, launch, i);
  }
  _mm_setcsr(csr);
}

}  // namespace

// ---- shared with the other files ---------------------------------------------------------------

Counters &Counters::operator+=(const Counters &o) {
  launches += o.launches;
  blocks += o.blocks;
  threads += o.threads;
  global_bytes_read += o.global_bytes_read;
  global_bytes_written += o.global_bytes_written;
  tensor_flops += o.tensor_flops;
  scalar_flops += o.scalar_flops;
  barriers += o.barriers;
  warp_collectives += o.warp_collectives;
  return *this;
}

Worker::~Worker() {
  // A launching thread's worker goes with its thread (a pool worker lives as long as the
  // process): its fiber stacks are unmapped, or each thread that ever launched would keep
  // 64 MiB and a thousand guard-page mappings.
  if (mapping) munmap(mapping, mapping_bytes);
}

std::string dimText(const Dim3 &d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

std::string where(const Site *site) {
  if (!site || !site->file) return "(unknown line)";
  std::string s = std::string(site->file) + ":" + std::to_string(site->line);
  if (site->function) s += " in " + demangle(site->function);
  return s;
}

void report(Thread *t, Diagnostic::Kind kind, const std::string &what, const Site *site) {
  BlockRun &b = *static_cast<BlockRun *>(t->block);
  Launch &launch = *b.launch;
  std::lock_guard<std::mutex> lock(launch.mutex);
  if (launch.diagnostics.size() >= kMaxDiagnostics) return;
  launch.diagnostics.push_back(
      Diagnostic{kind, context(t) + " at " + where(site) + ": " + what});
}

void fail(Thread *t, Diagnostic::Kind kind, const std::string &what, const Site *site) {
  report(t, kind, what, site);
  BlockRun &b = *static_cast<BlockRun *>(t->block);
  b.aborted = true;
  b.launch->aborted = true;
  // Back to the scheduler for good: the fiber is abandoned (its stack is reused).
  Worker *w = b.worker;
  for (;;) ctx::jump_fcontext(w->scheduler, nullptr);
}

void yieldToScheduler(Thread *t) {
  BlockRun &b = *static_cast<BlockRun *>(t->block);
  Worker *w = b.worker;
  ctx::transfer_t back = ctx::jump_fcontext(w->scheduler, nullptr);
  w->scheduler = back.fctx;
}

void makeReady(BlockRun &block, unsigned index) {
  block.slots[index].state = ThreadState::kReady;
  block.ready.push_back(index);
}

const char *kindName(Diagnostic::Kind kind) {
  switch (kind) {
    case Diagnostic::Kind::kSharedOutOfBounds: return "shared-out-of-bounds";
    case Diagnostic::Kind::kSharedRace: return "shared-race";
    case Diagnostic::Kind::kBarrierDivergence: return "barrier-divergence";
    case Diagnostic::Kind::kWarpMask: return "warp-mask";
    case Diagnostic::Kind::kWarpDivergence: return "warp-divergence";
    case Diagnostic::Kind::kGlobalOutOfBounds: return "global-out-of-bounds";
    case Diagnostic::Kind::kHostMemory: return "host-memory";
    case Diagnostic::Kind::kTrap: return "trap";
  }
  return "unknown";
}

std::string LaunchResult::report() const {
  std::string text;
  for (const Diagnostic &d : diagnostics) text += std::string(kindName(d.kind)) + ": " + d.message + "\n";
  if (aborted && diagnostics.empty()) text += "launch aborted\n";
  return text;
}

LaunchResult launch(const Module &module, const KernelEntry &kernel, Dim grid, Dim block,
                    unsigned dynamic_shared, void **args) {
  LaunchResult result;
  const uint64_t threads = static_cast<uint64_t>(block.x) * block.y * block.z;
  const SharedLayout *layout = moduleSharedLayout(module);
  const size_t staticShared = layout ? layout->dynamic_offset : 0;
  std::string invalid;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0)
    invalid = "empty grid or block";
  else if (threads > kMaxThreadsPerBlock)
    invalid = std::to_string(threads) + " threads per block (at most 1024)";
  else if (kernel.max_threads > 0 && threads > static_cast<uint64_t>(kernel.max_threads))
    invalid = std::to_string(threads) + " threads per block, above the kernel's __launch_bounds__ (" +
              std::to_string(kernel.max_threads) + ")";
  else if (grid.y > 65535 || grid.z > 65535)
    invalid = "grid y or z above 65535";
  else if (dynamic_shared > kMaxSharedPerBlock)
    invalid = std::to_string(dynamic_shared) + " bytes of dynamic shared memory (at most 227 KiB)";
  if (!invalid.empty()) {
    result.ok = false;
    result.aborted = true;
    result.diagnostics.push_back(Diagnostic{Diagnostic::Kind::kTrap,
                                            std::string(kernel.name) + ": invalid launch: " + invalid});
    return result;
  }
  std::lock_guard<std::mutex> serial(launchMutex());
  Launch l;
  l.module = &module;
  l.kernel = &kernel;
  l.grid = grid;
  l.block = block;
  l.dynamic_shared = dynamic_shared;
  l.static_shared = staticShared;
  l.num_blocks = static_cast<uint64_t>(grid.x) * grid.y * grid.z;
  for (int i = 0; i < kernel.num_params; ++i) {
    const size_t bytes = kernel.param_sizes[i];
    l.param_storage.emplace_back(new unsigned char[bytes + 16]);
    // Aligned to the parameter's alignment (at most 16 here).
    unsigned char *p = l.param_storage.back().get();
    const size_t align = kernel.param_aligns[i] ? kernel.param_aligns[i] : 1;
    p += (align - reinterpret_cast<uintptr_t>(p) % align) % align;
    std::memcpy(p, args[i], bytes);
    l.args.push_back(p);
  }
  Pool::get().run([&l](Worker &w) { workOn(w, l); });
  l.counters.launches = 1;
  result.counters = l.counters;
  result.diagnostics = std::move(l.diagnostics);
  result.aborted = l.aborted.load();
  result.ok = !result.aborted && result.diagnostics.empty();
  std::lock_guard<std::mutex> lock(gTotalsMutex);
  gTotals += result.counters;
  return result;
}

Counters totals() {
  std::lock_guard<std::mutex> lock(gTotalsMutex);
  return gTotals;
}

void resetTotals() {
  std::lock_guard<std::mutex> lock(gTotalsMutex);
  gTotals = Counters{};
}

}  // namespace simt
}  // namespace ingot
