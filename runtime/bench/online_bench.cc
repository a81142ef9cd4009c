// Online benchmark: streaming /v1/completions requests against a running `ingot serve`.
#include "runtime/bench/online_bench.h"

#include <chrono>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string_view>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

namespace ingot {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

/// Deadline of the GET /metrics reads before and after the run.
constexpr std::chrono::seconds kMetricsTimeout{10};
/// The server's histogram of sequences per engine step (runtime/server/server_metrics.cc).
constexpr const char* kBatchHistogram = "ingot_running_batch_size";

double msBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

/// The message of an OpenAI-style error body, else the start of the body.
std::string errorMessage(const std::string& body) {
  Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object()) {
    auto e = j.find("error");
    if (e != j.end() && e->is_object()) {
      auto m = e->find("message");
      if (m != e->end() && m->is_string()) return m->get<std::string>();
    }
    if (e != j.end() && e->is_string()) return e->get<std::string>();
  }
  return body.substr(0, 200);
}

int64_t integerOr(const Json& object, const char* key, int64_t fallback) {
  auto it = object.find(key);
  return it != object.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

/// What one streamed request saw.
struct StreamOutcome {
  std::string error;  // empty = the stream ended with [DONE]
  double ttft_ms = 0, e2e_ms = 0;
  std::vector<double> itl_ms;
  int64_t chunks = 0;                              // SSE chunks that carried a choice
  int64_t prompt_tokens = -1, output_tokens = -1;  // from usage; -1 = not reported
};

/// One streaming completion on a connection of its own; reports exactly once to `done`.
class StreamClient : public std::enable_shared_from_this<StreamClient> {
 public:
  using Done = std::function<void(StreamOutcome)>;

  StreamClient(net::io_context& io, const tcp::resolver::results_type& endpoints,
               http::request<http::string_body> request, double timeout_s, Done done)
      : stream_(io), endpoints_(endpoints), request_(std::move(request)),
        timeout_s_(timeout_s), done_(std::move(done)) {
    parser_.body_limit(std::numeric_limits<std::uint64_t>::max());  // streams are long
  }

  void start() {
    started_ = Clock::now();
    stream_.expires_after(std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(timeout_s_)));
    stream_.async_connect(endpoints_, [self = shared_from_this()](beast::error_code ec,
                                                                  const tcp::endpoint&) {
      if (ec) return self->fail("connect: " + ec.message());
      http::async_write(self->stream_, self->request_, [self](beast::error_code ec, size_t) {
        if (ec) return self->fail("send: " + ec.message());
        http::async_read_header(self->stream_, self->buffer_, self->parser_,
                                [self](beast::error_code ec, size_t) { self->onHeader(ec); });
      });
    });
  }

 private:
  void onHeader(beast::error_code ec) {
    if (ec) return fail("response: " + ec.message());
    if (parser_.get().result() == http::status::ok) return readSome();
    http::async_read(stream_, buffer_, parser_, [self = shared_from_this()](beast::error_code ec,
                                                                            size_t) {
      std::string why = ec ? ec.message() : errorMessage(self->parser_.get().body());
      self->fail("HTTP " + std::to_string(self->parser_.get().result_int()) + ": " + why);
    });
  }

  void readSome() {
    http::async_read_some(stream_, buffer_, parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) {
                            self->onRead(ec);
                          });
  }

  void onRead(beast::error_code ec) {
    if (consumeEvents(Clock::now())) return;
    if (ec || parser_.is_done())
      return fail(std::string("the stream ended before [DONE]") +
                  (ec ? " (" + ec.message() + ")" : ""));
    readSome();
  }

  /// Handles every complete event received so far; true once the request has finished.
  bool consumeEvents(Clock::time_point now) {
    std::string& body = parser_.get().body();
    size_t pos = 0;
    bool finished = false;
    for (size_t end; !finished && (end = body.find("\n\n", pos)) != std::string::npos;
         pos = end + 2)
      finished = handleEvent(std::string_view(body).substr(pos, end - pos), now);
    body.erase(0, pos);  // the parser appends after whatever is left
    return finished;
  }

  /// One server-sent event; true when it finished the request ([DONE] or an error).
  bool handleEvent(std::string_view event, Clock::time_point now) {
    std::string data;
    for (size_t start = 0; start <= event.size();) {
      size_t nl = event.find('\n', start);
      std::string_view line = event.substr(start, nl == std::string_view::npos ? nl : nl - start);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.substr(0, 5) == "data:") {
        line.remove_prefix(line.size() > 5 && line[5] == ' ' ? 6 : 5);
        if (!data.empty()) data += '\n';
        data += line;
      }
      if (nl == std::string_view::npos) break;
      start = nl + 1;
    }
    if (data.empty()) return false;  // a comment or keep-alive
    if (data == "[DONE]") {
      if (outcome_.chunks == 0) return fail("the stream carried no tokens"), true;
      outcome_.e2e_ms = msBetween(started_, now);
      finish();
      return true;
    }
    Json j = Json::parse(data, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return fail("malformed event: " + data.substr(0, 100)), true;
    if (j.contains("error")) return fail("error event: " + errorMessage(data)), true;
    auto choices = j.find("choices");
    if (choices != j.end() && choices->is_array() && !choices->empty()) {
      if (outcome_.chunks == 0) outcome_.ttft_ms = msBetween(started_, now);
      else outcome_.itl_ms.push_back(msBetween(last_chunk_, now));
      last_chunk_ = now;
      ++outcome_.chunks;
    }
    auto usage = j.find("usage");
    if (usage != j.end() && usage->is_object()) {
      outcome_.prompt_tokens = integerOr(*usage, "prompt_tokens", -1);
      outcome_.output_tokens = integerOr(*usage, "completion_tokens", -1);
    }
    return false;
  }

  void fail(std::string message) {
    outcome_.error = std::move(message);
    finish();
  }

  void finish() {
    if (reported_) return;
    reported_ = true;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
    done_(std::move(outcome_));
  }

  beast::tcp_stream stream_;
  tcp::resolver::results_type endpoints_;
  http::request<http::string_body> request_;
  http::response_parser<http::string_body> parser_;
  beast::flat_buffer buffer_;
  double timeout_s_;
  Done done_;
  Clock::time_point started_, last_chunk_;
  StreamOutcome outcome_;
  bool reported_ = false;
};

/// GET `target` (one connection, a short deadline); the body of a 200 response.
StatusOr<std::string> httpGet(const tcp::resolver::results_type& endpoints,
                              const std::string& host, const std::string& target) {
  net::io_context io;
  beast::tcp_stream stream(io);
  stream.expires_after(kMetricsTimeout);
  http::request<http::empty_body> request{http::verb::get, target, 11};
  request.set(http::field::host, host);
  request.keep_alive(false);
  http::response<http::string_body> response;
  beast::flat_buffer buffer;
  beast::error_code result;
  stream.async_connect(endpoints, [&](beast::error_code ec, const tcp::endpoint&) {
    if (ec) return void(result = ec);
    http::async_write(stream, request, [&](beast::error_code ec, size_t) {
      if (ec) return void(result = ec);
      http::async_read(stream, buffer, response, [&](beast::error_code ec, size_t) { result = ec; });
    });
  });
  io.run();
  if (result) return ioError("GET " + target + ": " + result.message());
  if (response.result() != http::status::ok)
    return ioError("GET " + target + ": HTTP " + std::to_string(response.result_int()));
  return response.body();
}

/// Sequences-per-step totals of the server's batch histogram; nullopt-like `ok` = false.
struct BatchTotals {
  bool ok = false;
  double sum = 0, count = 0;
};

BatchTotals readBatchTotals(const tcp::resolver::results_type& endpoints, const std::string& host) {
  BatchTotals t;
  StatusOr<std::string> text = httpGet(endpoints, host, "/metrics");
  if (text.ok()) t.ok = readHistogramTotals(*text, kBatchHistogram, &t.sum, &t.count);
  return t;
}

/// Starts planned requests at their arrival times under the concurrency cap, on one
/// io_context run by the calling thread, and gathers their outcomes.
class OnlineRun {
 public:
  OnlineRun(const OnlineBenchOptions& options, std::vector<PlannedRequest> plan,
            tcp::resolver::results_type endpoints, std::string host)
      : options_(options), plan_(std::move(plan)), endpoints_(std::move(endpoints)),
        host_(std::move(host)), timer_(io_) {}

  void run(BenchResult* result) {
    start_ = last_end_ = Clock::now();
    pump();
    io_.run();
    samples_.fill(msBetween(start_, last_end_) / 1000.0, result);
    result->failed = failed_;
    result->first_error = first_error_;
  }

 private:
  static constexpr size_t kNotArmed = std::numeric_limits<size_t>::max();

  Clock::time_point arrival(size_t i) const {
    return start_ + std::chrono::duration_cast<Clock::duration>(
                        std::chrono::duration<double>(plan_[i].arrival_s));
  }

  /// Queues what has arrived, starts what the cap allows, and waits for the next arrival.
  void pump() {
    const Clock::time_point now = Clock::now();
    while (next_ < plan_.size() && arrival(next_) <= now) ready_.push_back(next_++);
    while (!ready_.empty() &&
           (options_.concurrency == 0 || in_flight_ < options_.concurrency)) {
      launch(ready_.front());
      ready_.pop_front();
    }
    if (next_ < plan_.size() && armed_for_ != next_) {
      armed_for_ = next_;
      timer_.expires_at(arrival(next_));
      timer_.async_wait([this](beast::error_code ec) {
        if (ec) return;
        armed_for_ = kNotArmed;
        pump();
      });
    }
  }

  void launch(size_t i) {
    PlannedRequest& planned = plan_[i];
    Json body = {{"prompt", planned.prompt},
                 {"max_tokens", planned.max_tokens},
                 {"stream", true},
                 {"stream_options", {{"include_usage", true}}},
                 {"ignore_eos", true},
                 {"temperature", 0}};
    if (!options_.model.empty()) body["model"] = options_.model;
    http::request<http::string_body> request{http::verb::post, "/v1/completions", 11};
    request.set(http::field::host, host_);
    request.set(http::field::user_agent, "ingot-bench");
    request.set(http::field::content_type, "application/json");
    request.set(http::field::accept, "text/event-stream");
    request.keep_alive(false);
    request.body() = body.dump();
    request.prepare_payload();
    const int64_t prompt_tokens = static_cast<int64_t>(planned.prompt.size());
    std::vector<int32_t>().swap(planned.prompt);
    ++in_flight_;
    std::make_shared<StreamClient>(io_, endpoints_, std::move(request), options_.timeout_s,
                                   [this, prompt_tokens](StreamOutcome o) {
                                     finished(std::move(o), prompt_tokens);
                                   })
        ->start();
  }

  void finished(StreamOutcome o, int64_t prompt_tokens) {
    --in_flight_;
    last_end_ = Clock::now();
    if (o.error.empty()) {
      samples_.addRequest(o.ttft_ms, o.e2e_ms,
                          o.prompt_tokens >= 0 ? o.prompt_tokens : prompt_tokens,
                          o.output_tokens >= 0 ? o.output_tokens : o.chunks);
      samples_.itl_ms.insert(samples_.itl_ms.end(), o.itl_ms.begin(), o.itl_ms.end());
    } else {
      ++failed_;
      if (first_error_.empty()) first_error_ = o.error;
    }
    // Not from inside the client's handler: it is still on the stack.
    net::post(io_, [this] { pump(); });
  }

  const OnlineBenchOptions& options_;
  std::vector<PlannedRequest> plan_;
  tcp::resolver::results_type endpoints_;
  std::string host_;
  net::io_context io_{1};
  net::steady_timer timer_;
  Clock::time_point start_, last_end_;
  std::deque<size_t> ready_;  // arrived, waiting for the cap
  size_t next_ = 0;           // the next request to arrive
  size_t armed_for_ = kNotArmed;
  int32_t in_flight_ = 0;
  RunSamples samples_;
  int32_t failed_ = 0;
  std::string first_error_;
};

}  // namespace

StatusOr<HttpEndpoint> parseHttpUrl(const std::string& url) {
  const std::string scheme = "http://";
  if (url.compare(0, scheme.size(), scheme) != 0)
    return invalidArgument("bench: the URL '" + url + "' must start with http:// (no TLS)");
  std::string rest = url.substr(scheme.size());
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.find('/') != std::string::npos)
    return invalidArgument("bench: give the server's root URL, not a path: '" + url + "'");
  HttpEndpoint e;
  std::string port;
  if (!rest.empty() && rest[0] == '[') {  // [IPv6]:port
    size_t close = rest.find(']');
    if (close == std::string::npos) return invalidArgument("bench: bad IPv6 host in '" + url + "'");
    e.host = rest.substr(1, close - 1);
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') return invalidArgument("bench: bad URL '" + url + "'");
      port = rest.substr(close + 2);
    }
  } else {
    size_t colon = rest.rfind(':');
    e.host = rest.substr(0, colon);
    if (colon != std::string::npos) port = rest.substr(colon + 1);
  }
  if (e.host.empty()) return invalidArgument("bench: no host in '" + url + "'");
  if (!port.empty() || rest.find(':') != std::string::npos) {
    char* end = nullptr;
    long p = std::strtol(port.c_str(), &end, 10);
    if (port.empty() || *end != '\0' || p < 1 || p > 65535)
      return invalidArgument("bench: bad port in '" + url + "'");
    e.port = static_cast<uint16_t>(p);
  }
  return e;
}

bool readHistogramTotals(const std::string& text, const std::string& name, double* sum,
                         double* count) {
  bool have_sum = false, have_count = false;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    double value = 0;
    if (!(fields >> key >> value)) continue;
    if (key == name + "_sum") *sum = value, have_sum = true;
    else if (key == name + "_count") *count = value, have_count = true;
  }
  return have_sum && have_count;
}

StatusOr<BenchResult> runOnlineBench(const OnlineBenchOptions& options) {
  if (options.concurrency < 0 || (options.concurrency == 0 && !(options.request_rate > 0)))
    return invalidArgument("bench: concurrency must be positive (0 = no cap needs a request "
                           "rate)");
  if (!(options.timeout_s > 0)) return invalidArgument("bench: the timeout must be positive");
  StatusOr<HttpEndpoint> endpoint = parseHttpUrl(options.url);
  if (!endpoint.ok()) return endpoint.status();
  StatusOr<std::vector<PlannedRequest>> plan = planWorkload(options, options.prompt_vocab);
  if (!plan.ok()) return plan.status();

  tcp::resolver::results_type endpoints;
  {
    net::io_context io;
    tcp::resolver resolver(io);
    beast::error_code ec;
    endpoints = resolver.resolve(endpoint->host, std::to_string(endpoint->port), ec);
    if (ec) return invalidArgument("bench: cannot resolve '" + endpoint->host + "': " + ec.message());
  }
  std::string host = options.url.substr(7);
  if (!host.empty() && host.back() == '/') host.pop_back();

  BenchResult result;
  result.mode = "online";
  result.concurrency = options.concurrency;
  result.request_rate = options.request_rate;
  const BatchTotals before = readBatchTotals(endpoints, host);
  OnlineRun(options, std::move(plan).value(), endpoints, host).run(&result);
  const BatchTotals after = readBatchTotals(endpoints, host);
  result.mean_batch = std::numeric_limits<double>::quiet_NaN();
  if (before.ok && after.ok && after.count > before.count)
    result.mean_batch = (after.sum - before.sum) / (after.count - before.count);
  return result;
}

}  // namespace ingot
