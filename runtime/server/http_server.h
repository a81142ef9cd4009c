// HttpServer: the OpenAI-compatible HTTP front end (Boost.Beast, a fixed pool of I/O threads).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/base/status.h"
#include "runtime/engine/engine.h"
#include "runtime/server/engine_loop.h"
#include "runtime/server/server_metrics.h"
#include "runtime/tokenizer/chat_template.h"
#include "runtime/tokenizer/tokenizer.h"

namespace ingot::server {

struct ServerOptions {
  /// Loopback by default: serving to the network is an explicit choice.
  std::string host = "127.0.0.1";
  /// 0 = an ephemeral port (see HttpServer::port()).
  uint16_t port = 8000;
  /// Threads running the asynchronous I/O; connections never get a thread of their own.
  int io_threads = 2;
  /// Sequences admitted beyond the engine's running cap before requests get 429.
  int32_t max_queue = 256;
  /// The name /v1/models reports and requests must use (or omit).
  std::string model_name = "ingot";
  /// Seconds a 429 asks the client to wait (Retry-After).
  int retry_after_s = 1;
};

/// What the HTTP sessions share: the engine loop, tokenizer, chat template, limits, metrics.
struct ServingContext {
  Engine* engine = nullptr;
  EngineLoop* loop = nullptr;
  ServerMetrics* metrics = nullptr;
  const Tokenizer* tokenizer = nullptr;
  std::optional<ChatTemplate> chat_template;
  ServerOptions options;
  int64_t created = 0;          // Unix seconds at startup
  int32_t max_model_len = 0;
  int32_t capacity = 0;         // sequences admitted at once (running cap + max_queue)
  std::atomic<int32_t> admitted{0};
  std::atomic<uint64_t> next_seed{0};
  std::atomic<uint64_t> next_id{0};
};

/// Listens, serves until SIGTERM/SIGINT, then stops accepting, lets running requests finish
/// (streams included), stops the engine loop and returns.
class HttpServer {
 public:
  explicit HttpServer(ServingContext& context);
  ~HttpServer();
  /// Binds and listens; errors name the address.
  Status listen();
  /// The bound port (after listen()).
  uint16_t port() const;
  /// Serves until a termination signal has been handled and everything drained.
  void run();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ingot::server
