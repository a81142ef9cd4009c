// HttpServer: the OpenAI-compatible HTTP front end (Boost.Beast, a fixed pool of I/O threads).
#include "runtime/server/http_server.h"

#include <csignal>
#include <cstdio>
#include <thread>
#include <vector>

#include "runtime/server/http_session.h"

namespace ingot::server {

using tcp = net::ip::tcp;

struct HttpServer::Impl {
  explicit Impl(ServingContext& c)
      : ctx(c), io(std::max(1, c.options.io_threads)), acceptor(net::make_strand(io)),
        signals(io, SIGTERM, SIGINT) {}

  void accept() {
    acceptor.async_accept(net::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (!acceptor.is_open()) return;  // closed for shutdown
      } else {
        std::make_shared<HttpSession>(
            std::move(socket), ctx, [this] { ++active; }, [this] { generationDone(); },
            [this] { return draining.load(); })
            ->start();
      }
      accept();
    });
  }

  void generationDone() {
    if (--active == 0 && draining) finishIfDrained();
  }

  void finishIfDrained() {
    if (active.load() != 0) return;
    net::post(io, [this] { io.stop(); });
  }

  ServingContext& ctx;
  net::io_context io;
  tcp::acceptor acceptor;
  net::signal_set signals;
  std::atomic<int64_t> active{0};  // generations whose response is not yet fully written
  std::atomic<bool> draining{false};
};

HttpServer::HttpServer(ServingContext& context) : impl_(std::make_unique<Impl>(context)) {}
HttpServer::~HttpServer() = default;

Status HttpServer::listen() {
  beast::error_code ec;
  net::ip::address address = net::ip::make_address(impl_->ctx.options.host, ec);
  if (ec) return invalidArgument("bad host '" + impl_->ctx.options.host + "': " + ec.message());
  tcp::endpoint endpoint(address, impl_->ctx.options.port);
  std::string where = impl_->ctx.options.host + ":" + std::to_string(impl_->ctx.options.port);
  tcp::acceptor& a = impl_->acceptor;
  a.open(endpoint.protocol(), ec);
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return invalidArgument("cannot listen on " + where + ": " + ec.message());
  return okStatus();
}

uint16_t HttpServer::port() const {
  beast::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

void HttpServer::run() {
  Impl& s = *impl_;
  s.signals.async_wait([&s](beast::error_code ec, int) {
    if (ec) return;
    // Stop accepting; running generations finish and are written out, then we stop.
    s.draining = true;
    // The acceptor is not thread-safe and its accept handler runs on its strand on another
    // I/O thread: close it there, never beside a running accept handler.
    net::post(s.acceptor.get_executor(), [&s] {
      beast::error_code ignored;
      s.acceptor.close(ignored);
      std::fprintf(stderr, "[ingot serve] draining %lld running request(s)\n",
                   static_cast<long long>(s.active.load()));
      s.finishIfDrained();
    });
  });
  s.accept();
  std::vector<std::thread> threads;
  for (int i = 1; i < std::max(1, s.ctx.options.io_threads); ++i)
    threads.emplace_back([&s] { s.io.run(); });
  s.io.run();
  for (std::thread& t : threads) t.join();
  s.ctx.loop->stopAfterDrain();
}

}  // namespace ingot::server
