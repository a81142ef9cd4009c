// TcpStore: a small key-value store served by rank 0 over TCP, for bootstrapping a group.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/base/status.h"

namespace ingot {

/// Longest key the store accepts, in bytes. Keys are short names ("nccl/unique_id").
constexpr size_t kTcpStoreMaxKeyBytes = 4096;
/// Largest value the store accepts, in bytes. The store carries bootstrap data (a 128-byte
/// NCCL unique id, small plans), never tensors; a length above this on the wire is treated
/// as a corrupt frame rather than an allocation request.
constexpr uint64_t kTcpStoreMaxValueBytes = 64ull << 20;

/// The server half: holds the key-value map and answers clients, one thread per connection
/// (a group has one connection per rank). A `get` for a key not yet set waits on the server
/// until the key is set or the client's timeout passes, so clients do not poll.
class TcpStoreServer {
 public:
  /// Listens on `bindAddress`:`port` ("0.0.0.0" for every interface; port 0 picks a free
  /// port, see port()). Errors name the address.
  static StatusOr<std::unique_ptr<TcpStoreServer>> start(const std::string& bindAddress,
                                                          uint16_t port);
  /// Stops: closes the listener and every connection (clients waiting in `get` see the
  /// peer close), then joins the threads.
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  /// The port actually listened on (the chosen one when started with port 0).
  uint16_t port() const { return port_; }
  /// Same as the destructor; idempotent.
  void stop();

 private:
  TcpStoreServer() = default;
  void acceptLoop();
  void serve(int fd);
  /// Drops finished connection threads (called from the accept loop).
  void reapFinished();

  struct Connection {
    int fd = -1;
    std::thread thread;
    std::atomic<bool> done{false};
  };

  int listenFd_ = -1;
  int wakeFd_ = -1;  // eventfd that wakes the accept loop on stop()
  uint16_t port_ = 0;
  std::string address_;
  std::thread acceptThread_;

  std::mutex mu_;  // guards everything below
  std::condition_variable keySet_;
  bool stopping_ = false;
  std::map<std::string, std::vector<uint8_t>> values_;
  std::vector<std::unique_ptr<Connection>> connections_;
};

/// The client half: one TCP connection to the server, used by one rank. Calls are
/// serialized (one request in flight). Every error names the server address and the key.
class TcpStoreClient {
 public:
  /// Connects to `host`:`port`, retrying with exponential backoff (the server may not be up
  /// yet) until `timeout` passes.
  static StatusOr<std::unique_ptr<TcpStoreClient>> connect(const std::string& host,
                                                           uint16_t port,
                                                           std::chrono::milliseconds timeout);
  ~TcpStoreClient();
  TcpStoreClient(const TcpStoreClient&) = delete;
  TcpStoreClient& operator=(const TcpStoreClient&) = delete;

  /// Stores `value` under `key`, replacing an earlier value; waiting `get`s return it.
  Status set(const std::string& key, const std::vector<uint8_t>& value,
             std::chrono::milliseconds timeout = std::chrono::seconds(30));
  /// The value under `key`, waiting until some client sets it or `timeout` passes.
  StatusOr<std::vector<uint8_t>> get(const std::string& key, std::chrono::milliseconds timeout);

  /// "host:port", for messages.
  const std::string& address() const { return address_; }

 private:
  TcpStoreClient(int fd, std::string address) : fd_(fd), address_(std::move(address)) {}
  Status checkKey(const char* op, const std::string& key) const;

  int fd_ = -1;
  std::string address_;
  std::mutex mu_;
};

/// One rank's way into its group's store: rank 0 serves it on `port` on every interface,
/// and every rank, rank 0 included, connects to `master_addr`:`port` (so rank 0 finds a
/// wrong address as soon as the others would).
struct RankStore {
  std::unique_ptr<TcpStoreServer> server;  // rank 0 only; keep it while the group forms
  std::unique_ptr<TcpStoreClient> client;
};

/// Starts (rank 0) and joins (everyone) the store at `master_addr`:`port`, the addresses
/// `--master-addr` and `--master-port` name; other ranks retry until `timeout`, since rank
/// 0 may start later than they do.
StatusOr<RankStore> joinTcpStore(int rank, const std::string& master_addr, uint16_t port,
                                 std::chrono::milliseconds timeout);

}  // namespace ingot
