// ChannelWatch: a thread that watches step channels while a rank is busy inside its own step.
#pragma once

#include <poll.h>

#include <atomic>
#include <cstddef>
#include <functional>
#include <thread>
#include <vector>

namespace ingot {

/// Polls file descriptors on a thread of its own for as long as it lives, so that a rank
/// blocked in its step's collectives still learns at once that a peer answered with a
/// broken group or that a channel closed, and can abort its communicator (which ends the
/// blocked collective) instead of waiting for the collective timeout.
///
/// `ready(i, revents)` runs on the watch thread for each fds[i] that reports one of
/// `events` (or POLLHUP / POLLERR, always reported); it returns whether to keep watching
/// that descriptor (a level-triggered event not consumed must return false, or the watch
/// would spin). The destructor stops the thread promptly (a wake-up pipe, not a poll
/// interval) and joins it; `ready` never runs after the destructor returns.
class ChannelWatch {
 public:
  ChannelWatch(std::vector<int> fds, short events, std::function<bool(size_t, short)> ready);
  ~ChannelWatch();
  ChannelWatch(const ChannelWatch&) = delete;
  ChannelWatch& operator=(const ChannelWatch&) = delete;

  /// Whether the destructor has asked the thread to stop (for a `ready` that waits).
  bool stopping() const { return stop_.load(); }
  /// A descriptor that turns readable (and stays so) once the destructor asks the thread
  /// to stop. A `ready` that blocks on I/O must poll it too (StepChannel::
  /// receiveUnlessStopped) and return at once when it fires: the destructor joins the
  /// thread, so a `ready` still waiting on a stalled peer would hold its caller that long.
  int stopFd() const { return wake_[0]; }

 private:
  void run();

  std::vector<int> fds_;
  short events_;
  std::function<bool(size_t, short)> ready_;
  int wake_[2] = {-1, -1};  // pipe: the destructor writes a byte to end the poll at once
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace ingot
