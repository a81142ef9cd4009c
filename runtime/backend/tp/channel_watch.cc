// ChannelWatch: a thread that watches step channels while a rank is busy inside its own step.
#include "runtime/backend/tp/channel_watch.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace ingot {

ChannelWatch::ChannelWatch(std::vector<int> fds, short events,
                           std::function<bool(size_t, short)> ready)
    : fds_(std::move(fds)), events_(events), ready_(std::move(ready)) {
  // Without a wake-up pipe (out of descriptors) the watch does nothing: the caller's own
  // bounded waits still end the step, only later.
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    wake_[0] = wake_[1] = -1;
    return;
  }
  thread_ = std::thread([this] { run(); });
}

ChannelWatch::~ChannelWatch() {
  stop_.store(true);
  if (wake_[1] >= 0) {
    const char byte = 1;
    ssize_t ignored = ::write(wake_[1], &byte, 1);
    (void)ignored;
  }
  if (thread_.joinable()) thread_.join();
  if (wake_[0] >= 0) ::close(wake_[0]);
  if (wake_[1] >= 0) ::close(wake_[1]);
}

void ChannelWatch::run() {
  std::vector<bool> watching(fds_.size(), true);
  std::vector<pollfd> polled;
  std::vector<size_t> index;
  while (!stop_.load()) {
    polled.clear();
    index.clear();
    polled.push_back({wake_[0], POLLIN, 0});
    for (size_t i = 0; i < fds_.size(); ++i)
      if (watching[i] && fds_[i] >= 0) {
        polled.push_back({fds_[i], events_, 0});
        index.push_back(i);
      }
    const int n = ::poll(polled.data(), polled.size(), -1);
    if (n < 0 && errno != EINTR) return;
    if (stop_.load() || polled[0].revents) return;
    for (size_t k = 1; k < polled.size(); ++k) {
      const short got = polled[k].revents;
      if (!got) continue;
      // POLLNVAL: the descriptor was closed under the watch; nothing more to learn there.
      if ((got & POLLNVAL) || !ready_(index[k - 1], got)) watching[index[k - 1]] = false;
      if (stop_.load()) return;
    }
  }
}

}  // namespace ingot
