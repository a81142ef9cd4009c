// ShmProcessGroup: a tensor-parallel group whose ranks are processes on one host (POSIX shm).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/dist/communicator.h"

namespace ingot {

class TcpStoreClient;

struct ShmProcessGroupOptions {
  /// Bound on every wait: the join, and each rendezvous of every collective. The same
  /// default as the in-process group (SharedMemoryGroup::kDefaultTimeout) for the same reason.
  std::chrono::milliseconds timeout{30000};
  /// Floats one rank stages per round of a collective; larger collectives run in rounds.
  /// 1 Mi floats (4 MiB per rank) holds one all_reduce of a 4096-wide hidden state for 256
  /// tokens, or one all_gather of 8 logit rows of a 128k vocab split 8 ways, in one round.
  /// Every rank must pass the same value (checked at the join).
  int64_t chunk_floats = int64_t{1} << 20;
  /// Store key prefix: several groups can share one store under different names.
  std::string name = "tp";
  /// Called about every 10 ms while this rank waits for the others to join; an error
  /// fails the join with it at once (rank 0 reports a worker process that exited before
  /// joining, instead of waiting out the timeout).
  std::function<Status()> join_probe;
};

/// The collectives of N ranks that run as N processes on one host, through one POSIX
/// shared-memory region (shm_open + mmap). Rank 0 creates the region under a name made
/// from a random id and publishes the name through the group's TcpStore; the others map
/// it; once every rank has joined, rank 0 unlinks the name, so nothing is left in /dev/shm
/// when the processes end, however they end.
///
/// Same contract as SharedMemoryGroup (communicator.h): sums in rank order, so every rank
/// gets the same bits, and the same bits as SharedMemoryGroup for the same inputs; a
/// bounded wait in every collective; the first error breaks the group for every rank (the
/// broken flag and its message live in the region); abort(). A collective is staged
/// through the region in rounds of chunk_floats: each rank copies its input in, the ranks
/// meet, each sums (or gathers) its share, the ranks meet again.
///
/// Waiting: a rank spins briefly, then sleeps on a futex in the region in slices of
/// ~10 ms, and between slices checks the ranks it waits for through pidfds: a peer
/// process that exited (SIGKILL included) fails the collective within a slice, with an
/// error naming the rank and its pid; one that hangs fails it after the timeout.
class ShmProcessGroup final : public Communicator {
 public:
  /// Joins the group as `rank` of `world_size` (>= 1): rank 0 creates the region and
  /// publishes its name in `store` under "<name>/shm"; every rank then waits (at most the
  /// timeout) until all have joined. Errors name the region, the store key or the missing
  /// ranks.
  static StatusOr<std::unique_ptr<ShmProcessGroup>> join(TcpStoreClient& store, int rank,
                                                         int world_size,
                                                         const ShmProcessGroupOptions& options);
  /// Unmaps the region (rank 0 unlinks its name if the join never completed).
  ~ShmProcessGroup() override;
  ShmProcessGroup(const ShmProcessGroup&) = delete;
  ShmProcessGroup& operator=(const ShmProcessGroup&) = delete;

  int rank() const override { return rank_; }
  int worldSize() const override { return world_size_; }
  Status allReduceSum(float* data, int64_t n) override;
  Status allGather(const float* in, int64_t n_per_rank, float* out) override;
  Status barrier() override;
  void abort(const Status& error) override;
  Status groupStatus() const override;

  /// The process id rank `r` joined with (0 when out of range).
  pid_t pidOf(int r) const;

 private:
  struct Header;
  struct RankSlot;
  enum class Kind : uint32_t { kJoin, kAllReduce, kAllGather, kBarrier };

  ShmProcessGroup(int rank, int world_size, const ShmProcessGroupOptions& options);
  /// Maps (rank 0: creates) the region; the layout is fixed by world size and chunk.
  Status mapRegion(TcpStoreClient& store);
  Status completeJoin();
  size_t regionBytes() const;
  RankSlot& slot(int r) const;
  float* stage(int r) const;  // rank r's input staging area, chunk_floats
  float* sums() const;        // the round's sums, chunk_floats

  /// One collective's first rendezvous (checks every rank called the same) or a later one.
  Status arrive(Kind kind, int64_t n, uint64_t seq, bool first);
  /// Waits until every rank has reached rendezvous `target`, or fails (and breaks the group).
  Status waitAll(uint64_t target, const std::string& label, bool joining);
  void breakGroup(const Status& error);
  std::string label(Kind kind, uint64_t seq) const;
  void wakeAll();

  const int rank_;
  const int world_size_;
  const ShmProcessGroupOptions options_;
  std::string shm_name_;
  bool unlinked_ = false;
  void* region_ = nullptr;
  size_t region_bytes_ = 0;
  Header* header_ = nullptr;
  /// pidfds of the other ranks (-1 for this rank or where pidfd_open is unavailable).
  std::vector<int> pidfds_;
  uint64_t seq_ = 0;     // collectives called
  uint64_t passed_ = 0;  // rendezvous passed (the join is rendezvous 1)
};

}  // namespace ingot
