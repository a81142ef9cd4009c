// ChannelWatch: a thread that watches step channels while a rank is busy inside its own step.
#pragma once

#include <poll.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ingot {

/// The thread behind ChannelWatch, kept for as long as its owner lives, so that a rank
/// that watches its channels during every step pays no thread start per step (about 40 µs
/// on a small VM; arming and ending a watch here costs a write and two lock round trips).
/// One ChannelWatch at a time may use it. Idle, it polls only its wake-up pipe.
class ChannelWatcher {
 public:
  ChannelWatcher();
  ~ChannelWatcher();
  ChannelWatcher(const ChannelWatcher&) = delete;
  ChannelWatcher& operator=(const ChannelWatcher&) = delete;

 private:
  friend class ChannelWatch;
  void arm(std::vector<int> fds, short events, std::function<bool(size_t, short)> ready);
  void disarm();
  void run();

  std::mutex mu_;
  std::condition_variable idle_;  // signalled when a `ready` call returns
  bool armed_ = false;
  bool running_ = false;  // the thread is inside `ready`
  bool quit_ = false;
  bool stop_written_ = false;
  uint64_t generation_ = 0;  // one per arm() and disarm(): a poll of an older one is stale
  std::vector<int> fds_;
  std::vector<bool> watching_;
  short events_ = 0;
  std::function<bool(size_t, short)> ready_;
  std::atomic<bool> stopping_{false};
  int wake_[2] = {-1, -1};  // pipe: arm() and the destructor wake the poll
  int stop_[2] = {-1, -1};  // pipe: readable while a watch ends with `ready` running
  std::thread thread_;
};

/// Polls file descriptors on a watcher thread for as long as it lives, so that a rank
/// blocked in its step's collectives still learns at once that a peer answered with a
/// broken group or that a channel closed, and can abort its communicator (which ends the
/// blocked collective) instead of waiting for the collective timeout.
///
/// `ready(i, revents)` runs on the watch thread for each fds[i] that reports one of
/// `events` (or POLLHUP / POLLERR, always reported); it returns whether to keep watching
/// that descriptor (a level-triggered event not consumed must return false, or the watch
/// would spin). The destructor ends the watch promptly (a pipe, not a poll interval) and
/// returns once no `ready` runs; `ready` never runs after the destructor returns.
class ChannelWatch {
 public:
  /// On a thread of its own, started here and joined by the destructor.
  ChannelWatch(std::vector<int> fds, short events, std::function<bool(size_t, short)> ready);
  /// On `watcher`'s thread, which must outlive this watch and serve no other at once.
  ChannelWatch(ChannelWatcher& watcher, std::vector<int> fds, short events,
               std::function<bool(size_t, short)> ready);
  ~ChannelWatch();
  ChannelWatch(const ChannelWatch&) = delete;
  ChannelWatch& operator=(const ChannelWatch&) = delete;

  /// Whether the destructor has asked the watch to stop (for a `ready` that waits).
  bool stopping() const { return watcher_->stopping_.load(); }
  /// A descriptor that turns readable (and stays so until the next watch) once the
  /// destructor asks the watch to stop. A `ready` that blocks on I/O must poll it too
  /// (StepChannel::receiveUnlessStopped) and return at once when it fires: the destructor
  /// waits for `ready`, so one still waiting on a stalled peer would hold its caller.
  int stopFd() const { return watcher_->stop_[0]; }

 private:
  std::unique_ptr<ChannelWatcher> own_;
  ChannelWatcher* watcher_;
};

}  // namespace ingot
