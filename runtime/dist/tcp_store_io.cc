// Blocking-with-deadline socket reads and writes, and the store's little-endian framing.
#include "runtime/dist/tcp_store_io.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <string>

#include "runtime/dist/tcp_store.h"

namespace ingot::tcp_store_io {
namespace {

/// Waits until `fd` is ready for `events` or the deadline passes.
Status waitReady(int fd, short events, Clock::time_point deadline, const char* what,
                 size_t done, size_t size) {
  for (;;) {
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, pollTimeoutMs(deadline));
    if (r > 0) return okStatus();  // readable, writable, or an error the next call reports
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return ioError(std::string("poll failed: ") + std::strerror(errno));
    return ioError(std::string("timed out ") + what + " (" + std::to_string(done) + " of " +
                   std::to_string(size) + " bytes done)");
  }
}

}  // namespace

int pollTimeoutMs(Clock::time_point deadline) {
  if (deadline == Clock::time_point::max()) return -1;
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > INT_MAX ? INT_MAX : static_cast<int>(left);
}

Status readAll(int fd, void* data, size_t size, Clock::time_point deadline) {
  auto* bytes = static_cast<uint8_t*>(data);
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::recv(fd, bytes + done, size - done, 0);
    if (n > 0) { done += static_cast<size_t>(n); continue; }
    if (n == 0) {
      if (done == 0) return ioError("the peer closed the connection");
      return ioError("short read: the peer closed the connection after " + std::to_string(done) +
                     " of " + std::to_string(size) + " bytes");
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return ioError(std::string("read failed: ") + std::strerror(errno));
    INGOT_RETURN_IF_ERROR(waitReady(fd, POLLIN, deadline, "waiting for the reply", done, size));
  }
  return okStatus();
}

Status writeAll(int fd, const void* data, size_t size, Clock::time_point deadline) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::send(fd, bytes + done, size - done, MSG_NOSIGNAL);
    if (n > 0) { done += static_cast<size_t>(n); continue; }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      if (errno == EPIPE || errno == ECONNRESET) return ioError("the peer closed the connection");
      return ioError(std::string("write failed: ") + std::strerror(errno));
    }
    INGOT_RETURN_IF_ERROR(waitReady(fd, POLLOUT, deadline, "sending the request", done, size));
  }
  return okStatus();
}

Status readU32(int fd, uint32_t& value, Clock::time_point deadline) {
  uint8_t b[4];
  INGOT_RETURN_IF_ERROR(readAll(fd, b, sizeof(b), deadline));
  value = 0;
  for (int i = 3; i >= 0; --i) value = (value << 8) | b[i];
  return okStatus();
}

Status readU64(int fd, uint64_t& value, Clock::time_point deadline) {
  uint8_t b[8];
  INGOT_RETURN_IF_ERROR(readAll(fd, b, sizeof(b), deadline));
  value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | b[i];
  return okStatus();
}

void appendU32(std::vector<uint8_t>& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

void appendU64(std::vector<uint8_t>& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

Status readReply(int fd, uint8_t& code, std::vector<uint8_t>& payload,
                 Clock::time_point deadline) {
  INGOT_RETURN_IF_ERROR(readAll(fd, &code, 1, deadline));
  uint64_t size = 0;
  INGOT_RETURN_IF_ERROR(readU64(fd, size, deadline));
  if (size > kTcpStoreMaxValueBytes)
    return dataLoss("oversize value: the reply claims " + std::to_string(size) +
                    " bytes, above the limit of " + std::to_string(kTcpStoreMaxValueBytes));
  payload.resize(size);
  return readAll(fd, payload.data(), size, deadline);
}

}  // namespace ingot::tcp_store_io
