// ChannelWatch: a thread that watches step channels while a rank is busy inside its own step.
#include "runtime/backend/tp/channel_watch.h"

#include <fcntl.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <chrono>

namespace ingot {
namespace {

void writeByte(int fd) {
  if (fd < 0) return;
  const char byte = 1;
  ssize_t ignored = ::write(fd, &byte, 1);
  (void)ignored;
}

void drain(int fd) {
  char buffer[64];
  while (fd >= 0 && ::read(fd, buffer, sizeof(buffer)) > 0) {
  }
}

}  // namespace

ChannelWatcher::ChannelWatcher() {
  // Without its pipes (out of descriptors) the watcher does nothing: the caller's own
  // bounded waits still end the step, only later.
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    wake_[0] = wake_[1] = -1;
    return;
  }
  if (::pipe2(stop_, O_CLOEXEC | O_NONBLOCK) != 0) {
    stop_[0] = stop_[1] = -1;
    return;
  }
  thread_ = std::thread([this] { run(); });
}

ChannelWatcher::~ChannelWatcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
    stopping_.store(true);
  }
  writeByte(wake_[1]);
  writeByte(stop_[1]);
  if (thread_.joinable()) thread_.join();
  for (int fd : {wake_[0], wake_[1], stop_[0], stop_[1]})
    if (fd >= 0) ::close(fd);
}

void ChannelWatcher::arm(std::vector<int> fds, short events,
                         std::function<bool(size_t, short)> ready) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    assert(!armed_ && "one ChannelWatch at a time per ChannelWatcher");
    if (stop_written_) drain(stop_[0]);  // no `ready` runs: the last disarm waited for it
    stop_written_ = false;
    stopping_.store(false);
    fds_ = std::move(fds);
    watching_.assign(fds_.size(), true);
    events_ = events;
    ready_ = std::move(ready);
    armed_ = true;
    ++generation_;
  }
  writeByte(wake_[1]);  // the thread polls the new descriptors from now on
}

void ChannelWatcher::disarm() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    stopping_.store(true);
    if (running_) {
      // A `ready` that waits on a peer polls stopFd(): let it return, and wait for it.
      writeByte(stop_[1]);
      stop_written_ = true;
      idle_.wait(lock, [&] { return !running_; });
    }
    armed_ = false;
    ++generation_;
    ready_ = nullptr;
  }
  // The thread leaves its poll of this watch's descriptors: a blocked poll holds each
  // file, so a socket closed between watches would otherwise stay open underneath.
  writeByte(wake_[1]);
}

void ChannelWatcher::run() {
  std::vector<pollfd> polled;
  std::vector<size_t> index;
  std::vector<size_t> done;
  for (;;) {
    uint64_t generation = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (quit_) return;
      generation = generation_;
      polled.assign(1, {wake_[0], POLLIN, 0});
      index.clear();
      if (armed_ && !stopping_.load())  // ending: nothing more for this watch
        for (size_t i = 0; i < fds_.size(); ++i)
          if (watching_[i] && fds_[i] >= 0) {
            polled.push_back({fds_[i], events_, 0});
            index.push_back(i);
          }
    }
    const int n = ::poll(polled.data(), polled.size(), -1);
    if (n < 0) {
      // EINTR: again. ENOMEM (transient): again shortly. Anything else is a bug here; the
      // watcher stops watching (callers' own bounded waits still end their calls).
      if (errno == EINTR) continue;
      if (errno != ENOMEM) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    if (polled[0].revents) drain(wake_[0]);
    std::unique_lock<std::mutex> lock(mu_);
    if (quit_) return;
    // Disarmed, or armed anew, since the poll began: its events are not this watch's.
    if (!armed_ || generation != generation_ || stopping_.load()) continue;
    running_ = true;
    lock.unlock();
    done.clear();
    for (size_t k = 1; k < polled.size(); ++k) {
      const short got = polled[k].revents;
      if (!got) continue;
      // POLLNVAL: the descriptor was closed under the watch; nothing more to learn there.
      if ((got & POLLNVAL) || !ready_(index[k - 1], got)) done.push_back(index[k - 1]);
      if (stopping_.load()) break;
    }
    lock.lock();
    for (size_t i : done) watching_[i] = false;
    running_ = false;
    idle_.notify_all();
  }
}

ChannelWatch::ChannelWatch(std::vector<int> fds, short events,
                           std::function<bool(size_t, short)> ready)
    : own_(std::make_unique<ChannelWatcher>()), watcher_(own_.get()) {
  watcher_->arm(std::move(fds), events, std::move(ready));
}

ChannelWatch::ChannelWatch(ChannelWatcher& watcher, std::vector<int> fds, short events,
                           std::function<bool(size_t, short)> ready)
    : watcher_(&watcher) {
  watcher_->arm(std::move(fds), events, std::move(ready));
}

ChannelWatch::~ChannelWatch() { watcher_->disarm(); }

}  // namespace ingot
