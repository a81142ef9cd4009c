// SharedMemoryGroup: an in-process tensor-parallel group whose ranks are threads.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/dist/communicator.h"

namespace ingot {

/// The collectives of N ranks that run on N threads of one process, through shared memory
/// (the CPU backend's tensor parallelism). Each rank takes its Communicator from
/// communicator(rank) and calls it from its own thread only.
///
/// A collective is two rendezvous: every rank posts its buffer and arrives; then each rank
/// does its share of the work (its slice of the sum, its copy of the gather) and arrives
/// again. A waiting rank spins briefly, then sleeps on a condition variable, so idle ranks
/// leave the cores to the ranks still computing. The sum is split over the ranks by
/// element and taken in rank order, so results do not depend on thread timing.
class SharedMemoryGroup {
 public:
  /// Default collective timeout: long enough for the slowest rank's work between two
  /// collectives (one layer of a long prefill on a loaded CPU), short enough that a dead
  /// group is noticed while a client still waits.
  static constexpr std::chrono::milliseconds kDefaultTimeout{30000};

  /// A group of `world_size` >= 1 ranks; every wait is bounded by `timeout` (> 0).
  static StatusOr<std::unique_ptr<SharedMemoryGroup>> create(
      int world_size, std::chrono::milliseconds timeout = kDefaultTimeout);
  ~SharedMemoryGroup();
  SharedMemoryGroup(const SharedMemoryGroup&) = delete;
  SharedMemoryGroup& operator=(const SharedMemoryGroup&) = delete;

  int worldSize() const { return world_size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  /// Rank `rank`'s handle (owned by the group); 0 <= rank < worldSize().
  Communicator* communicator(int rank);
  /// The error that broke the group; ok while it is healthy.
  Status status() const;
  /// Breaks the group with `error` (see Communicator::abort).
  void abort(const Status& error);

 private:
  class RankCommunicator;
  friend class RankCommunicator;

  enum class Kind : uint8_t { kAllReduce, kAllGather, kBarrier };
  /// What a rank called, checked against the other ranks at the first rendezvous.
  struct Call {
    Kind kind = Kind::kBarrier;
    int64_t n = 0;
    uint64_t seq = 0;
  };

  SharedMemoryGroup(int world_size, std::chrono::milliseconds timeout);
  /// One rendezvous of rank `rank`: returns when all ranks have arrived at the rendezvous
  /// after the `passed` it has passed (then increments it), or with the group's error.
  /// `call` (first rendezvous of a collective only) is checked against the others' calls.
  Status arrive(int rank, uint64_t& passed, const Call& call, bool first);
  /// Breaks the group with `error` unless broken already; mu_ must be held.
  void breakLocked(Status error);
  std::string label(const Call& call) const;

  Status allReduceSum(int rank, uint64_t& passed, uint64_t seq, float* data, int64_t n);
  Status allGather(int rank, uint64_t& passed, uint64_t seq, const float* in, int64_t n,
                   float* out);

  const int world_size_;
  const std::chrono::milliseconds timeout_;
  std::vector<std::unique_ptr<RankCommunicator>> ranks_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  /// Rendezvous completed so far (release-stored by the last rank to arrive).
  std::atomic<uint64_t> completed_{0};
  std::atomic<bool> broken_{false};
  Status error_;                   // guarded by mu_
  int arrived_count_ = 0;          // guarded by mu_: arrivals at the open rendezvous
  std::vector<uint8_t> arrived_;   // guarded by mu_: which ranks arrived there
  std::vector<Call> calls_;        // guarded by mu_: what each arrived rank called

  /// Buffers posted for the collective in progress (written before the first rendezvous,
  /// read between the two).
  std::vector<float*> io_;
  std::vector<const float*> in_;
  /// Sums, double-buffered by collective parity: a rank copies the sum out after the
  /// second rendezvous of collective k, and nobody writes that buffer again before every
  /// rank passed the second rendezvous of k + 1.
  std::vector<float> sums_[2];
};

}  // namespace ingot
