// EngineLoop: the one thread that steps the Engine and hands each request its outputs.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "runtime/engine/engine.h"
#include "runtime/server/server_metrics.h"

namespace ingot::server {

/// Receives one request's outputs. Called on the engine thread, so it must not block: an
/// implementation queues the outputs and wakes its connection's I/O executor.
class OutputSink {
 public:
  virtual ~OutputSink() = default;
  /// This request's outputs of one step (one per choice that changed), in order.
  virtual void onOutputs(std::vector<RequestOutput> outputs) = 0;
  /// The engine failed; no more outputs will come.
  virtual void onEngineError(const std::string& message) = 0;
};

/// Owns the engine thread. Submissions and cancellations may come from any thread; the
/// thread sleeps while the engine has no work. Latency histograms are observed here, at
/// the moment each token leaves the engine.
class EngineLoop {
 public:
  EngineLoop(Engine& engine, ServerMetrics& metrics);
  ~EngineLoop();
  void start();
  /// Queues a request of `n` choices (engine ids first..first+n-1) whose outputs go to `sink`.
  StatusOr<RequestId> submit(std::vector<int32_t> prompt, const SamplingParams& params, int32_t n,
                             std::shared_ptr<OutputSink> sink);
  /// Cancels every choice of the request that starts at `first`.
  void cancel(RequestId first, int32_t n);
  /// Lets the engine finish everything it has, then joins the thread.
  void stopAfterDrain();
  /// False once a step failed (the server then refuses new requests).
  bool healthy() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Tracked {
    std::shared_ptr<OutputSink> sink;
    RequestId first = 0;
    int32_t n = 1;
    int32_t unfinished = 1;
    Clock::time_point arrival;
    bool first_token_seen = false;
    std::vector<Clock::time_point> last_token;  // per choice
  };

  void run();
  void dispatch(std::vector<RequestOutput> outputs);
  void failAll(const std::string& message);

  Engine& engine_;
  ServerMetrics& metrics_;
  std::thread thread_;
  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  bool wake_ = false;
  bool stopping_ = false;
  bool failed_ = false;
  std::unordered_map<RequestId, std::shared_ptr<Tracked>> by_id_;
};

}  // namespace ingot::server
