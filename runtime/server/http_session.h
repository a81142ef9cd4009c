// HttpSession: one client connection — reads requests, routes them, streams generations.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "runtime/server/http_server.h"
#include "runtime/server/openai_response.h"

namespace ingot::server {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;

/// Called when a generation's response has been fully written or abandoned (shutdown
/// bookkeeping counts these).
using GenerationDone = std::function<void()>;

/// All handlers run on the connection's strand; the engine thread reaches a session only
/// by posting to it.
class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(net::ip::tcp::socket socket, ServingContext& context,
              std::function<void()> generation_started, GenerationDone generation_done,
              std::function<bool()> draining);
  void start();
  /// Engine thread: queue outputs and wake the strand.
  void pushOutputs(std::vector<RequestOutput> outputs);
  void pushEngineError(const std::string& message);

 private:
  struct Choice {
    std::string text;           // whole text so far (non-streaming)
    std::string held;           // bytes of an unfinished UTF-8 character
    std::string prefix;         // echo: the prompt, sent before the first token
    std::vector<int32_t> token_ids;
    std::vector<SampleLogprobs> logprobs;
    std::string finish_reason;  // set once finished
    int64_t generated = 0;
    bool sent_chunk = false;    // streaming: the first chunk (with the chat role) is out
  };
  /// The generation this connection is serving (at most one at a time).
  struct Generation {
    GenerateRequest request;
    ResponseHeader header;
    RequestId first = -1;
    int32_t prompt_tokens = 0;
    std::vector<Choice> choices;
    int32_t unfinished = 0;
    bool client_gone = false;
    std::string engine_error;
  };

  void doRead();
  void onRead(beast::error_code ec, size_t bytes);
  void route();
  void sendJson(int status, const std::string& body, const char* content_type = "application/json");
  void sendError(const ApiError& error);
  void sendResponse(http::response<http::string_body> res);
  void afterResponse(bool keep_alive);
  void close();

  void startGeneration(RequestKind kind);
  /// Arms a read that notices the client hanging up while a generation runs.
  void watchForHangup();
  void drainOutputs();
  /// Streaming: queue SSE text (or the terminating chunk when `last`).
  void queueChunk(std::string data, bool last);
  void writeNext();
  void finishGeneration();
  void abandonGeneration();

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::unique_ptr<http::request_parser<http::string_body>> parser_;
  ServingContext& ctx_;
  std::function<void()> generation_started_;
  GenerationDone generation_done_;
  std::function<bool()> draining_;
  bool keep_alive_ = true;
  bool done_after_write_ = false;  // a generation's full response is being written

  std::unique_ptr<Generation> gen_;
  std::unique_ptr<http::response<http::empty_body>> stream_head_;
  std::unique_ptr<http::response_serializer<http::empty_body>> stream_serializer_;
  std::deque<std::pair<std::string, bool>> outbox_;  // (data, last chunk)
  bool writing_ = false;
  bool stream_done_ = false;
  bool probing_ = false;
  bool read_after_probe_ = false;
  char probe_[256];

  std::mutex mu_;  // guards the engine thread's hand-off below
  std::vector<RequestOutput> incoming_;
  std::string incoming_error_;
  bool drain_posted_ = false;
};

}  // namespace ingot::server
