// ThreadPool: a small persistent pool of std::threads for the CPU backend's parallel loops.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ingot {

/// A fixed set of worker threads plus the calling thread (worker 0) that share the chunks
/// of one parallel loop at a time. Chunks are handed out through an atomic counter and a
/// worker takes part only if it arrives while the loop is open: on a loaded machine a
/// descheduled worker therefore never holds the caller up (the caller runs the chunks
/// itself and closes the loop). Workers spin briefly before they sleep, because a step
/// runs hundreds of short loops and a condition-variable wake-up costs tens of
/// microseconds. Not reentrant: a loop body must not start another loop on the same pool.
class ThreadPool {
 public:
  /// `num_threads` counts the caller; values below 1 mean 1 (no extra threads).
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  /// Runs fn(chunk, worker) for every chunk in [0, num_chunks), each exactly once, on the
  /// caller and whichever workers join; returns when all are done. `worker` < size().
  void parallelChunks(int64_t num_chunks, const std::function<void(int64_t chunk, int worker)>& fn);

  /// Splits [0, n) into ranges that are multiples of `grain` (except the last), a few per
  /// thread, and runs fn(begin, end) on each.
  void parallelRanges(int64_t n, int64_t grain,
                      const std::function<void(int64_t begin, int64_t end)>& fn);

  /// Runs fn(i, worker) for every i in [0, n), one index at a time.
  void parallelForDynamic(int64_t n, const std::function<void(int64_t i, int worker)>& fn);

 private:
  void workerLoop(int worker);
  void runChunks(int worker);

  // state_: generation << kGenShift | closed bit | number of workers that joined.
  static constexpr uint64_t kJoinedMask = 0xffff;
  static constexpr uint64_t kClosedBit = 1ull << 16;
  static constexpr int kGenShift = 17;

  std::vector<std::thread> workers_;
  const std::function<void(int64_t, int)>* job_ = nullptr;
  int64_t num_chunks_ = 0;
  std::atomic<int64_t> next_chunk_{0};
  std::atomic<uint64_t> state_{kClosedBit};
  std::atomic<int> done_{0};
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
};

}  // namespace ingot
