// Communicator: the collectives a tensor-parallel rank needs (sum, gather, barrier).
#pragma once

#include <cstdint>

#include "core/base/status.h"

namespace ingot {

/// One rank's handle on a tensor-parallel group of `worldSize()` ranks. Every rank calls
/// the same collectives in the same order with the same sizes (lock-step, as the ranks of
/// one serving step do); a call returns when the collective is complete on this rank.
///
/// Failure model: every call waits at most the group's timeout for the other ranks. A
/// rank that does not arrive in time, mismatched calls, or abort() break the group: every
/// rank waiting in that collective fails with the first error (which names the collective
/// and the rank(s) that did not arrive), and every later call on any rank fails at once
/// with that same error. A broken group never recovers; build a new one.
class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int worldSize() const = 0;

  /// data[i] = sum over ranks of data[i], i < n, in place. The sum is taken in rank order
  /// (((x0 + x1) + x2) + ...) on every rank, so every rank gets the same bits whatever
  /// the thread timing.
  virtual Status allReduceSum(float* data, int64_t n) = 0;
  /// out[r * n_per_rank + i] = rank r's in[i]: the ranks' inputs concatenated in rank
  /// order. `out` holds worldSize() * n_per_rank floats and must not overlap `in`.
  virtual Status allGather(const float* in, int64_t n_per_rank, float* out) = 0;
  /// Returns when every rank has called barrier().
  virtual Status barrier() = 0;
  /// Breaks the group with `error` (a rank that failed on its own and will not join the
  /// next collective): ranks waiting now, and every later call, fail at once with it.
  /// A no-op when the group is already broken (the first error stays).
  virtual void abort(const Status& error) = 0;
  /// The error that broke the group; ok while it is healthy.
  virtual Status groupStatus() const = 0;
};

}  // namespace ingot
