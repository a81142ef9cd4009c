// Blocking-with-deadline socket reads and writes, and the store's little-endian framing.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/base/status.h"

namespace ingot::tcp_store_io {

using Clock = std::chrono::steady_clock;

/// Milliseconds until `deadline` for poll(): -1 for time_point::max() (wait forever), never
/// negative otherwise.
int pollTimeoutMs(Clock::time_point deadline);

/// Reads exactly `size` bytes. Errors say what happened: the deadline passed, the peer
/// closed the connection (before any byte, or a short read after some), or a socket error.
Status readAll(int fd, void* data, size_t size, Clock::time_point deadline);
/// Writes exactly `size` bytes (no SIGPIPE when the peer is gone: an error instead).
Status writeAll(int fd, const void* data, size_t size, Clock::time_point deadline);

/// Little-endian integers on the wire.
Status readU32(int fd, uint32_t& value, Clock::time_point deadline);
Status readU64(int fd, uint64_t& value, Clock::time_point deadline);
void appendU32(std::vector<uint8_t>& out, uint32_t value);
void appendU64(std::vector<uint8_t>& out, uint64_t value);

/// Reads one reply frame (code, u64 length, payload). A length above the store's value
/// limit is a corrupt or hostile frame and an error, not an allocation.
Status readReply(int fd, uint8_t& code, std::vector<uint8_t>& payload,
                 Clock::time_point deadline);

}  // namespace ingot::tcp_store_io
