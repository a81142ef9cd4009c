// TcpProcessGroup: mesh join through the TcpStore, and collectives as polled socket exchanges.
#include "runtime/dist/tcp_process_group.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "runtime/base/duration_text.h"
#include "runtime/dist/tcp_socket.h"
#include "runtime/dist/tcp_store.h"

namespace ingot {
namespace {

using Clock = std::chrono::steady_clock;
using tcp_socket::connectWithRetry;
using tcp_socket::errnoText;
using tcp_socket::localAddressToward;
using tcp_socket::makeNonBlocking;
using tcp_socket::msLeft;
using tcp_socket::readFully;
using tcp_socket::writeFully;

/// First word of a join hello and of every message header: "IGTP" (also catches two hosts
/// of different byte order, whose structs would not agree).
constexpr uint32_t kWireMagic = 0x50544749u;
/// How often a waiting join looks at the probe (and a collective at the clock).
constexpr int kSliceMs = 20;
/// The longest error text an abort frame carries.
constexpr size_t kMaxErrorBytes = 4096;
/// How long notifying the peers of a broken group may take in all (best effort).
constexpr std::chrono::milliseconds kNotifyBudget{200};

struct JoinHello {
  uint32_t magic;
  int32_t rank;
  int32_t world_size;
  uint32_t reserved;
};

struct WireHeader {
  uint32_t magic;
  uint32_t kind;
  uint64_t seq;   // kAbort: the status code
  int64_t n;      // kAbort: the text's bytes
};
static_assert(sizeof(WireHeader) == 24, "the wire header is 24 bytes on every host");


}  // namespace

struct TcpProcessGroup::Peer {
  int fd = -1;
  std::string addr;  // "ip:port" it listens on
  int64_t pid = 0;
  std::string host;
  bool send_boundary = true;  // no message half sent
};

/// One message each way with every peer: a header, then the payload.
struct TcpProcessGroup::Exchange {
  struct Leg {
    WireHeader out_hdr{};
    const uint8_t* out = nullptr;
    size_t out_len = 0;
    size_t sent = 0;
    WireHeader in_hdr{};
    uint8_t* in = nullptr;
    size_t in_len = 0;
    size_t got = 0;
    bool sendDone() const { return sent == sizeof(WireHeader) + out_len; }
    bool recvDone() const { return got == sizeof(WireHeader) + in_len; }
  };
  std::vector<Leg> legs;  // by rank
};

TcpProcessGroup::TcpProcessGroup(int rank, int world_size, const TcpProcessGroupOptions& options)
    : rank_(rank), world_size_(world_size), options_(options) {
  peers_.resize(world_size);
}

TcpProcessGroup::~TcpProcessGroup() {
  for (auto& p : peers_)
    if (p && p->fd >= 0) ::close(p->fd);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

std::string TcpProcessGroup::nodeOf(int r) const {
  return options_.ranks_per_node > 0 ? "node " + std::to_string(r / options_.ranks_per_node) : "";
}

std::string TcpProcessGroup::describePeer(int r) const {
  std::string text = "rank " + std::to_string(r);
  std::string details = nodeOf(r);
  const Peer* p = r >= 0 && r < world_size_ ? peers_[r].get() : nullptr;
  if (p && p->pid > 0) {
    if (!details.empty()) details += ", ";
    details += "pid " + std::to_string(p->pid) + " on " + p->host + ", " + p->addr;
  }
  return details.empty() ? text : text + " (" + details + ")";
}

std::string TcpProcessGroup::label(Kind kind, uint64_t seq) const {
  switch (kind) {
    case Kind::kAllReduce: return "all_reduce #" + std::to_string(seq);
    case Kind::kAllGather: return "all_gather #" + std::to_string(seq);
    case Kind::kBarrier: return "barrier #" + std::to_string(seq);
    case Kind::kAbort: break;
  }
  return "collective #" + std::to_string(seq);
}

StatusOr<std::unique_ptr<TcpProcessGroup>> TcpProcessGroup::join(
    TcpStoreClient& store, int rank, int world_size, const TcpProcessGroupOptions& options) {
  if (world_size < 1)
    return invalidArgument("tcp process group: world size must be at least 1, got " +
                           std::to_string(world_size));
  if (rank < 0 || rank >= world_size)
    return invalidArgument("tcp process group: rank " + std::to_string(rank) +
                           " is outside a world of " + std::to_string(world_size));
  if (options.timeout.count() <= 0)
    return invalidArgument("tcp process group: the timeout must be positive, got " +
                           std::to_string(options.timeout.count()) + " ms");
  std::unique_ptr<TcpProcessGroup> g(new TcpProcessGroup(rank, world_size, options));
  g->wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (g->wake_fd_ < 0) return ioError("tcp process group: eventfd: " + errnoText(errno));
  INGOT_RETURN_IF_ERROR(g->connectMesh(store));
  return g;
}

Status TcpProcessGroup::connectMesh(TcpStoreClient& store) {
  const auto deadline = Clock::now() + options_.timeout;
  const std::string what = "join of a " + std::to_string(world_size_) +
                           "-rank TCP process group '" + options_.name + "' (rank " +
                           std::to_string(rank_) + ")";
  if (world_size_ == 1) return okStatus();
  std::string address = options_.listen_address;
  if (address.empty()) {
    const std::string& store_addr = store.address();
    StatusOr<std::string> local = localAddressToward(store_addr.substr(0, store_addr.rfind(':')));
    if (!local.ok()) return local.status().withPrefix(what);
    address = *local;
  }
  // Listen for the higher ranks (backlog: all of them, so their connects complete before
  // this rank gets to accept).
  sockaddr_in bind_to{};
  bind_to.sin_family = AF_INET;
  if (::inet_pton(AF_INET, address.c_str(), &bind_to.sin_addr) != 1)
    return invalidArgument(what + ": listen address '" + address + "' is not numeric IPv4");
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  socklen_t len = sizeof(bind_to);
  if (listener < 0 ||
      ::bind(listener, reinterpret_cast<sockaddr*>(&bind_to), sizeof(bind_to)) != 0 ||
      ::listen(listener, world_size_) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&bind_to), &len) != 0) {
    const std::string why = errnoText(errno);
    if (listener >= 0) ::close(listener);
    return ioError(what + ": listening on " + address + ": " + why);
  }
  struct ListenerCloser {
    int fd;
    ~ListenerCloser() { ::close(fd); }
  } closer{listener};
  const uint16_t port = ntohs(bind_to.sin_port);
  char hostname[256] = {};
  ::gethostname(hostname, sizeof(hostname) - 1);
  const std::string mine = address + " " + std::to_string(port) + " " +
                           std::to_string(::getpid()) + " " + hostname;
  const std::string prefix = options_.name + "/tcp/";
  INGOT_RETURN_IF_ERROR(store.set(prefix + std::to_string(rank_),
                                  std::vector<uint8_t>(mine.begin(), mine.end()), options_.timeout)
                            .withPrefix(what + ": publishing this rank's address"));

  INGOT_RETURN_IF_ERROR(connectLowerRanks(store, prefix, what, deadline));
  INGOT_RETURN_IF_ERROR(acceptHigherRanks(listener, what, deadline));
  for (int r = rank_ + 1; r < world_size_; ++r)
    INGOT_RETURN_IF_ERROR(readPeer(store, prefix, what, deadline, r));
  return okStatus();
}

Status TcpProcessGroup::readPeer(TcpStoreClient& store, const std::string& prefix,
                                 const std::string& what, Clock::time_point deadline, int r) {
  const auto left = std::max(std::chrono::milliseconds(1),
                             std::chrono::duration_cast<std::chrono::milliseconds>(
                                 deadline - Clock::now()));
  StatusOr<std::vector<uint8_t>> value = store.get(prefix + std::to_string(r), left);
  if (!value.ok())
    return failedPrecondition(what + ": " + describePeer(r) + " did not join within " +
                              durationText(options_.timeout) + " (" +
                              value.status().message() + ")");
  std::istringstream in(std::string(value->begin(), value->end()));
  auto peer = std::make_unique<Peer>();
  int peer_port = 0;
  in >> peer->addr >> peer_port >> peer->pid >> peer->host;
  if (!in || peer_port <= 0 || peer_port > 65535)
    return dataLoss(what + ": bad address record for rank " + std::to_string(r) +
                    " in the store");
  peer->addr += ":" + std::to_string(peer_port);
  const int fd = peers_[r] ? peers_[r]->fd : -1;
  peers_[r] = std::move(peer);
  peers_[r]->fd = fd;
  return okStatus();
}

Status TcpProcessGroup::connectLowerRanks(TcpStoreClient& store, const std::string& prefix,
                                          const std::string& what,
                                          Clock::time_point deadline) {
  // Connect to every lower rank; the first frame says who this is.
  for (int r = 0; r < rank_; ++r) {
    INGOT_RETURN_IF_ERROR(readPeer(store, prefix, what, deadline, r));
    const std::string& a = peers_[r]->addr;
    const size_t colon = a.rfind(':');
    const auto peer_port = static_cast<uint16_t>(std::stoi(a.substr(colon + 1)));
    StatusOr<int> fd = connectWithRetry(a.substr(0, colon), peer_port, deadline);
    if (!fd.ok()) return fd.status().withPrefix(what + ": " + describePeer(r));
    peers_[r]->fd = *fd;
    makeNonBlocking(*fd);
    const JoinHello hello{kWireMagic, rank_, world_size_, 0};
    Status sent = writeFully(*fd, &hello, sizeof(hello), deadline);
    if (!sent.ok()) return sent.withPrefix(what + ": hello to " + describePeer(r));
  }
  return okStatus();
}

Status TcpProcessGroup::acceptHigherRanks(int listener, const std::string& what,
                                          Clock::time_point deadline) {
  for (int accepted = 0; accepted < world_size_ - 1 - rank_;) {
    if (options_.join_probe) {
      Status probe = options_.join_probe();
      if (!probe.ok()) return probe;
    }
    pollfd pfd{listener, POLLIN, 0};
    if (::poll(&pfd, 1, msLeft(deadline, kSliceMs)) > 0) {
      const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) {
        makeNonBlocking(fd);
        JoinHello hello{};
        const auto hello_by = std::min(deadline, Clock::now() + std::chrono::seconds(5));
        Status got = readFully(fd, &hello, sizeof(hello), hello_by);
        if (!got.ok() || hello.magic != kWireMagic) {
          // Not a rank (a port scan, a stray HTTP request, a connection reset): drop it and
          // keep waiting; only a peer that speaks this protocol can fail the join.
          ::close(fd);
          continue;
        }
        // An ingot rank that does not fit this group: a misconfiguration, fail the join.
        const std::string refused = joinRefusal(hello.rank, hello.world_size);
        if (!refused.empty()) {
          ::close(fd);
          return invalidArgument(what + ": " + refused);
        }
        peers_[hello.rank] = std::make_unique<Peer>();
        peers_[hello.rank]->fd = fd;
        ++accepted;
        continue;
      }
    }
    if (Clock::now() >= deadline)
      return failedPrecondition(what + ": " + missingHigherRanks() +
                                " did not connect within " + durationText(options_.timeout));
  }
  return okStatus();
}

std::string TcpProcessGroup::joinRefusal(int32_t peer_rank, int32_t peer_world_size) const {
  std::string refused;
  if (peer_world_size != world_size_)
    refused = "a peer joined as rank " + std::to_string(peer_rank) + " of a group of " +
              std::to_string(peer_world_size) + ", but this group has " +
              std::to_string(world_size_) + " ranks";
  else if (peer_rank <= rank_ || peer_rank >= world_size_)
    refused = "a peer joined as rank " + std::to_string(peer_rank) + ", but only ranks " +
              std::to_string(rank_ + 1) + ".." + std::to_string(world_size_ - 1) +
              " connect to rank " + std::to_string(rank_);
  else if (peers_[peer_rank])
    refused = "two peers joined as rank " + std::to_string(peer_rank) + " (a duplicate rank)";
  return refused;
}

std::string TcpProcessGroup::missingHigherRanks() const {
  std::string missing;
  int count = 0;
  for (int r = rank_ + 1; r < world_size_; ++r)
    if (!peers_[r]) missing += (count++ ? ", " : "") + describePeer(r);
  return missing;
}

Status TcpProcessGroup::breakGroup(const Status& error) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_.ok()) error_ = error.ok() ? internalError("tensor-parallel group aborted") : error;
  return error_;
}

Status TcpProcessGroup::groupStatus() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void TcpProcessGroup::abort(const Status& error) {
  bool notify = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_.ok()) return;
    error_ = error.ok() ? internalError("tensor-parallel group aborted") : error;
    if (in_call_) {
      const uint64_t one = 1;
      ssize_t ignored = ::write(wake_fd_, &one, sizeof(one));
      (void)ignored;
    } else if (!notified_) {
      notified_ = notify = true;
    }
  }
  if (notify) notifyPeers();
}

void TcpProcessGroup::notifyPeers() {
  const Status error = groupStatus();
  const std::string text = error.message().substr(0, kMaxErrorBytes);
  WireHeader hdr{kWireMagic, static_cast<uint32_t>(Kind::kAbort),
                 static_cast<uint64_t>(error.code()), static_cast<int64_t>(text.size())};
  const auto deadline = Clock::now() + kNotifyBudget;
  for (auto& p : peers_) {
    if (!p || p->fd < 0) continue;
    if (p->send_boundary && writeFully(p->fd, &hdr, sizeof(hdr), deadline).ok())
      (void)writeFully(p->fd, text.data(), text.size(), deadline);
    // The peer reads what was sent, then end of stream.
    ::shutdown(p->fd, SHUT_WR);
  }
}

Status TcpProcessGroup::begin() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!error_.ok()) return error_;
  in_call_ = true;
  return okStatus();
}

void TcpProcessGroup::end() {
  bool notify = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_call_ = false;
    if (!error_.ok() && !notified_) notified_ = notify = true;
  }
  if (notify) notifyPeers();
}

Status TcpProcessGroup::run(Exchange& ex, Kind kind, uint64_t seq, int64_t n,
                            Clock::time_point deadline) {
  const std::string what = label(kind, seq);
  for (int r = 0; r < world_size_; ++r) {
    if (r == rank_) continue;
    ex.legs[r].out_hdr = WireHeader{kWireMagic, static_cast<uint32_t>(kind), seq, n};
  }
  std::vector<pollfd> fds;
  std::vector<int> ranks;
  for (;;) {
    fds.clear();
    ranks.clear();
    for (int r = 0; r < world_size_; ++r) {
      if (r == rank_) continue;
      const Exchange::Leg& leg = ex.legs[r];
      const short events =
          static_cast<short>((leg.sendDone() ? 0 : POLLOUT) | (leg.recvDone() ? 0 : POLLIN));
      if (events == 0) continue;
      fds.push_back({peers_[r]->fd, events, 0});
      ranks.push_back(r);
    }
    if (fds.empty()) return okStatus();
    fds.push_back({wake_fd_, POLLIN, 0});
    const int ready = ::poll(fds.data(), fds.size(), msLeft(deadline, kSliceMs));
    if (!groupStatus().ok()) return groupStatus();  // aborted from another thread
    if (ready < 0 && errno != EINTR)
      return breakGroup(ioError(what + ": poll: " + errnoText(errno)));
    for (size_t i = 0; i + 1 < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const int r = ranks[i];
      Exchange::Leg& leg = ex.legs[r];
      Peer& peer = *peers_[r];
      auto lost = [&](const std::string& how) {
        return breakGroup(failedPrecondition(what + ": " + describePeer(r) + " " + how));
      };
      // Receive: the header, checked as soon as it is complete, then the payload.
      while (!leg.recvDone()) {
        uint8_t* dst;
        size_t room;
        if (leg.got < sizeof(WireHeader)) {
          dst = reinterpret_cast<uint8_t*>(&leg.in_hdr) + leg.got;
          room = sizeof(WireHeader) - leg.got;
        } else {
          dst = leg.in + (leg.got - sizeof(WireHeader));
          room = leg.in_len - (leg.got - sizeof(WireHeader));
        }
        const ssize_t got = ::recv(peer.fd, dst, room, MSG_DONTWAIT);
        if (got == 0) return lost("closed its connection (its process exited or failed)");
        if (got < 0) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK) break;
          if (errno == ECONNRESET || errno == EPIPE)
            return lost("closed its connection (its process exited or failed: " +
                        errnoText(errno) + ")");
          return lost("failed: " + errnoText(errno));
        }
        const bool header_now = leg.got < sizeof(WireHeader) && leg.got + got >= sizeof(WireHeader);
        leg.got += static_cast<size_t>(got);
        if (!header_now) continue;
        const WireHeader& h = leg.in_hdr;
        if (h.magic != kWireMagic) return lost("sent a corrupt frame");
        if (h.kind == static_cast<uint32_t>(Kind::kAbort)) {
          // The peer's group broke: its error is ours.
          std::string text(static_cast<size_t>(std::clamp<int64_t>(h.n, 0, kMaxErrorBytes)), '\0');
          Status read = readFully(peer.fd, text.data(), text.size(), Clock::now() + kNotifyBudget);
          if (!read.ok()) return lost("broke the group (its error was cut off)");
          const bool known = h.seq > 0 && h.seq <= static_cast<uint64_t>(StatusCode::kInternal);
          return breakGroup(Status(known ? static_cast<StatusCode>(h.seq) : StatusCode::kInternal,
                                   text));
        }
        if (h.kind != static_cast<uint32_t>(kind) || h.seq != seq || h.n != n)
          return breakGroup(internalError(
              "tensor-parallel group: ranks disagree on the collective: rank " +
              std::to_string(r) + " called " + label(static_cast<Kind>(h.kind), h.seq) + " (" +
              std::to_string(h.n) + " floats), rank " + std::to_string(rank_) + " called " +
              what + " (" + std::to_string(n) + " floats)"));
      }
      // Send: the header, then the payload.
      while (!leg.sendDone()) {
        const uint8_t* src;
        size_t left;
        if (leg.sent < sizeof(WireHeader)) {
          src = reinterpret_cast<const uint8_t*>(&leg.out_hdr) + leg.sent;
          left = sizeof(WireHeader) - leg.sent;
        } else {
          src = leg.out + (leg.sent - sizeof(WireHeader));
          left = leg.out_len - (leg.sent - sizeof(WireHeader));
        }
        const ssize_t sent = ::send(peer.fd, src, left, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (sent < 0) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK) break;
          return lost("closed its connection (its process exited or failed: " +
                      errnoText(errno) + ")");
        }
        leg.sent += static_cast<size_t>(sent);
        // An abort frame may follow a whole message, or replace one not begun.
        peer.send_boundary = leg.sendDone();
      }
    }
    if (Clock::now() >= deadline) {
      std::string missing;
      int count = 0;
      for (int r = 0; r < world_size_; ++r)
        if (r != rank_ && !(ex.legs[r].recvDone() && ex.legs[r].sendDone()))
          missing += (count++ ? ", " : "") + describePeer(r);
      return breakGroup(failedPrecondition(what + ": " + missing + " did not arrive within " +
                                           durationText(options_.timeout)));
    }
  }
}

Status TcpProcessGroup::allReduceSum(float* data, int64_t n) {
  const uint64_t seq = seq_++;
  if (n < 0 || n > kMaxFloats || (n > 0 && !data))
    return invalidArgument(label(Kind::kAllReduce, seq) + ": bad buffer (" + std::to_string(n) +
                           " floats" + (n > 0 && !data ? ", null" : "") + ")");
  INGOT_RETURN_IF_ERROR(begin());
  const int N = world_size_;
  auto sliceBegin = [&](int r) { return n * r / N; };
  const int64_t mine_begin = sliceBegin(rank_), mine_len = sliceBegin(rank_ + 1) - mine_begin;
  const auto deadline = Clock::now() + options_.timeout;
  // Reduce-scatter: every rank's values of this rank's slice, into scratch (by rank).
  scratch_.resize(static_cast<size_t>(mine_len) * N);
  Exchange ex;
  ex.legs.resize(N);
  for (int r = 0; r < N; ++r) {
    if (r == rank_) continue;
    ex.legs[r].out = reinterpret_cast<const uint8_t*>(data + sliceBegin(r));
    ex.legs[r].out_len = static_cast<size_t>(sliceBegin(r + 1) - sliceBegin(r)) * sizeof(float);
    ex.legs[r].in = reinterpret_cast<uint8_t*>(scratch_.data() + mine_len * r);
    ex.legs[r].in_len = static_cast<size_t>(mine_len) * sizeof(float);
  }
  Status st = run(ex, Kind::kAllReduce, seq, n, deadline);
  if (st.ok()) {
    // The sum over the ranks in rank order, as SharedMemoryGroup takes it.
    float* own = data + mine_begin;
    auto values = [&](int r) { return r == rank_ ? own : scratch_.data() + mine_len * r; };
    float* sums = scratch_.data() + mine_len * rank_;  // this rank's row of scratch is free
    const float* first = values(0);
    if (sums != first) std::copy(first, first + mine_len, sums);
    for (int r = 1; r < N; ++r) {
      const float* x = values(r);
      for (int64_t i = 0; i < mine_len; ++i) sums[i] += x[i];
    }
    std::copy(sums, sums + mine_len, own);
    // All-gather of the summed slices.
    Exchange back;
    back.legs.resize(N);
    for (int r = 0; r < N; ++r) {
      if (r == rank_) continue;
      back.legs[r].out = reinterpret_cast<const uint8_t*>(own);
      back.legs[r].out_len = static_cast<size_t>(mine_len) * sizeof(float);
      back.legs[r].in = reinterpret_cast<uint8_t*>(data + sliceBegin(r));
      back.legs[r].in_len = static_cast<size_t>(sliceBegin(r + 1) - sliceBegin(r)) * sizeof(float);
    }
    st = run(back, Kind::kAllReduce, seq, n, deadline);
  }
  end();
  return st;
}

Status TcpProcessGroup::allGather(const float* in, int64_t n_per_rank, float* out) {
  const uint64_t seq = seq_++;
  const int64_t n = n_per_rank;
  if (n < 0 || n > kMaxFloats / world_size_ || (n > 0 && (!in || !out)))
    return invalidArgument(label(Kind::kAllGather, seq) + ": bad buffers (" + std::to_string(n) +
                           " floats per rank)");
  if (n > 0 && in < out + n * world_size_ && out < in + n)
    return invalidArgument(label(Kind::kAllGather, seq) + ": the output overlaps the input");
  INGOT_RETURN_IF_ERROR(begin());
  Exchange ex;
  ex.legs.resize(world_size_);
  for (int r = 0; r < world_size_; ++r) {
    if (r == rank_) continue;
    ex.legs[r].out = reinterpret_cast<const uint8_t*>(in);
    ex.legs[r].out_len = static_cast<size_t>(n) * sizeof(float);
    ex.legs[r].in = reinterpret_cast<uint8_t*>(out + n * r);
    ex.legs[r].in_len = static_cast<size_t>(n) * sizeof(float);
  }
  const Status st = run(ex, Kind::kAllGather, seq, n, Clock::now() + options_.timeout);
  if (st.ok() && n > 0) std::copy(in, in + n, out + n * rank_);
  end();
  return st;
}

Status TcpProcessGroup::barrier() {
  const uint64_t seq = seq_++;
  INGOT_RETURN_IF_ERROR(begin());
  Exchange ex;
  ex.legs.resize(world_size_);
  const Status st = run(ex, Kind::kBarrier, seq, 0, Clock::now() + options_.timeout);
  end();
  return st;
}

}  // namespace ingot
