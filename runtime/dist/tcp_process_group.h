// TcpProcessGroup: a tensor-parallel group whose ranks may be on different hosts (TCP mesh).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/dist/communicator.h"

namespace ingot {

class TcpStoreClient;

struct TcpProcessGroupOptions {
  /// Bound on the join and on every collective (each call gets the whole timeout). The same
  /// default as the other groups (SharedMemoryGroup::kDefaultTimeout).
  std::chrono::milliseconds timeout{30000};
  /// Store key prefix: several groups can share one store under different names.
  std::string name = "tp";
  /// Ranks per host, for messages only ("rank 3 (node 1)"); 0 = do not name nodes.
  int ranks_per_node = 0;
  /// The address this rank listens on for its higher-numbered peers. Empty: the local
  /// address this host uses to reach the store's host (found with a connected UDP socket,
  /// no packet sent), which is one the other hosts of the cluster can reach too.
  std::string listen_address;
  /// Called about every 20 ms while this rank waits for peers to join; an error fails the
  /// join with it at once (rank 0 reports a worker process that exited before joining).
  std::function<Status()> join_probe;
};

/// The collectives of N ranks that run as processes on one or several hosts, over one TCP
/// connection per pair of ranks. A correctness and portability path for CPU ranks that span
/// hosts (ShmProcessGroup is the fast one on one host; CUDA ranks use NCCL): every byte goes
/// through the kernel's TCP stack, and each collective costs two message rounds.
///
/// Join: every rank listens on its own address, publishes "<addr> <port> <pid> <host>"
/// under "<name>/tcp/<rank>" in the group's TcpStore, connects to every lower rank (its
/// first frame says which rank it is) and accepts every higher one. Errors name the ranks
/// (and nodes) that did not join within the timeout.
///
/// Collectives: all_reduce is a reduce-scatter then an all-gather over the mesh: rank r owns
/// the slice [n·r/N, n·(r+1)/N), receives every rank's values of it, sums them in rank order
/// ((x0 + x1) + x2) + ..., and sends the sums to every rank. So every rank gets the same bits,
/// and the same bits as SharedMemoryGroup and ShmProcessGroup for the same inputs. Every
/// message starts with a header (collective kind, sequence number, size) that the receiver
/// checks: ranks that call different collectives or sizes break the group with an error
/// naming both calls. Sends and receives with all peers progress together (non-blocking
/// sockets, poll), so no pair can deadlock on full socket buffers.
///
/// Failures (the Communicator contract): a peer whose connection closes (its process exited
/// or was killed) fails the collective at once, naming its rank, node, pid and address; a
/// peer that does not send within the timeout fails it naming the rank(s). The first error
/// breaks the group; abort() or a failure sends the error to every peer whose stream is at a
/// message boundary (they fail their current or next collective with it) and closes the
/// connections, so the rest of the group stops too. A broken group never recovers.
class TcpProcessGroup final : public Communicator {
 public:
  /// Joins the group as `rank` of `world_size` (>= 1) through `store`. The store is used
  /// only during the join.
  static StatusOr<std::unique_ptr<TcpProcessGroup>> join(TcpStoreClient& store, int rank,
                                                         int world_size,
                                                         const TcpProcessGroupOptions& options);
  ~TcpProcessGroup() override;
  TcpProcessGroup(const TcpProcessGroup&) = delete;
  TcpProcessGroup& operator=(const TcpProcessGroup&) = delete;

  int rank() const override { return rank_; }
  int worldSize() const override { return world_size_; }
  Status allReduceSum(float* data, int64_t n) override;
  Status allGather(const float* in, int64_t n_per_rank, float* out) override;
  Status barrier() override;
  /// Safe from any thread: a collective running on another thread fails at once.
  void abort(const Status& error) override;
  Status groupStatus() const override;

  /// "rank r (node k, pid p on host h, addr:port)", for messages.
  std::string describePeer(int r) const;

  /// Largest float count of one collective (per rank): 2^36 floats, 256 GiB; a larger
  /// count is a bad size rather than a request.
  static constexpr int64_t kMaxFloats = int64_t{1} << 36;

 private:
  struct Peer;
  struct Exchange;
  enum class Kind : uint32_t { kAllReduce = 1, kAllGather = 2, kBarrier = 3, kAbort = 4 };

  TcpProcessGroup(int rank, int world_size, const TcpProcessGroupOptions& options);
  Status connectMesh(TcpStoreClient& store);
  /// Reads rank `r`'s address record from `store` (key `prefix` + r) into peers_[r],
  /// keeping a connection already made to it; waits for it until `deadline`.
  Status readPeer(TcpStoreClient& store, const std::string& prefix, const std::string& what,
                  std::chrono::steady_clock::time_point deadline, int r);
  /// Connects to every lower rank and sends each the hello that names this rank.
  Status connectLowerRanks(TcpStoreClient& store, const std::string& prefix,
                           const std::string& what,
                           std::chrono::steady_clock::time_point deadline);
  /// Accepts a connection from every higher rank on `listener` until `deadline`.
  Status acceptHigherRanks(int listener, const std::string& what,
                           std::chrono::steady_clock::time_point deadline);
  /// Why a peer whose hello says rank `peer_rank` of `peer_world_size` may not join; empty
  /// when it may.
  std::string joinRefusal(int32_t peer_rank, int32_t peer_world_size) const;
  /// The higher ranks that have not connected yet, "rank 2 (...), rank 3 (...)".
  std::string missingHigherRanks() const;
  /// Moves every peer's message of `ex` both ways, until done, a failure or the deadline.
  Status run(Exchange& ex, Kind kind, uint64_t seq, int64_t n,
             std::chrono::steady_clock::time_point deadline);
  /// Records `error` as the group's first error (a later one is dropped) and returns the
  /// group's error.
  Status breakGroup(const Status& error);
  /// Sends the group's error to the peers at a message boundary and closes every
  /// connection; on the thread that owns the sockets (the collective's, or abort()'s when
  /// no collective runs).
  void notifyPeers();
  std::string label(Kind kind, uint64_t seq) const;
  std::string nodeOf(int r) const;
  /// Marks a collective running (fails at once when the group is broken); end() unmarks
  /// it and notifies the peers if the group broke meanwhile.
  Status begin();
  void end();

  const int rank_;
  const int world_size_;
  const TcpProcessGroupOptions options_;
  std::vector<std::unique_ptr<Peer>> peers_;  // by rank; null for this rank
  int wake_fd_ = -1;  // eventfd: abort() wakes a collective waiting in poll()
  uint64_t seq_ = 0;
  std::vector<float> scratch_;

  mutable std::mutex mu_;  // guards the three below
  Status error_;
  bool in_call_ = false;
  bool notified_ = false;
};

}  // namespace ingot
