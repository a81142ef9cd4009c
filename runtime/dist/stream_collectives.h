// StreamCollectives: collectives enqueued on a CUDA stream among other work (capturable).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>

#include "core/base/status.h"

namespace ingot {

/// What a GPU rank needs to enqueue a whole step (kernels and collectives) on one stream and
/// wait once at its end, instead of a host round trip per collective: the collectives are
/// queued behind the work already on `stream`, and work queued after them runs after them.
/// The calls return once the collective is enqueued (never waiting for peers), so they may
/// be made while `stream` is being captured into a CUDA graph; every rank of the group must
/// then capture and replay the same sequence (NCCL: "whether an operation launch is
/// graph-captured is a collective property").
///
/// Failure model (Communicator's): the group's first error is kept; every later call fails
/// with it. waitStream() is the bounded wait that notices a dead or hung peer.
class StreamCollectives {
 public:
  virtual ~StreamCollectives() = default;
  /// data[i] = sum over ranks of data[i], i < n: f32, in place, device memory.
  virtual Status enqueueAllReduceSum(CUdeviceptr data, int64_t n, CUstream stream) = 0;
  /// out = the ranks' `in` (n_per_rank f32 each) concatenated in rank order; device memory,
  /// `out` holds world_size * n_per_rank and does not overlap `in`.
  virtual Status enqueueAllGather(CUdeviceptr in, int64_t n_per_rank, CUdeviceptr out,
                                  CUstream stream) = 0;
  /// Returns when everything enqueued on `stream` so far has finished, waiting at most the
  /// group's collective timeout while watching for asynchronous errors (a peer that died).
  /// On timeout or error the group is broken and aborted (ncclCommAbort: the collective
  /// kernels still waiting on peers exit, so the stream drains) and the error names `what`.
  /// The abort may finish only once the caller has destroyed the graphs that captured these
  /// collectives: drop them as soon as this (or any call) reports the group broken.
  virtual Status waitStream(CUstream stream, const std::string& what) = 0;
  /// Whether these collectives may be captured into CUDA graphs; when false the caller
  /// enqueues every step eagerly.
  virtual bool capturable() const = 0;
};

}  // namespace ingot
