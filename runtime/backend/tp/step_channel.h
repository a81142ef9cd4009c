// StepChannel: rank 0's commands to a worker rank (steps, KV copies, shutdown) and the answers.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/backend/step_inputs.h"
#include "core/base/status.h"

namespace ingot {

/// What a frame on a step channel carries. Rank 0 sends kStep, kCopyKvBlocks, kCopyKvSlots
/// and kShutdown; a worker sends kHello once (its rank and whether its backend came up)
/// and one kResult per command, or kGroupBroken instead when its part failed after the
/// step started and broke the group (the same status payload): rank 0 then aborts its own
/// communicator at once, since NCCL would leave it waiting for this rank until the timeout.
enum class StepCommand : uint32_t {
  kHello = 1,
  kStep = 2,
  kCopyKvBlocks = 3,
  kCopyKvSlots = 4,
  kShutdown = 5,
  kResult = 6,
  kGroupBroken = 7,
};

/// Largest frame payload accepted: a step's inputs are a few int32 per token plus the
/// extra attention operands, far below this; a larger length is a corrupt frame.
constexpr uint64_t kStepChannelMaxFrameBytes = uint64_t{1} << 30;

/// A step received from rank 0: the inputs, with the extra operands' shapes and bytes
/// owned here (inputs.extra_inputs points into them; do not copy without re-pointing).
struct ReceivedStep {
  StepInputs inputs;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<std::vector<uint8_t>> data;
};

/// Payload codecs (little-endian). Decoders check every length against the payload and
/// fail with a message naming the field; they never read past the end.
std::vector<uint8_t> encodeStep(const StepInputs& inputs);
Status decodeStep(const std::vector<uint8_t>& payload, ReceivedStep* out);
std::vector<uint8_t> encodeStatus(const Status& status);
Status decodeStatus(const std::vector<uint8_t>& payload, Status* out);
/// What a worker says once its backend is up (or why it is not).
struct WorkerHello {
  int32_t rank = -1;
  Status status;
  /// Its backend's facts, which rank 0 checks and sums.
  int64_t num_kv_blocks = 0;
  int64_t vocab_size = 0;
  uint64_t matrix_bytes = 0;
  int32_t num_threads = 0;
  /// The artifact it opened: the header's manifest_xxh64, which covers every tensor's
  /// checksum, so two files agree on it exactly when they hold the same model and shards
  /// (cheap: no weight bytes are read). 0 when it could not open the artifact.
  uint64_t artifact_id = 0;
};
std::vector<uint8_t> encodeHello(const WorkerHello& hello);
Status decodeHello(const std::vector<uint8_t>& payload, WorkerHello* hello);
std::vector<uint8_t> encodeKvBlockCopy(int64_t src, int64_t dst);
Status decodeKvBlockCopy(const std::vector<uint8_t>& payload, int64_t* src, int64_t* dst);
std::vector<uint8_t> encodeKvSlotMoves(const std::vector<std::pair<int32_t, int32_t>>& moves);
Status decodeKvSlotMoves(const std::vector<uint8_t>& payload,
                         std::vector<std::pair<int32_t, int32_t>>* moves);

/// One end of a step channel: a connected stream socket (TCP, Nagle off) with framed,
/// deadline-bounded sends and receives. Frame: u32 magic, u32 command, u64 length, payload.
class StepChannel {
 public:
  using Clock = std::chrono::steady_clock;
  /// Takes ownership of the connected socket `fd`; `peer` names the other end in errors.
  StepChannel(int fd, std::string peer);
  ~StepChannel();
  StepChannel(const StepChannel&) = delete;
  StepChannel& operator=(const StepChannel&) = delete;

  Status send(StepCommand command, const std::vector<uint8_t>& payload,
              Clock::time_point deadline);
  /// The next frame; time_point::max() waits for ever (a worker waiting for its next
  /// command: rank 0 going away closes the socket, which ends the wait).
  Status receive(StepCommand* command, std::vector<uint8_t>* payload,
                 Clock::time_point deadline);
  /// As receive(), but gives up waiting as soon as `stop_fd` is readable (a watch thread's
  /// stop pipe): then returns ok with *stopped = true and no frame. Bytes already read stay
  /// here, and the next receive continues the same frame, so a peer that sent part of a
  /// frame and stalled does not hold the caller, nor lose the frame.
  Status receiveUnlessStopped(StepCommand* command, std::vector<uint8_t>* payload,
                              Clock::time_point deadline, int stop_fd, bool* stopped);
  /// Closes the socket now (the peer sees end of stream).
  void close();
  int fd() const { return fd_; }
  const std::string& peer() const { return peer_; }

 private:
  /// Reads into buf[*got, want) until full; see receiveUnlessStopped for `stop_fd`.
  Status fill(uint8_t* buf, size_t want, size_t* got, Clock::time_point deadline, int stop_fd,
              bool* stopped);

  int fd_ = -1;
  std::string peer_;
  /// The frame being received (it may span several receive calls): the 16-byte header,
  /// then the payload once the header is complete.
  uint8_t header_[16] = {};
  size_t header_got_ = 0;
  std::vector<uint8_t> body_;
  size_t body_got_ = 0;
};

/// Rank 0's listening socket that the workers connect their channels to.
class StepChannelListener {
 public:
  /// Listens on `host` (a numeric IPv4 address) on a free port.
  static StatusOr<std::unique_ptr<StepChannelListener>> listen(const std::string& host);
  ~StepChannelListener();
  StepChannelListener(const StepChannelListener&) = delete;
  StepChannelListener& operator=(const StepChannelListener&) = delete;

  uint16_t port() const { return port_; }
  /// The listening socket: readable when a worker's connection is waiting (for a watch).
  int fd() const { return fd_; }
  /// The next connection, or an error once `deadline` passes.
  StatusOr<std::unique_ptr<StepChannel>> accept(StepChannel::Clock::time_point deadline);

 private:
  StepChannelListener() = default;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::string host_;
};

/// A worker's end: connects to `host`:`port` (numeric IPv4), retrying until `deadline`
/// (each attempt bounded by it as well).
StatusOr<std::unique_ptr<StepChannel>> connectStepChannel(const std::string& host, uint16_t port,
                                                          StepChannel::Clock::time_point deadline);

}  // namespace ingot
