// HttpSession: one client connection — reads requests, routes them, streams generations.
#include "runtime/server/http_session.h"

#include <chrono>
#include <cstdio>

#include "runtime/tokenizer/stream_decoder.h"

namespace ingot::server {
namespace {

using tcp = net::ip::tcp;

/// Largest request body accepted (a 128k-token prompt of JSON text fits comfortably).
constexpr uint64_t kMaxBodyBytes = 8u << 20;
/// A connection idle this long between requests is closed.
constexpr auto kIdleTimeout = std::chrono::seconds(300);

/// Forwards engine-thread outputs to the session; holds it alive until the request ends.
class SessionSink : public OutputSink {
 public:
  explicit SessionSink(std::shared_ptr<HttpSession> session) : session_(std::move(session)) {}
  void onOutputs(std::vector<RequestOutput> outputs) override { session_->pushOutputs(std::move(outputs)); }
  void onEngineError(const std::string& message) override { session_->pushEngineError(message); }

 private:
  std::shared_ptr<HttpSession> session_;
};

struct Route {
  const char* path;
  http::verb method;
};
const Route kRoutes[] = {{"/health", http::verb::get},
                         {"/v1/models", http::verb::get},
                         {"/metrics", http::verb::get},
                         {"/v1/completions", http::verb::post},
                         {"/v1/chat/completions", http::verb::post}};

}  // namespace

HttpSession::HttpSession(tcp::socket socket, ServingContext& context,
                         std::function<void()> generation_started, GenerationDone generation_done,
                         std::function<bool()> draining)
    : stream_(std::move(socket)), ctx_(context), generation_started_(std::move(generation_started)),
      generation_done_(std::move(generation_done)), draining_(std::move(draining)) {}

void HttpSession::start() {
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->doRead(); });
}

void HttpSession::doRead() {
  parser_ = std::make_unique<http::request_parser<http::string_body>>();
  parser_->body_limit(kMaxBodyBytes);
  stream_.expires_after(kIdleTimeout);
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t n) { self->onRead(ec, n); });
}

void HttpSession::onRead(beast::error_code ec, size_t) {
  if (ec == http::error::body_limit) {
    keep_alive_ = false;  // the rest of the body is still unread
    return sendError({413, "the request body is too large", "invalid_request_error", "", "body_too_large"});
  }
  if (ec) return close();
  route();
}

void HttpSession::route() {
  const http::request<http::string_body>& req = parser_->get();
  keep_alive_ = req.keep_alive();
  std::string target(req.target());
  target = target.substr(0, target.find('?'));
  const Route* found = nullptr;
  for (const Route& r : kRoutes)
    if (target == r.path) found = &r;
  if (!found) return sendError({404, "no route " + target, "not_found_error", "", "unknown_route"});
  if (req.method() != found->method) {
    http::response<http::string_body> res{http::status::method_not_allowed, 11};
    res.set(http::field::allow, http::to_string(found->method));
    res.set(http::field::content_type, "application/json");
    res.body() = ApiError{405, std::string(req.method_string()) + " is not allowed on " + target +
                                   "; use " + std::string(http::to_string(found->method)),
                          "invalid_request_error", "", "method_not_allowed"}.toJson();
    return sendResponse(std::move(res));
  }
  if (target == "/health") {
    if (!ctx_.loop->healthy()) return sendError({503, "the engine has failed", "server_error"});
    return sendJson(200, "{\"status\":\"ok\"}");
  }
  if (target == "/v1/models")
    return sendJson(200, formatModels(ctx_.options.model_name, ctx_.created, ctx_.max_model_len));
  if (target == "/metrics")
    return sendJson(200, ctx_.metrics->render(ctx_.engine->metrics()), "text/plain; version=0.0.4");
  startGeneration(target == "/v1/completions" ? RequestKind::kCompletion : RequestKind::kChat);
}

void HttpSession::sendJson(int status, const std::string& body, const char* content_type) {
  http::response<http::string_body> res{static_cast<http::status>(status), 11};
  res.set(http::field::content_type, content_type);
  res.body() = body;
  sendResponse(std::move(res));
}

void HttpSession::sendError(const ApiError& error) {
  http::response<http::string_body> res{static_cast<http::status>(error.status), 11};
  res.set(http::field::content_type, "application/json");
  if (error.status == 429) res.set(http::field::retry_after, std::to_string(ctx_.options.retry_after_s));
  res.body() = error.toJson();
  sendResponse(std::move(res));
}

void HttpSession::sendResponse(http::response<http::string_body> res) {
  res.set(http::field::server, "ingot");
  res.keep_alive(keep_alive_ && !draining_());
  res.prepare_payload();
  auto sp = std::make_shared<http::response<http::string_body>>(std::move(res));
  bool keep = sp->keep_alive();
  http::async_write(stream_, *sp, [self = shared_from_this(), sp, keep](beast::error_code ec, size_t) {
    if (self->done_after_write_) {
      self->done_after_write_ = false;
      self->generation_done_();
    }
    if (ec) return self->close();
    self->afterResponse(keep);
  });
}

void HttpSession::afterResponse(bool keep_alive) {
  if (!keep_alive || draining_()) return close();
  if (probing_) {
    read_after_probe_ = true;
    beast::error_code ec;
    stream_.socket().cancel(ec);
    return;
  }
  doRead();
}

void HttpSession::close() {
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  stream_.socket().close(ec);
}

void HttpSession::startGeneration(RequestKind kind) {
  GenerateRequest request;
  ApiError error;
  uint64_t seed = ctx_.next_seed.fetch_add(0x9E3779B97F4A7C15ull);
  if (!parseGenerateRequest(parser_->get().body(), kind, seed, &request, &error)) return sendError(error);
  if (!request.model.empty() && request.model != ctx_.options.model_name)
    return sendError({404, "the model '" + request.model + "' does not exist", "not_found_error",
                      "model", "model_not_found"});
  if (draining_()) return sendError({503, "the server is shutting down", "server_error"});
  const Tokenizer& tok = *ctx_.tokenizer;
  std::vector<int32_t> prompt;
  if (kind == RequestKind::kChat) {
    if (!ctx_.chat_template) return sendError(badRequest("the model has no chat template", "messages"));
    StatusOr<std::vector<int32_t>> ids = encodeChatPrompt(*ctx_.chat_template, tok, request.messages);
    if (!ids.ok()) return sendError(badRequest(ids.status().message(), "messages"));
    prompt = std::move(ids).value();
  } else if (request.prompt_is_ids) {
    prompt = request.prompt_ids;
    for (int32_t id : prompt)
      if (static_cast<size_t>(id) >= tok.vocabSize())
        return sendError(badRequest("token id " + std::to_string(id) + " is outside the vocabulary",
                                    "prompt", "invalid_value"));
  } else {
    prompt = tok.encode(request.prompt, /*addSpecial=*/true, /*parseSpecial=*/true);
  }
  const char* prompt_field = kind == RequestKind::kChat ? "messages" : "prompt";
  if (prompt.empty()) return sendError(badRequest("the prompt has no tokens", prompt_field));
  if (static_cast<int64_t>(prompt.size()) >= ctx_.max_model_len)
    return sendError(badRequest("the prompt has " + std::to_string(prompt.size()) +
                                    " tokens; this model's context holds " +
                                    std::to_string(ctx_.max_model_len) + " (prompt plus output)",
                                prompt_field, "context_length_exceeded"));
  int32_t n = request.n;
  if (ctx_.admitted.fetch_add(n) + n > ctx_.capacity) {
    ctx_.admitted.fetch_sub(n);
    return sendError({429, "the server is at capacity; retry later", "rate_limit_error", "",
                      "queue_full"});
  }
  auto gen = std::make_unique<Generation>();
  gen->header.kind = kind;
  char id[48];
  std::snprintf(id, sizeof(id), "%s-%016llx", kind == RequestKind::kChat ? "chatcmpl" : "cmpl",
                static_cast<unsigned long long>(ctx_.next_id.fetch_add(1)));
  gen->header.id = id;
  gen->header.created = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
  gen->header.model = ctx_.options.model_name;
  gen->prompt_tokens = static_cast<int32_t>(prompt.size());
  gen->choices.resize(n);
  gen->unfinished = n;
  for (int32_t i = 0; i < n; ++i) {
    if (request.echo) gen->choices[i].prefix = request.prompt_is_ids ? tok.decode(prompt, false) : request.prompt;
  }
  gen->request = std::move(request);
  StatusOr<RequestId> first = ctx_.loop->submit(std::move(prompt), gen->request.sampling, n,
                                                std::make_shared<SessionSink>(shared_from_this()));
  if (!first.ok()) {
    ctx_.admitted.fetch_sub(n);
    return sendError(ctx_.loop->healthy() ? badRequest(first.status().message())
                                          : ApiError{503, first.status().message(), "server_error"});
  }
  gen->first = *first;
  gen_ = std::move(gen);
  generation_started_();
  stream_.expires_never();
  if (gen_->request.stream) {
    stream_head_ = std::make_unique<http::response<http::empty_body>>(http::status::ok, 11);
    stream_head_->set(http::field::server, "ingot");
    stream_head_->set(http::field::content_type, "text/event-stream");
    stream_head_->set(http::field::cache_control, "no-cache");
    stream_head_->keep_alive(keep_alive_);
    stream_head_->chunked(true);
    stream_serializer_ = std::make_unique<http::response_serializer<http::empty_body>>(*stream_head_);
    writing_ = true;
    http::async_write_header(stream_, *stream_serializer_,
                             [self = shared_from_this()](beast::error_code ec, size_t) {
                               self->writing_ = false;
                               if (ec) return self->abandonGeneration();
                               self->writeNext();
                             });
  }
  watchForHangup();
}

void HttpSession::watchForHangup() {
  probing_ = true;
  stream_.socket().async_read_some(
      net::buffer(probe_), [self = shared_from_this()](beast::error_code ec, size_t n) {
        self->probing_ = false;
        if (ec == net::error::operation_aborted && self->read_after_probe_) {
          self->read_after_probe_ = false;
          return self->doRead();
        }
        if (ec) {
          if (self->gen_) self->abandonGeneration();
          return;
        }
        // Bytes of a pipelined request: keep them for the next read.
        net::buffer_copy(self->buffer_.prepare(n), net::buffer(self->probe_, n));
        self->buffer_.commit(n);
        if (self->read_after_probe_) {
          self->read_after_probe_ = false;
          return self->doRead();
        }
        if (self->gen_ && self->buffer_.size() < kMaxBodyBytes) return self->watchForHangup();
        if (self->gen_) self->abandonGeneration();
      });
}

void HttpSession::abandonGeneration() {
  if (!gen_ || gen_->client_gone) return;
  gen_->client_gone = true;  // writeNext() starts nothing more; an in-flight write finishes
  if (gen_->unfinished > 0) {
    ctx_.loop->cancel(gen_->first, gen_->request.n);  // finishGeneration follows the cancellation
  } else {
    gen_.reset();
    generation_done_();
    close();
  }
}

void HttpSession::pushOutputs(std::vector<RequestOutput> outputs) {
  std::lock_guard<std::mutex> lock(mu_);
  for (RequestOutput& o : outputs) incoming_.push_back(std::move(o));
  if (!drain_posted_) {
    drain_posted_ = true;
    net::post(stream_.get_executor(), [self = shared_from_this()] { self->drainOutputs(); });
  }
}

void HttpSession::pushEngineError(const std::string& message) {
  std::lock_guard<std::mutex> lock(mu_);
  incoming_error_ = message.empty() ? "engine failure" : message;
  if (!drain_posted_) {
    drain_posted_ = true;
    net::post(stream_.get_executor(), [self = shared_from_this()] { self->drainOutputs(); });
  }
}

void HttpSession::drainOutputs() {
  std::vector<RequestOutput> outputs;
  std::string engine_error;
  {
    std::lock_guard<std::mutex> lock(mu_);
    outputs.swap(incoming_);
    engine_error.swap(incoming_error_);
    drain_posted_ = false;
  }
  if (!gen_ || gen_->unfinished == 0) return;
  Generation& g = *gen_;
  bool stream = g.request.stream && !g.client_gone;
  bool with_logprobs = g.request.sampling.logprobs;
  TokenPiece piece = [this](int32_t id) { return ctx_.tokenizer->tokenPiece(id); };
  std::string events;
  for (RequestOutput& out : outputs) {
    int32_t index = static_cast<int32_t>(out.id - g.first);
    if (index < 0 || index >= static_cast<int32_t>(g.choices.size())) continue;
    Choice& c = g.choices[index];
    if (!c.finish_reason.empty()) continue;
    // Emit only whole UTF-8 characters; the held-back bytes go out with the next token.
    std::string combined = c.held + out.text;
    size_t complete = out.finished() ? combined.size() : completeUtf8Prefix(combined);
    ChoiceDelta delta;
    delta.index = index;
    delta.text = c.prefix + combined.substr(0, complete);
    c.prefix.clear();
    c.held = combined.substr(complete);
    delta.token_ids = out.token_ids;
    delta.logprobs = std::move(out.logprobs);
    if (out.finished()) {
      c.finish_reason = out.cancelled ? "abort" : finishReasonName(out.finish_reason);
      c.generated = out.num_generated_tokens;
      delta.finish_reason = c.finish_reason;
      --g.unfinished;
    }
    if (stream) {
      if (delta.text.empty() && delta.finish_reason.empty() && delta.logprobs.empty()) continue;
      events += sseEvent(formatChunk(g.header, {delta}, !c.sent_chunk, with_logprobs, piece));
      c.sent_chunk = true;
    } else {  // the whole response is assembled only when it is not streamed
      c.text += delta.text;
      c.token_ids.insert(c.token_ids.end(), delta.token_ids.begin(), delta.token_ids.end());
      c.logprobs.insert(c.logprobs.end(), delta.logprobs.begin(), delta.logprobs.end());
    }
  }
  if (!engine_error.empty()) {
    g.engine_error = engine_error;
    g.unfinished = 0;
  }
  if (!events.empty()) queueChunk(std::move(events), false);
  if (g.unfinished == 0) finishGeneration();
}

void HttpSession::queueChunk(std::string data, bool last) {
  outbox_.emplace_back(std::move(data), last);
  writeNext();
}

void HttpSession::writeNext() {
  if (writing_ || outbox_.empty() || !gen_ || gen_->client_gone) return;
  writing_ = true;
  auto handler = [self = shared_from_this()](beast::error_code ec, size_t) {
    self->writing_ = false;
    if (ec) return self->abandonGeneration();
    if (!self->gen_ || self->gen_->client_gone || self->outbox_.empty()) return;
    bool last = self->outbox_.front().second;
    self->outbox_.pop_front();
    if (!last) return self->writeNext();
    self->gen_.reset();
    self->stream_head_.reset();
    self->stream_serializer_.reset();
    self->generation_done_();
    self->afterResponse(self->keep_alive_);
  };
  if (outbox_.front().second) {
    net::async_write(stream_, http::make_chunk_last(), handler);
  } else {
    net::async_write(stream_, http::make_chunk(net::buffer(outbox_.front().first)), handler);
  }
}

void HttpSession::finishGeneration() {
  Generation& g = *gen_;
  ctx_.admitted.fetch_sub(g.request.n);
  if (g.client_gone) {
    gen_.reset();
    generation_done_();
    return close();
  }
  Usage usage;
  usage.prompt_tokens = g.prompt_tokens;
  for (const Choice& c : g.choices) usage.completion_tokens += c.generated;
  if (g.request.stream) {
    std::string tail;
    if (!g.engine_error.empty())
      tail += sseEvent(ApiError{500, g.engine_error, "server_error"}.toJson());
    else if (g.request.stream_usage)
      tail += sseEvent(formatUsageChunk(g.header, usage));
    tail += sseDone();
    queueChunk(std::move(tail), false);
    queueChunk(std::string(), true);
    return;
  }
  std::unique_ptr<Generation> done = std::move(gen_);
  done_after_write_ = true;  // the drain on shutdown waits for this response to be written
  if (!done->engine_error.empty()) return sendError({500, done->engine_error, "server_error"});
  std::vector<ChoiceDelta> choices(done->choices.size());
  for (size_t i = 0; i < choices.size(); ++i) {
    choices[i].index = static_cast<int32_t>(i);
    choices[i].text = std::move(done->choices[i].text);
    choices[i].token_ids = std::move(done->choices[i].token_ids);
    choices[i].logprobs = std::move(done->choices[i].logprobs);
    choices[i].finish_reason = done->choices[i].finish_reason;
  }
  sendJson(200, formatResponse(done->header, choices, usage, done->request.sampling.logprobs,
                               [this](int32_t id) { return ctx_.tokenizer->tokenPiece(id); }));
}

}  // namespace ingot::server
