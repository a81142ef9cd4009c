// The online benchmark against an in-process `ingot serve` (tiny random Llama) and against
// servers that refuse, reject or cut streams: every request is counted, nothing crashes.
#include "runtime/bench/online_bench.h"

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/llama_program.h"
#include "runtime/server/serve.h"
#include "runtime/tokenizer/tokenizer.h"

namespace ingot {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

/// Collects what the server logs, so the test can wait for its "ready on" line.
class LogCapture : public std::streambuf {
 public:
  /// The port of the "ready on http://HOST:PORT" line, or 0 after `timeout`.
  int waitForPort(std::chrono::seconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    std::smatch m;
    static const std::regex ready("ready on http://[^:]+:([0-9]+)");
    cv_.wait_for(lock, timeout, [&] { return std::regex_search(text_, m, ready); });
    return m.empty() ? 0 : std::stoi(m[1]);
  }

 protected:
  int overflow(int c) override {
    if (c == EOF) return 0;
    std::lock_guard<std::mutex> lock(mu_);
    text_ += static_cast<char>(c);
    if (c == '\n') cv_.notify_all();
    return c;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::string text_;
};

/// serveModel() on a thread over a tiny Llama with SmolLM2's tokenizer; stopped by SIGTERM,
/// which its signal set handles (draining, then returning).
class InProcessServer {
 public:
  void start() {
    std::ifstream in(INGOT_TEST_TOKENIZER);
    ASSERT_TRUE(in) << "cannot read " << INGOT_TEST_TOKENIZER;
    std::stringstream text;
    text << in.rdbuf();
    StatusOr<TokenizerData> data = tokenizerDataFromText(text.str());
    ASSERT_TRUE(data.ok()) << data.status().message();
    testing::LlamaProgramOptions o;
    o.vocab = static_cast<int64_t>(data->tokens.size());
    o.max_context = 256;
    StatusOr<Tokenizer> tokenizer = Tokenizer::create(std::move(data).value());
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().message();
    tokenizer_ = std::make_unique<Tokenizer>(std::move(tokenizer).value());
    StatusOr<std::vector<uint8_t>> bytes = testing::buildLlamaArtifact(o);
    ASSERT_TRUE(bytes.ok()) << bytes.status().message();
    bytes_ = std::move(bytes).value();
    StatusOr<Artifact> artifact = Artifact::openFromMemory(bytes_);
    ASSERT_TRUE(artifact.ok()) << artifact.status().message();
    artifact_ = std::make_unique<Artifact>(std::move(artifact).value());
    server::ServeConfig config;
    config.server.port = 0;
    config.server.model_name = "tiny";
    config.engine.num_threads = 1;
    thread_ = std::thread([this, config] {
      Status s = server::serveModel(*artifact_, *tokenizer_, config,
                                    std::chrono::steady_clock::now(), log_stream_);
      if (!s.ok()) log_stream_ << "serve failed: " << s.message() << std::endl;
    });
    port_ = capture_.waitForPort(std::chrono::seconds(60));
    ASSERT_GT(port_, 0) << "the server did not start";
  }

  ~InProcessServer() {
    if (!thread_.joinable()) return;
    if (port_ > 0) std::raise(SIGTERM);
    thread_.join();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  LogCapture capture_;
  std::ostream log_stream_{&capture_};
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<uint8_t> bytes_;
  std::unique_ptr<Artifact> artifact_;
  std::thread thread_;
  int port_ = 0;
};

/// A TCP port on loopback that nothing listens on (bound, then released).
uint16_t closedPort() {
  net::io_context io;
  tcp::acceptor a(io, tcp::endpoint(net::ip::address_v4::loopback(), 0));
  uint16_t port = a.local_endpoint().port();
  a.close();
  return port;
}

OnlineBenchOptions smallRun(const std::string& url) {
  OnlineBenchOptions o;
  o.url = url;
  o.num_requests = 8;
  o.concurrency = 4;
  o.prompt_min = 4;
  o.prompt_max = 16;
  o.output_min = 3;
  o.output_max = 6;
  o.seed = 9;
  o.timeout_s = 60;
  return o;
}

TEST(OnlineBench, StreamsEveryRequestAndReadsTheServersBatch) {
  InProcessServer server;
  ASSERT_NO_FATAL_FAILURE(server.start());
  OnlineBenchOptions o = smallRun(server.url());
  o.model = "tiny";
  StatusOr<BenchResult> r = runOnlineBench(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->failed, 0) << r->first_error;
  EXPECT_EQ(r->requests, 8);
  // ignore_eos: every request generates exactly its max_tokens; token-id prompts are sent
  // as they are.
  StatusOr<std::vector<PlannedRequest>> plan = planWorkload(o, o.prompt_vocab);
  ASSERT_TRUE(plan.ok());
  int64_t prompt = 0, output = 0;
  for (const PlannedRequest& p : *plan) prompt += p.prompt.size(), output += p.max_tokens;
  EXPECT_EQ(r->prompt_tokens, prompt);
  EXPECT_EQ(r->generated_tokens, output);
  EXPECT_GT(r->ttft_ms.p50, 0);
  EXPECT_LE(r->ttft_ms.p50, r->ttft_ms.p99);
  EXPECT_GT(r->tpot_ms.p50, 0);
  // Chunks read together (a slow client on a loaded machine) are 0 ms apart, so only the
  // tail is sure to be positive.
  EXPECT_GE(r->itl_ms.p50, 0);
  EXPECT_GT(r->itl_ms.p99, 0);
  EXPECT_LE(r->itl_ms.p50, r->itl_ms.p99);
  EXPECT_GE(r->e2e_ms.p50, r->ttft_ms.p50);
  EXPECT_GT(r->requests_per_s, 0);
  EXPECT_GT(r->output_tokens_per_s, 0);
  EXPECT_GE(r->mean_batch, 1.0);  // from /metrics: at most 4 in flight
  EXPECT_LE(r->mean_batch, 4.0);
  nlohmann::json json = nlohmann::json::parse(benchResultsJson({*r}));
  EXPECT_EQ(json[0]["mode"], "online");
  EXPECT_EQ(json[0]["failed"], 0);

  // Open loop, no cap, then 256 streams at once on the same server.
  o = smallRun(server.url());
  o.concurrency = 0;
  o.request_rate = 100;
  o.num_requests = 10;
  r = runOnlineBench(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->requests, 10);
  EXPECT_EQ(r->failed, 0) << r->first_error;
  EXPECT_GE(r->seconds, poissonArrivals(100, 10, o.seed).back());

  o = smallRun(server.url());
  o.concurrency = 256;
  o.num_requests = 256;
  o.prompt_min = o.prompt_max = 4;
  o.output_min = o.output_max = 2;
  r = runOnlineBench(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->requests, 256);
  EXPECT_EQ(r->failed, 0) << r->first_error;
  EXPECT_EQ(r->generated_tokens, 512);
}

TEST(OnlineBench, CountsHttpErrorsAsFailures) {
  InProcessServer server;
  ASSERT_NO_FATAL_FAILURE(server.start());
  OnlineBenchOptions o = smallRun(server.url());
  o.prompt_min = 8;
  o.prompt_vocab = 1'000'000'000;  // ids past the vocabulary: 400 from the server
  StatusOr<BenchResult> r = runOnlineBench(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->requests, 0);
  EXPECT_EQ(r->failed, 8);
  EXPECT_NE(r->first_error.find("HTTP 400: token id"), std::string::npos) << r->first_error;
}

TEST(OnlineBench, CountsRefusedConnectionsAsFailures) {
  OnlineBenchOptions o = smallRun("http://127.0.0.1:" + std::to_string(closedPort()));
  StatusOr<BenchResult> r = runOnlineBench(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->requests, 0);
  EXPECT_EQ(r->failed, 8);
  EXPECT_NE(r->first_error.find("connect"), std::string::npos) << r->first_error;
  EXPECT_TRUE(std::isnan(r->mean_batch));
}

TEST(OnlineBench, CountsStreamsCutBeforeDoneAsFailures) {
  // A server that answers each completion with one chunk of one event, then hangs up, and
  // has no /metrics (404): the bench reads it once before and once after the run.
  net::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(net::ip::address_v4::loopback(), 0));
  const int requests = 3;
  std::thread fake([&] {
    for (int i = 0; i < requests + 2; ++i) {
      tcp::socket socket(io);
      acceptor.accept(socket);
      boost::beast::flat_buffer buffer;
      boost::beast::http::request<boost::beast::http::string_body> request;
      boost::beast::error_code ec;
      boost::beast::http::read(socket, buffer, request, ec);
      std::string event = "data: {\"choices\":[{\"index\":0,\"text\":\"a\"}]}\n\n";
      std::ostringstream reply;
      if (request.method() == boost::beast::http::verb::get)
        reply << "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
      else
        reply << "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n"
              << std::hex << event.size() << "\r\n" << event << "\r\n";
      net::write(socket, net::buffer(reply.str()), ec);
      socket.shutdown(tcp::socket::shutdown_both, ec);
    }
  });
  OnlineBenchOptions o = smallRun("http://127.0.0.1:" + std::to_string(acceptor.local_endpoint().port()));
  o.num_requests = requests;
  o.concurrency = 1;
  StatusOr<BenchResult> r = runOnlineBench(o);
  fake.join();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->requests, 0);
  EXPECT_EQ(r->failed, requests);
  EXPECT_NE(r->first_error.find("ended before [DONE]"), std::string::npos) << r->first_error;
  EXPECT_TRUE(std::isnan(r->mean_batch));
}

TEST(OnlineBench, ParsesUrlsAndMetrics) {
  StatusOr<HttpEndpoint> e = parseHttpUrl("http://localhost:8123/");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->host, "localhost");
  EXPECT_EQ(e->port, 8123);
  e = parseHttpUrl("http://[::1]:9000");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->host, "::1");
  EXPECT_EQ(parseHttpUrl("http://example.com")->port, 80);
  EXPECT_FALSE(parseHttpUrl("https://example.com").ok());
  EXPECT_FALSE(parseHttpUrl("http://host:99999").ok());
  EXPECT_FALSE(parseHttpUrl("http://host:8000/v1").ok());
  double sum = 0, count = 0;
  EXPECT_TRUE(readHistogramTotals("# TYPE b histogram\nb_bucket{le=\"1\"} 3\nb_sum 7.5\nb_count 4\n",
                                  "b", &sum, &count));
  EXPECT_DOUBLE_EQ(sum, 7.5);
  EXPECT_DOUBLE_EQ(count, 4);
  EXPECT_FALSE(readHistogramTotals("b_sum 1\n", "b", &sum, &count));
}

}  // namespace
}  // namespace ingot
