// Non-blocking TCP socket helpers: deadline-bounded reads and writes, connects with retry.
#include "runtime/dist/tcp_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace ingot::tcp_socket {
namespace {

/// Longest single poll() while waiting for a deadline.
constexpr int kPollSliceMs = 20;

}  // namespace

std::string errnoText(int e) { return std::strerror(e); }

int msLeft(Clock::time_point deadline, int cap) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(cap, left)));
}

/// Writes all of `data` to the non-blocking socket `fd` before `deadline`.
Status writeFully(int fd, const void* data, size_t size, Clock::time_point deadline) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return ioError(errnoText(errno));
    if (Clock::now() >= deadline) return failedPrecondition("timed out");
    pollfd pfd{fd, POLLOUT, 0};
    ::poll(&pfd, 1, msLeft(deadline, kPollSliceMs));
  }
  return okStatus();
}

/// Reads exactly `size` bytes from the non-blocking socket `fd` before `deadline`.
Status readFully(int fd, void* data, size_t size, Clock::time_point deadline) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = ::recv(fd, p, size, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return ioError("the connection closed");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return ioError(errnoText(errno));
    if (Clock::now() >= deadline) return failedPrecondition("timed out");
    pollfd pfd{fd, POLLIN, 0};
    ::poll(&pfd, 1, msLeft(deadline, kPollSliceMs));
  }
  return okStatus();
}

void makeNonBlocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/// The IPv4 address this host uses to reach `host` (a connected UDP socket sends nothing).
StatusOr<std::string> localAddressToward(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), "9", &hints, &found); rc != 0)
    return invalidArgument("cannot resolve the store's host '" + host + "': " + gai_strerror(rc));
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  const bool ok = fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
  const int err = errno;
  ::freeaddrinfo(found);
  if (fd >= 0) ::close(fd);
  if (!ok) return ioError("no route to the store's host '" + host + "': " + errnoText(err));
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text));
  return std::string(text);
}

/// One non-blocking connect to `addr`:`port`, retried with backoff until `deadline`.
StatusOr<int> connectWithRetry(const std::string& addr, uint16_t port, Clock::time_point deadline) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  if (::inet_pton(AF_INET, addr.c_str(), &to.sin_addr) != 1)
    return invalidArgument("bad peer address '" + addr + "'");
  auto backoff = std::chrono::milliseconds(10);
  std::string last = "timed out";
  for (;;) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return ioError("socket: " + errnoText(errno));
    int err = 0;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        pollfd pfd{fd, POLLOUT, 0};
        err = ::poll(&pfd, 1, msLeft(deadline, 1 << 30)) > 0 ? 0 : ETIMEDOUT;
        socklen_t len = sizeof(err);
        if (err == 0) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      }
    }
    if (err == 0) return fd;
    ::close(fd);
    last = errnoText(err);
    if (Clock::now() + backoff >= deadline)
      return ioError("connecting to " + addr + ":" + std::to_string(port) + ": " + last);
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
}

KeepAliveTimes keepAliveWithin(std::chrono::milliseconds timeout) {
  const int64_t ms = std::max<int64_t>(0, timeout.count());
  KeepAliveTimes t;
  t.count = 3;
  // Linux refuses TCP_KEEPIDLE and TCP_KEEPINTVL above 32767 s.
  t.idle_s = static_cast<int>(std::clamp<int64_t>((ms / 2 + 500) / 1000, 1, 32767));
  t.interval_s = static_cast<int>(std::clamp<int64_t>((ms / 6 + 500) / 1000, 1, 32767));
  return t;
}

Status enableKeepAlive(int fd, int idle_s, int interval_s, int count) {
  const int one = 1;
  const struct {
    int level, name, value;
    const char* what;
  } options[] = {{SOL_SOCKET, SO_KEEPALIVE, one, "SO_KEEPALIVE"},
                 {IPPROTO_TCP, TCP_KEEPIDLE, idle_s, "TCP_KEEPIDLE"},
                 {IPPROTO_TCP, TCP_KEEPINTVL, interval_s, "TCP_KEEPINTVL"},
                 {IPPROTO_TCP, TCP_KEEPCNT, count, "TCP_KEEPCNT"}};
  for (const auto& o : options)
    if (::setsockopt(fd, o.level, o.name, &o.value, sizeof(o.value)) != 0)
      return ioError(std::string("setsockopt(") + o.what + "): " + errnoText(errno));
  return okStatus();
}

}  // namespace ingot::tcp_socket
