// StepChannel: the step codec and framed, deadline-bounded socket I/O between rank 0 and a worker.
#include "runtime/backend/tp/step_channel.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "runtime/dist/tcp_socket.h"
#include "runtime/dist/tcp_store_io.h"
#include "schemas/region_bytecode.h"

namespace ingot {
namespace {

namespace io = tcp_store_io;
using Clock = StepChannel::Clock;

constexpr uint32_t kFrameMagic = 0x43534749;  // "IGSC"
/// Longest rank and operand rank the decoders accept (sanity bounds, not limits in use).
constexpr uint32_t kMaxOperandRank = 8;

void appendI32s(std::vector<uint8_t>& out, const std::vector<int32_t>& v) {
  io::appendU64(out, v.size());
  for (int32_t x : v) io::appendU32(out, static_cast<uint32_t>(x));
}

void appendBytes(std::vector<uint8_t>& out, const void* data, size_t n) {
  io::appendU64(out, n);
  const auto* b = static_cast<const uint8_t*>(data);
  out.insert(out.end(), b, b + n);
}

/// Bounds-checked little-endian reads over a payload; the first failure sticks.
class Reader {
 public:
  Reader(const std::vector<uint8_t>& p, const char* what) : p_(p), what_(what) {}
  bool take(uint64_t n, const char* field) {
    if (!status_.ok()) return false;
    if (p_.size() - pos_ < n) {
      status_ = dataLoss(std::string("step channel: truncated ") + what_ + " (field " + field +
                         ")");
      return false;
    }
    return true;
  }
  uint64_t u64(const char* field) {
    if (!take(8, field)) return 0;
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p_[pos_ + i];
    pos_ += 8;
    return v;
  }
  uint32_t u32(const char* field) {
    if (!take(4, field)) return 0;
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | p_[pos_ + i];
    pos_ += 4;
    return v;
  }
  uint8_t u8(const char* field) { return take(1, field) ? p_[pos_++] : 0; }
  void i32s(std::vector<int32_t>& v, const char* field) {
    const uint64_t n = u64(field);
    // n * 4 may overflow: compare the count with what is left instead.
    if (!take(n > (p_.size() - pos_) / 4 ? p_.size() - pos_ + 1 : n * 4, field)) return;
    v.resize(n);
    for (uint64_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(u32(field));
  }
  void bytes(std::vector<uint8_t>& v, const char* field) {
    const uint64_t n = u64(field);
    if (!take(n, field)) return;
    v.assign(p_.begin() + pos_, p_.begin() + pos_ + n);
    pos_ += n;
  }
  Status finish() {
    if (status_.ok() && pos_ != p_.size())
      status_ = dataLoss(std::string("step channel: ") + std::to_string(p_.size() - pos_) +
                         " stray bytes after the " + what_);
    return status_;
  }
  Status status() const { return status_; }
  /// The bytes not read yet.
  std::vector<uint8_t> rest() const { return std::vector<uint8_t>(p_.begin() + pos_, p_.end()); }

 private:
  const std::vector<uint8_t>& p_;
  const char* what_;
  size_t pos_ = 0;
  Status status_;
};

Status setNonBlocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
    return ioError(std::string("step channel: fcntl: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return okStatus();
}

StatusOr<sockaddr_in> ipv4(const std::string& host, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1)
    return invalidArgument("step channel: '" + host + "' is not a numeric IPv4 address");
  return a;
}

}  // namespace

std::vector<uint8_t> encodeStep(const StepInputs& in) {
  std::vector<uint8_t> out;
  out.reserve(64 + 4 * (in.tokens.size() * 4 + in.block_tables.size()));
  io::appendU32(out, static_cast<uint32_t>(in.num_requests));
  io::appendU32(out, static_cast<uint32_t>(in.max_blocks_per_request));
  appendI32s(out, in.tokens);
  appendI32s(out, in.positions);
  appendI32s(out, in.block_tables);
  appendI32s(out, in.seq_lens);
  appendI32s(out, in.query_start);
  appendI32s(out, in.slot_mapping);
  appendI32s(out, in.logit_rows);
  io::appendU32(out, static_cast<uint32_t>(in.extra_inputs.size()));
  for (const RegionOperandView& v : in.extra_inputs) {
    out.push_back(static_cast<uint8_t>(v.element_type));
    out.push_back(v.data ? 1 : 0);
    io::appendU32(out, v.rank);
    size_t elements = 1;
    for (uint32_t d = 0; d < v.rank; ++d) {
      io::appendU64(out, static_cast<uint64_t>(v.shape[d]));
      elements *= static_cast<size_t>(std::max<int64_t>(v.shape[d], 0));
    }
    const size_t bytes =
        v.data ? elements * operandElementSize(v.element_type) : 0;
    appendBytes(out, v.data, bytes);
  }
  return out;
}

Status decodeStep(const std::vector<uint8_t>& payload, ReceivedStep* out) {
  Reader r(payload, "step");
  StepInputs& in = out->inputs;
  in = StepInputs();
  in.num_requests = static_cast<int32_t>(r.u32("num_requests"));
  in.max_blocks_per_request = static_cast<int32_t>(r.u32("max_blocks_per_request"));
  r.i32s(in.tokens, "tokens");
  r.i32s(in.positions, "positions");
  r.i32s(in.block_tables, "block_tables");
  r.i32s(in.seq_lens, "seq_lens");
  r.i32s(in.query_start, "query_start");
  r.i32s(in.slot_mapping, "slot_mapping");
  r.i32s(in.logit_rows, "logit_rows");
  const uint32_t extras = r.u32("extra input count");
  if (extras > 64) return dataLoss("step channel: " + std::to_string(extras) + " extra inputs");
  out->shapes.assign(extras, {});
  out->data.assign(extras, {});
  in.extra_inputs.assign(extras, RegionOperandView());
  for (uint32_t i = 0; i < extras && r.status().ok(); ++i) {
    RegionOperandView& v = in.extra_inputs[i];
    v.element_type = static_cast<RegionType>(r.u8("extra element type"));
    const bool has_data = r.u8("extra has data") != 0;
    v.rank = r.u32("extra rank");
    if (v.rank > kMaxOperandRank)
      return dataLoss("step channel: extra input " + std::to_string(i) + " has rank " +
                      std::to_string(v.rank));
    uint64_t elements = 1;
    for (uint32_t d = 0; d < v.rank; ++d) {
      const int64_t extent = static_cast<int64_t>(r.u64("extra shape"));
      if (extent < 0 || (extent > 0 && elements > kStepChannelMaxFrameBytes / extent))
        return dataLoss("step channel: extra input " + std::to_string(i) + " has a bad extent");
      elements *= static_cast<uint64_t>(extent);
      out->shapes[i].push_back(extent);
    }
    r.bytes(out->data[i], "extra data");
    const uint64_t want =
        has_data ? elements * operandElementSize(v.element_type) : 0;
    if (r.status().ok() && out->data[i].size() != want)
      return dataLoss("step channel: extra input " + std::to_string(i) + " carries " +
                      std::to_string(out->data[i].size()) + " bytes for a shape of " +
                      std::to_string(want));
    v.shape = out->shapes[i].data();
    v.data = has_data ? out->data[i].data() : nullptr;
  }
  return r.finish();
}

std::vector<uint8_t> encodeStatus(const Status& status) {
  std::vector<uint8_t> out;
  io::appendU32(out, static_cast<uint32_t>(status.code()));
  appendBytes(out, status.message().data(), status.message().size());
  return out;
}

Status decodeStatus(const std::vector<uint8_t>& payload, Status* out) {
  Reader r(payload, "result");
  const uint32_t code = r.u32("code");
  std::vector<uint8_t> text;
  r.bytes(text, "message");
  INGOT_RETURN_IF_ERROR(r.finish());
  if (code > static_cast<uint32_t>(StatusCode::kInternal))
    return dataLoss("step channel: unknown status code " + std::to_string(code));
  *out = code == 0 ? okStatus()
                   : Status(static_cast<StatusCode>(code), std::string(text.begin(), text.end()));
  return okStatus();
}

std::vector<uint8_t> encodeHello(const WorkerHello& hello) {
  std::vector<uint8_t> out;
  io::appendU32(out, static_cast<uint32_t>(hello.rank));
  io::appendU64(out, static_cast<uint64_t>(hello.num_kv_blocks));
  io::appendU64(out, static_cast<uint64_t>(hello.vocab_size));
  io::appendU64(out, hello.matrix_bytes);
  io::appendU32(out, static_cast<uint32_t>(hello.num_threads));
  io::appendU64(out, hello.artifact_id);
  const std::vector<uint8_t> s = encodeStatus(hello.status);
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

Status decodeHello(const std::vector<uint8_t>& payload, WorkerHello* hello) {
  Reader r(payload, "hello");
  hello->rank = static_cast<int32_t>(r.u32("rank"));
  hello->num_kv_blocks = static_cast<int64_t>(r.u64("num_kv_blocks"));
  hello->vocab_size = static_cast<int64_t>(r.u64("vocab_size"));
  hello->matrix_bytes = r.u64("matrix_bytes");
  hello->num_threads = static_cast<int32_t>(r.u32("num_threads"));
  hello->artifact_id = r.u64("artifact_id");
  INGOT_RETURN_IF_ERROR(r.status());
  return decodeStatus(r.rest(), &hello->status);
}

std::vector<uint8_t> encodeKvBlockCopy(int64_t src, int64_t dst) {
  std::vector<uint8_t> out;
  io::appendU64(out, static_cast<uint64_t>(src));
  io::appendU64(out, static_cast<uint64_t>(dst));
  return out;
}

Status decodeKvBlockCopy(const std::vector<uint8_t>& payload, int64_t* src, int64_t* dst) {
  Reader r(payload, "KV block copy");
  *src = static_cast<int64_t>(r.u64("src"));
  *dst = static_cast<int64_t>(r.u64("dst"));
  return r.finish();
}

std::vector<uint8_t> encodeKvSlotMoves(const std::vector<std::pair<int32_t, int32_t>>& moves) {
  std::vector<int32_t> flat;
  for (const auto& [from, to] : moves) {
    flat.push_back(from);
    flat.push_back(to);
  }
  std::vector<uint8_t> out;
  appendI32s(out, flat);
  return out;
}

Status decodeKvSlotMoves(const std::vector<uint8_t>& payload,
                         std::vector<std::pair<int32_t, int32_t>>* moves) {
  Reader r(payload, "KV slot moves");
  std::vector<int32_t> flat;
  r.i32s(flat, "moves");
  INGOT_RETURN_IF_ERROR(r.finish());
  if (flat.size() % 2) return dataLoss("step channel: an odd number of KV slot move entries");
  moves->clear();
  for (size_t i = 0; i < flat.size(); i += 2) moves->emplace_back(flat[i], flat[i + 1]);
  return okStatus();
}

StepChannel::StepChannel(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}

StepChannel::~StepChannel() { close(); }

void StepChannel::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Status StepChannel::send(StepCommand command, const std::vector<uint8_t>& payload,
                         Clock::time_point deadline) {
  if (fd_ < 0) return ioError("step channel to " + peer_ + " is closed");
  std::vector<uint8_t> frame;
  frame.reserve(16 + payload.size());
  io::appendU32(frame, kFrameMagic);
  io::appendU32(frame, static_cast<uint32_t>(command));
  io::appendU64(frame, payload.size());
  frame.insert(frame.end(), payload.begin(), payload.end());
  Status s = io::writeAll(fd_, frame.data(), frame.size(), deadline);
  return s.ok() ? s : s.withPrefix("step channel to " + peer_);
}

Status StepChannel::receive(StepCommand* command, std::vector<uint8_t>* payload,
                            Clock::time_point deadline) {
  bool stopped = false;
  return receiveUnlessStopped(command, payload, deadline, -1, &stopped);
}

Status StepChannel::fill(uint8_t* buf, size_t want, size_t* got, Clock::time_point deadline,
                         int stop_fd, bool* stopped) {
  while (*got < want) {
    const ssize_t n = ::recv(fd_, buf + *got, want - *got, MSG_DONTWAIT);
    if (n > 0) {
      *got += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      const size_t done = header_got_ + body_got_;
      if (done == 0) return ioError("the peer closed the connection");
      return ioError("short read: the peer closed the connection after " + std::to_string(done) +
                     " bytes of a frame");
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return ioError(std::string("read failed: ") + std::strerror(errno));
    // Nothing to read now: wait for the socket, the stop pipe or the deadline.
    pollfd p[2] = {{fd_, POLLIN, 0}, {stop_fd, POLLIN, 0}};
    const int ready = ::poll(p, stop_fd >= 0 ? 2 : 1, io::pollTimeoutMs(deadline));
    if (ready < 0 && errno != EINTR)
      return ioError(std::string("poll failed: ") + std::strerror(errno));
    if (stop_fd >= 0 && p[1].revents) {
      *stopped = true;
      return okStatus();
    }
    if (ready == 0)
      return ioError("timed out waiting for a frame (" +
                     std::to_string(header_got_ + body_got_) + " bytes of it arrived)");
  }
  return okStatus();
}

Status StepChannel::receiveUnlessStopped(StepCommand* command, std::vector<uint8_t>* payload,
                                         Clock::time_point deadline, int stop_fd,
                                         bool* stopped) {
  *stopped = false;
  if (fd_ < 0) return ioError("step channel from " + peer_ + " is closed");
  auto littleEndian = [](const uint8_t* b, int bytes) {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | b[i];
    return v;
  };
  Status s = fill(header_, sizeof(header_), &header_got_, deadline, stop_fd, stopped);
  if (s.ok() && !*stopped) {
    // A complete header: check it before trusting its length (resize keeps bytes already
    // read when this call continues a frame).
    const uint64_t size = littleEndian(header_ + 8, 8);
    if (static_cast<uint32_t>(littleEndian(header_, 4)) != kFrameMagic)
      s = dataLoss("bad frame magic (not an ingot step channel)");
    else if (size > kStepChannelMaxFrameBytes)
      s = dataLoss("oversize frame of " + std::to_string(size) + " bytes");
    else
      body_.resize(size);
  }
  if (s.ok() && !*stopped) s = fill(body_.data(), body_.size(), &body_got_, deadline, stop_fd, stopped);
  if (!s.ok()) return s.withPrefix("step channel from " + peer_);
  if (*stopped) return okStatus();
  // A whole frame: hand it out and start the next one afresh.
  const auto cmd = static_cast<uint32_t>(littleEndian(header_ + 4, 4));
  header_got_ = 0;
  body_got_ = 0;
  payload->swap(body_);
  body_.clear();
  if (cmd < static_cast<uint32_t>(StepCommand::kHello) ||
      cmd > static_cast<uint32_t>(StepCommand::kGroupBroken))
    return dataLoss("step channel from " + peer_ + ": unknown command " + std::to_string(cmd));
  *command = static_cast<StepCommand>(cmd);
  return okStatus();
}

StatusOr<std::unique_ptr<StepChannelListener>> StepChannelListener::listen(const std::string& host) {
  INGOT_ASSIGN_OR_RETURN(sockaddr_in addr, ipv4(host, 0));
  std::unique_ptr<StepChannelListener> l(new StepChannelListener());
  l->host_ = host;
  l->fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (l->fd_ < 0) return ioError(std::string("step channel: socket: ") + std::strerror(errno));
  socklen_t len = sizeof(addr);
  if (::bind(l->fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(l->fd_, 64) != 0 ||
      ::getsockname(l->fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return ioError("step channel: listening on " + host + ": " + std::strerror(errno));
  l->port_ = ntohs(addr.sin_port);
  return l;
}

StepChannelListener::~StepChannelListener() {
  if (fd_ >= 0) ::close(fd_);
}

StatusOr<std::unique_ptr<StepChannel>> StepChannelListener::accept(Clock::time_point deadline) {
  for (;;) {
    const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      INGOT_RETURN_IF_ERROR(setNonBlocking(fd));
      return std::make_unique<StepChannel>(fd, "a worker rank");
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return ioError("step channel: accept on " + host_ + ":" + std::to_string(port_) + ": " +
                     std::strerror(errno));
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, io::pollTimeoutMs(deadline)) == 0)
      return ioError("step channel: no worker connected to " + host_ + ":" +
                     std::to_string(port_) + " in time");
  }
}

StatusOr<std::unique_ptr<StepChannel>> connectStepChannel(const std::string& host, uint16_t port,
                                                          Clock::time_point deadline) {
  INGOT_RETURN_IF_ERROR(ipv4(host, port).status());
  const std::string peer = "rank 0 at " + host + ":" + std::to_string(port);
  // Each attempt's connect is bounded by the deadline too (a vanished host would otherwise
  // hold a blocking connect for the kernel's SYN retries, about two minutes).
  StatusOr<int> fd = tcp_socket::connectWithRetry(host, port, deadline);
  if (!fd.ok()) return fd.status().withPrefix("step channel: rank 0");
  const Status nonblocking = setNonBlocking(*fd);
  if (!nonblocking.ok()) {
    ::close(*fd);
    return nonblocking;
  }
  return std::make_unique<StepChannel>(*fd, peer);
}

}  // namespace ingot
