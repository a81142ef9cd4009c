// ThreadPool: persistent workers that join open loops, spin briefly, then sleep.
#include "runtime/backend/cpu/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define INGOT_CPU_RELAX() _mm_pause()
#else
#define INGOT_CPU_RELAX() std::this_thread::yield()
#endif

namespace ingot {
namespace {

/// Pause iterations (~10-40 ns each) a worker polls for the next loop before it sleeps:
/// long enough to bridge the gap between the steps of a decode step, short enough not to
/// burn a core while the engine is idle.
constexpr int kSpinIterations = 20000;
/// Pause iterations the caller spins waiting for joined workers before it starts
/// yielding its core to them (they may be descheduled on a loaded machine).
constexpr int kCallerSpinIterations = 2000;
/// Chunks per thread for range loops: enough to rebalance around a slow thread.
constexpr int64_t kChunksPerThread = 4;

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this, i] { workerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
    state_.fetch_add(uint64_t{1} << kGenShift);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::runChunks(int worker) {
  for (int64_t c = next_chunk_.fetch_add(1); c < num_chunks_; c = next_chunk_.fetch_add(1))
    (*job_)(c, worker);
}

void ThreadPool::workerLoop(int worker) {
  uint64_t seenGen = 0;
  for (;;) {
    uint64_t s = state_.load(std::memory_order_acquire);
    for (int spin = 0; (s >> kGenShift) == seenGen && spin < kSpinIterations; ++spin) {
      INGOT_CPU_RELAX();
      s = state_.load(std::memory_order_acquire);
    }
    if ((s >> kGenShift) == seenGen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return (state_.load(std::memory_order_acquire) >> kGenShift) != seenGen; });
      s = state_.load(std::memory_order_acquire);
    }
    if (stop_.load()) return;
    seenGen = s >> kGenShift;
    // Join the loop of generation seenGen unless the caller has already closed it.
    bool joined = false;
    while ((s >> kGenShift) == seenGen && !(s & kClosedBit)) {
      if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel)) {
        joined = true;
        break;
      }
    }
    if (!joined) continue;
    runChunks(worker);
    done_.fetch_add(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::parallelChunks(int64_t num_chunks,
                                const std::function<void(int64_t, int)>& fn) {
  if (num_chunks <= 0) return;
  if (workers_.empty() || num_chunks == 1) {
    for (int64_t c = 0; c < num_chunks; ++c) fn(c, 0);
    return;
  }
  job_ = &fn;
  num_chunks_ = num_chunks;
  next_chunk_.store(0, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  {
    // Under the lock so a worker about to sleep sees the new generation in its predicate.
    std::lock_guard<std::mutex> lock(mutex_);
    const uint64_t gen = (state_.load(std::memory_order_relaxed) >> kGenShift) + 1;
    state_.store(gen << kGenShift, std::memory_order_release);
  }
  wake_.notify_all();
  runChunks(0);
  const uint64_t closed = state_.fetch_or(kClosedBit, std::memory_order_acq_rel);
  const int joined = static_cast<int>(closed & kJoinedMask);
  for (int spin = 0; done_.load(std::memory_order_acquire) != joined; ++spin) {
    if (spin < kCallerSpinIterations) INGOT_CPU_RELAX();
    else std::this_thread::yield();
  }
}

void ThreadPool::parallelRanges(int64_t n, int64_t grain,
                                const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t units = (n + grain - 1) / grain;
  const int64_t chunks = std::min<int64_t>(units, size() == 1 ? 1 : size() * kChunksPerThread);
  parallelChunks(chunks, [&](int64_t c, int) {
    const int64_t u0 = units * c / chunks, u1 = units * (c + 1) / chunks;
    const int64_t begin = u0 * grain, end = std::min(n, u1 * grain);
    if (begin < end) fn(begin, end);
  });
}

void ThreadPool::parallelForDynamic(int64_t n, const std::function<void(int64_t, int)>& fn) {
  parallelChunks(n, fn);
}

}  // namespace ingot
