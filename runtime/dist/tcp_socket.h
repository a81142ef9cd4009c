// Non-blocking TCP socket helpers with deadlines, for the TCP process group.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/base/status.h"

namespace ingot::tcp_socket {

using Clock = std::chrono::steady_clock;

/// strerror(e).
std::string errnoText(int e);
/// Milliseconds until `deadline` for poll(), at most `cap`, never negative.
int msLeft(Clock::time_point deadline, int cap);
/// Writes all of `data` to the non-blocking socket `fd` before `deadline` (no SIGPIPE).
Status writeFully(int fd, const void* data, size_t size, Clock::time_point deadline);
/// Reads exactly `size` bytes from the non-blocking socket `fd` before `deadline`; a peer
/// that closes first is an error saying so.
Status readFully(int fd, void* data, size_t size, Clock::time_point deadline);
/// O_NONBLOCK and TCP_NODELAY (collectives are small, latency-bound messages).
void makeNonBlocking(int fd);
/// The IPv4 address this host uses to reach `host` (a connected UDP socket sends nothing):
/// an address of this host that `host`'s network can reach.
StatusOr<std::string> localAddressToward(const std::string& host);
/// TCP keep-alive on `fd`: probes after `idle_s` seconds of silence, every `interval_s`,
/// and the connection fails after `count` unanswered ones. For a connection that may sit
/// idle for long (a worker waiting for rank 0's next command): a peer host that vanishes
/// without closing it (power loss, a cut link) is then noticed within idle + interval x
/// count seconds instead of never. Errors name the option.
Status enableKeepAlive(int fd, int idle_s, int interval_s, int count);
/// Keep-alive times (enableKeepAlive's) that fail a silent connection about `timeout` after
/// it went quiet: idle for half of it, then 3 probes a sixth of it apart, in whole seconds
/// at least 1 and at most 32767 each (TCP counts in seconds; Linux's limit). 30 s gives
/// 15 + 3 x 5.
struct KeepAliveTimes {
  int idle_s = 0;
  int interval_s = 0;
  int count = 0;
};
KeepAliveTimes keepAliveWithin(std::chrono::milliseconds timeout);
/// A connected non-blocking socket to `addr`:`port` (numeric IPv4), retrying with backoff
/// (10 ms doubling to 500 ms) until `deadline`, since the peer may not listen yet.
StatusOr<int> connectWithRetry(const std::string& addr, uint16_t port, Clock::time_point deadline);

}  // namespace ingot::tcp_socket
