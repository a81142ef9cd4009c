// NcclCommunicator: one GPU rank of a tensor-parallel group on NCCL, with bounded waits.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/backend/cuda/cuda_driver.h"
#include "runtime/dist/communicator.h"
#include "runtime/dist/nccl_library.h"
#include "runtime/dist/stream_collectives.h"
#include "runtime/dist/tcp_store.h"

namespace ingot {

/// Element types of the device buffers the NCCL collectives take.
enum class CollectiveDtype : uint8_t { kF32, kBf16 };

/// "f32" / "bf16", for messages.
const char* collectiveDtypeName(CollectiveDtype dtype);

/// Who this rank is and how long anything may take.
struct NcclGroupOptions {
  int rank = 0;
  int world_size = 1;
  /// CUDA device ordinal this rank runs on (one rank per device: NCCL refuses two ranks of
  /// one group on one device).
  int device = 0;
  /// Bound on init (including the wait for the unique id) and on every collective.
  std::chrono::milliseconds timeout{30000};
  /// Prefix of the store keys of this group. A store can serve several groups, and a
  /// restarted group must use a new name: a stale unique id would pair ranks of two groups.
  std::string group_name = "tp";
  /// Asked every few milliseconds while init waits for the other ranks; an error ends the
  /// wait at once (the communicator is aborted) and create() returns it. Rank 0 of
  /// MultiProcessTpBackend passes "has a worker process exited?", so a worker that dies
  /// before NCCL connects fails the start in milliseconds, not after the timeout.
  std::function<Status()> join_probe;
};

/// One rank's NCCL communicator. Implements Communicator over device memory: the float
/// pointers of the Communicator calls are device pointers on this rank's device (f32); the
/// dtype-taking overloads also do bf16. Every collective runs on the communicator's own
/// stream and the call returns when it completed (the lock-step contract of Communicator).
/// The StreamCollectives calls instead enqueue on the caller's stream and return at once
/// (capturable into CUDA graphs); waitStream() is then the one bounded wait of a step.
///
/// Failure model, as Communicator's: each host-call collective, and each waitStream() (a
/// whole step of stream-ordered work), waits at most `timeout`; when it has not completed by
/// then, or NCCL reports an asynchronous error (a peer died, the network failed), the
/// communicator is aborted (ncclCommAbort, so no kernel keeps spinning on a dead peer) and
/// this and every later call fail with an error naming the collective or the step.
/// The abort runs on a thread of its own: NCCL 2.26+ finishes it only once every CUDA graph
/// that captured this communicator is destroyed, so a graph owner must drop its graphs when
/// the group breaks (CudaBackend does) and be destroyed before the communicator.
/// NCCL cannot say which peer is missing; the other ranks see their own timeout or
/// NCCL's remote error. The communicator is created nonblocking (config.blocking = 0) so
/// that an init waiting for a rank that never comes can be abandoned too.
///
/// Sums use NCCL's reduction order (ring or tree), not SharedMemoryGroup's rank order: with
/// 1 or 2 ranks the results are the same bits; with more, f32 sums may differ in the last
/// bits between the two implementations (each is deterministic for a fixed topology).
class NcclCommunicator final : public Communicator, public StreamCollectives {
 public:
  /// Forms the group: rank 0 makes the NCCL unique id and publishes it through `store`
  /// under "<group_name>/nccl_unique_id"; the others wait for it there; then every rank
  /// initializes its communicator on `options.device`, all within `options.timeout`.
  /// `cuda` must outlive the communicator. Every rank of the group calls this at once.
  static StatusOr<std::unique_ptr<NcclCommunicator>> create(CudaDriver& cuda,
                                                            TcpStoreClient& store,
                                                            const NcclGroupOptions& options);
  /// Finalizes and destroys the communicator (bounded by the timeout; aborts when a healthy
  /// shutdown does not finish in time or the group is broken).
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return options_.rank; }
  int worldSize() const override { return options_.world_size; }
  /// In place on `n` f32 values in device memory.
  Status allReduceSum(float* data, int64_t n) override;
  /// `in`: n_per_rank f32 in device memory; `out`: world_size * n_per_rank, not overlapping.
  Status allGather(const float* in, int64_t n_per_rank, float* out) override;
  /// An all-reduce of one value: NCCL has no barrier of its own.
  Status barrier() override;
  /// Breaks the group with `error` and aborts the NCCL communicator (from any thread: a
  /// collective or waitStream() in flight on another thread fails at its next poll, within
  /// 0.1 ms, and that thread starts the abort; else the abort starts here). Returns at once.
  void abort(const Status& error) override;
  Status groupStatus() const override;

  /// out[i] = sum over ranks of in[i], i < n; `in == out` is in place. Device buffers.
  Status allReduceSum(CollectiveDtype dtype, const void* in, void* out, int64_t n);
  /// out = the ranks' `in` (n_per_rank elements each) concatenated in rank order.
  Status allGather(CollectiveDtype dtype, const void* in, int64_t n_per_rank, void* out);

  /// StreamCollectives: f32 on the caller's `stream` (on this rank's device), no host wait.
  Status enqueueAllReduceSum(CUdeviceptr data, int64_t n, CUstream stream) override;
  Status enqueueAllGather(CUdeviceptr in, int64_t n_per_rank, CUdeviceptr out,
                          CUstream stream) override;
  /// Polls `stream` (cuStreamQuery) and ncclCommGetAsyncError until the stream drains, the
  /// timeout passes or abort() comes from another thread; the last two break the group.
  Status waitStream(CUstream stream, const std::string& what) override;
  /// NCCL 2.26 or newer: its abort waits for the capturing graphs' destruction instead of
  /// freeing what they still point at (see the failure model above).
  bool capturable() const override { return nccl_->version() >= 22600; }

  /// The stream the collectives run on (for ordering the caller's work after them).
  CUstream stream() const { return stream_; }
  /// The NCCL library in use ("2.28.9" and its path), for logs.
  const NcclLibrary& library() const { return *nccl_; }

 private:
  NcclCommunicator(CudaDriver& cuda, std::shared_ptr<const NcclLibrary> nccl,
                   NcclGroupOptions options);
  Status init(TcpStoreClient& store);
  /// "all_reduce of 1024 bf16 on rank 1 of 2 (device 1)".
  std::string label(const std::string& op, int64_t n, CollectiveDtype dtype) const;
  /// Enqueues one collective with `enqueue` on the communicator's stream and waits for it.
  template <typename Enqueue>
  Status run(const std::string& what, Enqueue enqueue);
  /// Enqueues one collective with `enqueue` and returns once NCCL accepted it (a
  /// nonblocking communicator may answer ncclInProgress first: polled to the deadline).
  template <typename Enqueue>
  Status enqueueOnly(const std::string& what, Enqueue enqueue);
  /// Marks a call in flight (abort() from another thread then leaves comm_ to it), or
  /// returns the group's error. endCall() clears it and breaks the group on `result`'s or
  /// a concurrent abort()'s error.
  Status beginCall();
  Status endCall(Status result);
  /// Enqueue part of run(): the call, then the ncclInProgress wait.
  template <typename Enqueue>
  Status enqueueLocked(const std::string& what, Enqueue enqueue,
                       std::chrono::steady_clock::time_point deadline);
  /// Waits for `stream` to drain, watching the group's async error, until the deadline.
  Status drain(const std::string& what, CUstream stream,
               std::chrono::steady_clock::time_point deadline);
  /// Waits until `comm_`'s asynchronous state leaves ncclInProgress (init or a nonblocking
  /// enqueue), the deadline passes, or the group is aborted from another thread.
  /// Polls the async error until it leaves ncclInProgress or the deadline; `probe`, when
  /// given, is asked every kProbeEvery and its error ends the wait.
  Status waitAsync(const std::string& what, std::chrono::steady_clock::time_point deadline,
                   const std::function<Status()>& probe = nullptr);
  /// Records `error` as the group's error (first one wins) and aborts the communicator.
  Status breakGroup(Status error);
  void abortCommLocked();

  CudaDriver& cuda_;
  std::shared_ptr<const NcclLibrary> nccl_;
  NcclGroupOptions options_;
  CUdevice device_ = 0;
  bool contextRetained_ = false;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  CUdeviceptr scratch_ = 0;  // one float, for barrier()

  mutable std::mutex mu_;  // guards comm_ against abort() from another thread, and error_
  ncclComm_t comm_ = nullptr;
  Status error_;
  bool inFlight_ = false;  // a collective is polling comm_; abort() leaves comm_ to it
  std::atomic<bool> broken_{false};
  std::thread aborter_;  // runs the one ncclCommAbort (see abortCommLocked)
};

}  // namespace ingot
