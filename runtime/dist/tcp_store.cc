// TcpStore: a small key-value store served by rank 0 over TCP, for bootstrapping a group.
//
// Wire format (little-endian), one request and one reply at a time per connection:
//   request  u8 op | u32 key length | key | SET: u64 value length | value
//                                          | GET: u64 timeout in ms
//   reply    u8 code | u64 payload length | payload (GET ok: the value; error: a message)
#include "runtime/dist/tcp_store.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "runtime/dist/tcp_store_io.h"

namespace ingot {
namespace {

using namespace tcp_store_io;

enum Op : uint8_t { kOpSet = 1, kOpGet = 2 };
enum ReplyCode : uint8_t { kReplyOk = 0, kReplyTimedOut = 1, kReplyBadRequest = 2 };

/// How long past a get's own timeout the client waits for the server's answer before it
/// gives up on the connection: covers network latency, not the wait for the key.
constexpr std::chrono::milliseconds kReplyGrace(5000);
/// Backoff between connection attempts: doubles from the first value up to the cap.
constexpr std::chrono::milliseconds kFirstBackoff(10);
constexpr std::chrono::milliseconds kMaxBackoff(1000);

std::string errnoText(int err) { return std::strerror(err); }

/// The socket's local port.
uint16_t localPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return 0;
}

/// One non-blocking connect attempt to `ai`, waiting at most until `deadline`.
/// Returns the connected socket or -1 with `err` set.
int connectOnce(const addrinfo* ai, Clock::time_point deadline, int& err) {
  int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    ai->ai_protocol);
  if (fd < 0) { err = errno; return -1; }
  if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
    if (errno != EINPROGRESS) { err = errno; ::close(fd); return -1; }
    pollfd p{fd, POLLOUT, 0};
    int r = ::poll(&p, 1, pollTimeoutMs(deadline));
    if (r <= 0) { err = r == 0 ? ETIMEDOUT : errno; ::close(fd); return -1; }
    int soError = 0;
    socklen_t len = sizeof(soError);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &len);
    if (soError != 0) { err = soError; ::close(fd); return -1; }
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

/// Sends a reply frame; failures are ignored (the client may be gone; it reports).
void sendReply(int fd, uint8_t code, const void* payload, uint64_t size) {
  std::vector<uint8_t> header;
  header.push_back(code);
  appendU64(header, size);
  const auto never = Clock::time_point::max();
  if (writeAll(fd, header.data(), header.size(), never).ok() && size > 0)
    (void)writeAll(fd, payload, size, never);
}

void sendError(int fd, const std::string& message) {
  sendReply(fd, kReplyBadRequest, message.data(), message.size());
}

}  // namespace

// ----------------------------------------------------------------------------- server

StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::start(const std::string& bindAddress,
                                                                  uint16_t port) {
  std::string where = "tcp store server " + bindAddress + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* list = nullptr;
  std::string service = std::to_string(port);
  int gai = ::getaddrinfo(bindAddress.empty() ? nullptr : bindAddress.c_str(), service.c_str(),
                          &hints, &list);
  if (gai != 0)
    return invalidArgument(where + ": cannot resolve the address (" + ::gai_strerror(gai) + ")");
  int fd = -1;
  int err = 0;
  for (addrinfo* ai = list; ai && fd < 0; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) { err = errno; continue; }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
      err = errno;
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(list);
  if (fd < 0) return ioError(where + ": cannot listen (" + errnoText(err) + ")");

  std::unique_ptr<TcpStoreServer> server(new TcpStoreServer());
  server->listenFd_ = fd;
  server->port_ = localPort(fd);
  server->address_ = bindAddress + ":" + std::to_string(server->port_);
  server->wakeFd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (server->wakeFd_ < 0) return ioError(where + ": eventfd failed (" + errnoText(errno) + ")");
  server->acceptThread_ = std::thread([s = server.get()] { s->acceptLoop(); });
  return server;
}

TcpStoreServer::~TcpStoreServer() { stop(); }

void TcpStoreServer::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    // Wakes connection threads blocked in a read (they see end of stream) or in a get.
    for (auto& c : connections_) ::shutdown(c->fd, SHUT_RDWR);
  }
  keySet_.notify_all();
  if (wakeFd_ >= 0) {
    uint64_t one = 1;
    (void)!::write(wakeFd_, &one, sizeof(one));
  }
  if (acceptThread_.joinable()) acceptThread_.join();
  // The accept loop has exited, so connections_ no longer grows.
  for (auto& c : connections_) {
    if (c->thread.joinable()) c->thread.join();
    ::close(c->fd);
  }
  connections_.clear();
  if (listenFd_ >= 0) ::close(listenFd_);
  if (wakeFd_ >= 0) ::close(wakeFd_);
  listenFd_ = wakeFd_ = -1;
}

void TcpStoreServer::reapFinished() {
  std::lock_guard<std::mutex> lock(mu_);
  auto finished = [](const std::unique_ptr<Connection>& c) {
    if (!c->done.load()) return false;
    c->thread.join();
    ::close(c->fd);
    return true;
  };
  connections_.erase(std::remove_if(connections_.begin(), connections_.end(), finished),
                     connections_.end());
}

void TcpStoreServer::acceptLoop() {
  for (;;) {
    pollfd fds[2] = {{listenFd_, POLLIN, 0}, {wakeFd_, POLLIN, 0}};
    int r = ::poll(fds, 2, -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 || fds[1].revents) return;
    int fd = ::accept4(listenFd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors: back off instead of spinning on a listener that stays readable.
      if (errno == EMFILE || errno == ENFILE)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;  // otherwise the peer gave up before we accepted, or a transient error
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    reapFinished();
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) { ::close(fd); return; }
    auto connection = std::make_unique<Connection>();
    connection->fd = fd;
    Connection* c = connection.get();
    connection->thread = std::thread([this, c] {
      serve(c->fd);
      // The peer sees end of stream now; the fd is closed when the thread is reaped, so
      // stop() never shuts down a reused descriptor.
      ::shutdown(c->fd, SHUT_RDWR);
      c->done.store(true);
    });
    connections_.push_back(std::move(connection));
  }
}

void TcpStoreServer::serve(int fd) {
  const auto never = Clock::time_point::max();
  for (;;) {
    uint8_t op = 0;
    // A clean close between requests is the normal end of a connection.
    if (!readAll(fd, &op, 1, never).ok()) return;
    uint32_t keyLength = 0;
    if (!readU32(fd, keyLength, never).ok()) return;
    if (keyLength > kTcpStoreMaxKeyBytes) {
      return sendError(fd, "key of " + std::to_string(keyLength) + " bytes exceeds the limit of " +
                               std::to_string(kTcpStoreMaxKeyBytes));
    }
    std::string key(keyLength, '\0');
    if (!readAll(fd, key.data(), keyLength, never).ok()) return;

    if (op == kOpSet) {
      uint64_t size = 0;
      if (!readU64(fd, size, never).ok()) return;
      if (size > kTcpStoreMaxValueBytes) {
        return sendError(fd, "value of " + std::to_string(size) + " bytes for key '" + key +
                                 "' exceeds the limit of " +
                                 std::to_string(kTcpStoreMaxValueBytes));
      }
      std::vector<uint8_t> value(size);
      if (!readAll(fd, value.data(), size, never).ok()) return;
      {
        std::lock_guard<std::mutex> lock(mu_);
        values_[key] = std::move(value);
      }
      keySet_.notify_all();
      sendReply(fd, kReplyOk, nullptr, 0);
    } else if (op == kOpGet) {
      uint64_t timeoutMs = 0;
      if (!readU64(fd, timeoutMs, never).ok()) return;
      // Clamp so now() + timeout cannot overflow (a day is far beyond any bootstrap).
      auto wait = std::chrono::milliseconds(std::min<uint64_t>(timeoutMs, 86400000ull));
      std::unique_lock<std::mutex> lock(mu_);
      bool found = keySet_.wait_for(lock, wait, [&] { return stopping_ || values_.count(key); });
      if (stopping_) return;  // shutdown() already told the client
      if (!found) {
        lock.unlock();
        sendReply(fd, kReplyTimedOut, nullptr, 0);
        continue;
      }
      std::vector<uint8_t> value = values_[key];
      lock.unlock();
      sendReply(fd, kReplyOk, value.data(), value.size());
    } else {
      return sendError(fd, "unknown request op " + std::to_string(op));
    }
  }
}

// ----------------------------------------------------------------------------- client

StatusOr<std::unique_ptr<TcpStoreClient>> TcpStoreClient::connect(
    const std::string& host, uint16_t port, std::chrono::milliseconds timeout) {
  std::string address = host + ":" + std::to_string(port);
  if (host.empty()) return invalidArgument("tcp store: empty master address");
  if (port == 0) return invalidArgument("tcp store " + address + ": port 0 is not a server port");
  const auto deadline = Clock::now() + timeout;
  auto backoff = kFirstBackoff;
  std::string lastError;
  int attempts = 0;
  for (;;) {
    ++attempts;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* list = nullptr;
    std::string service = std::to_string(port);
    int gai = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &list);
    if (gai == 0) {
      for (addrinfo* ai = list; ai; ai = ai->ai_next) {
        int err = 0;
        int fd = connectOnce(ai, deadline, err);
        if (fd >= 0) {
          ::freeaddrinfo(list);
          return std::unique_ptr<TcpStoreClient>(new TcpStoreClient(fd, address));
        }
        lastError = errnoText(err);
      }
      ::freeaddrinfo(list);
    } else if (gai == EAI_NONAME || gai == EAI_FAIL) {
      // A name that does not resolve will not start resolving by waiting.
      return invalidArgument("tcp store " + address + ": cannot resolve host '" + host +
                             "' (" + ::gai_strerror(gai) + ")");
    } else {
      lastError = ::gai_strerror(gai);
    }
    auto now = Clock::now();
    if (now >= deadline) break;
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
  return ioError("tcp store " + address + ": could not connect within " +
                 std::to_string(timeout.count()) + " ms after " + std::to_string(attempts) +
                 " attempts (last error: " + lastError + ")");
}

TcpStoreClient::~TcpStoreClient() {
  if (fd_ >= 0) ::close(fd_);
}

Status TcpStoreClient::checkKey(const char* op, const std::string& key) const {
  std::string prefix = "tcp store " + address_ + ": " + op;
  if (key.empty()) return invalidArgument(prefix + " with an empty key");
  if (key.size() > kTcpStoreMaxKeyBytes)
    return invalidArgument(prefix + " '" + key.substr(0, 64) + "...': key of " +
                           std::to_string(key.size()) + " bytes exceeds the limit of " +
                           std::to_string(kTcpStoreMaxKeyBytes));
  if (fd_ < 0)
    return failedPrecondition(prefix + " '" + key +
                              "': the connection was closed after an earlier error");
  return okStatus();
}

Status TcpStoreClient::set(const std::string& key, const std::vector<uint8_t>& value,
                           std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  INGOT_RETURN_IF_ERROR(checkKey("set", key));
  std::string where = "tcp store " + address_ + ": set '" + key + "'";
  if (value.size() > kTcpStoreMaxValueBytes)
    return invalidArgument(where + ": value of " + std::to_string(value.size()) +
                           " bytes exceeds the limit of " + std::to_string(kTcpStoreMaxValueBytes));
  const auto deadline = Clock::now() + timeout;
  std::vector<uint8_t> frame;
  frame.reserve(1 + 4 + key.size() + 8 + value.size());
  frame.push_back(kOpSet);
  appendU32(frame, static_cast<uint32_t>(key.size()));
  frame.insert(frame.end(), key.begin(), key.end());
  appendU64(frame, value.size());
  frame.insert(frame.end(), value.begin(), value.end());
  Status s = writeAll(fd_, frame.data(), frame.size(), deadline);
  std::vector<uint8_t> payload;
  uint8_t code = 0;
  if (s.ok()) s = readReply(fd_, code, payload, deadline);
  if (s.ok() && code != kReplyOk)
    s = internalError("the server refused the request: " +
                      std::string(payload.begin(), payload.end()));
  if (!s.ok()) {
    // The stream may be mid-frame: no later request could be parsed, so drop it.
    ::close(fd_);
    fd_ = -1;
    return s.withPrefix(where);
  }
  return okStatus();
}

StatusOr<std::vector<uint8_t>> TcpStoreClient::get(const std::string& key,
                                                   std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  INGOT_RETURN_IF_ERROR(checkKey("get", key));
  std::string where = "tcp store " + address_ + ": get '" + key + "'";
  if (timeout.count() < 0) return invalidArgument(where + ": negative timeout");
  const auto start = Clock::now();
  std::vector<uint8_t> frame;
  frame.push_back(kOpGet);
  appendU32(frame, static_cast<uint32_t>(key.size()));
  frame.insert(frame.end(), key.begin(), key.end());
  appendU64(frame, static_cast<uint64_t>(timeout.count()));
  Status s = writeAll(fd_, frame.data(), frame.size(), start + timeout + kReplyGrace);
  std::vector<uint8_t> payload;
  uint8_t code = 0;
  if (s.ok()) s = readReply(fd_, code, payload, start + timeout + kReplyGrace);
  if (s.ok() && code == kReplyTimedOut)
    return notFound(where + ": the key was not set within " + std::to_string(timeout.count()) +
                    " ms");
  if (s.ok() && code != kReplyOk)
    s = internalError("the server refused the request: " +
                      std::string(payload.begin(), payload.end()));
  if (!s.ok()) {
    ::close(fd_);
    fd_ = -1;
    return s.withPrefix(where);
  }
  return payload;
}

// ----------------------------------------------------------------------------- joining

StatusOr<RankStore> joinTcpStore(int rank, const std::string& master_addr, uint16_t port,
                                 std::chrono::milliseconds timeout) {
  if (rank < 0) return invalidArgument("tcp store: negative rank " + std::to_string(rank));
  if (port == 0)
    return invalidArgument("tcp store: rank " + std::to_string(rank) +
                           " needs the master port (0 given)");
  RankStore store;
  if (rank == 0) {
    INGOT_ASSIGN_OR_RETURN(store.server, TcpStoreServer::start("0.0.0.0", port));
  }
  auto client = TcpStoreClient::connect(master_addr, port, timeout);
  if (!client.ok()) return client.status().withPrefix("rank " + std::to_string(rank));
  store.client = std::move(client).value();
  return store;
}

}  // namespace ingot
