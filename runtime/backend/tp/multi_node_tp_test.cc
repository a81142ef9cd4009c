// Multi-node tensor parallelism on one host: node 0 here (MultiProcessTpBackend, nnodes 2),
// node 1 as `ingot run ... --nnodes 2 --node-rank 1`; greedy tokens and logits against thread
// ranks, node 1 started first, a killed node 1, a node that never comes, bad flags.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <random>
#include <sstream>
#include <thread>

#include "runtime/backend/cpu/tp_cpu_backend.h"
#include "testing/llama_program.h"
#include "testing/step_builder.h"
#include "runtime/backend/tp/multi_process_tp_backend.h"
#include "runtime/backend/tp/tp_process_test_util.h"
#include "runtime/backend/tp/worker_node.h"
#include "testing/test_seed.h"

namespace ingot {
namespace {

using testing::makeStep;
using testing::Sequence;
using Clock = std::chrono::steady_clock;

constexpr int kBlockSize = 16;
constexpr int64_t kKvBlocks = 32;

using TinyModel = testing::TinyTpModel;

/// A tiny Llama for `tp` ranks in `<TempDir>/multinode-<name>-<pid>.ingot`.
TinyModel writeTiny(int tp, const std::string& name, uint64_t seed) {
  return testing::writeTinyTpModel(tp, seed, kBlockSize, "multinode-" + name);
}

/// A port nobody listens on now (the kernel's pick for a socket bound to port 0).
uint16_t freePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

/// `ingot <args>` with stderr to `err_path`; dies with this test process.
pid_t launchIngot(const std::vector<std::string>& args, const std::string& err_path) {
  std::vector<std::string> full = {INGOT_BINARY};
  full.insert(full.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : full) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) ::dup2(fd, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

/// Node 1 of 2 for `path`, as a user would start it.
pid_t launchNode1(const std::string& path, uint16_t port, const std::string& err_path) {
  return launchIngot({"run", path, "-p", "hello", "--tp-mode", "processes", "--nnodes", "2", "--node-rank", "1",
                      "--master-addr", "127.0.0.1", "--master-port", std::to_string(port),
                      "--threads", "2"},
                     err_path);
}

/// The exit code of `pid` (128 + signal), or -1 if it does not end within `limit`.
int waitExit(pid_t pid, std::chrono::milliseconds limit) {
  const auto give_up = Clock::now() + limit;
  for (;;) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (Clock::now() >= give_up) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

MultiProcessTpOptions node0Options(const TinyModel& model, uint16_t port,
                                   std::chrono::milliseconds timeout) {
  MultiProcessTpOptions o;
  o.artifact_path = model.path;
  o.cpu.num_threads = 2;
  o.cpu.num_kv_blocks = kKvBlocks;
  o.timeout = timeout;
  o.master_addr = "127.0.0.1";
  o.master_port = port;
  o.nnodes = 2;
  o.worker_executable = INGOT_BINARY;  // node 0's own workers (TP4: rank 1)
  return o;
}

int32_t argmaxOfLastRow(const std::vector<float>& logits, int64_t vocab) {
  const float* row = logits.data() + logits.size() - static_cast<size_t>(vocab);
  return static_cast<int32_t>(std::max_element(row, row + vocab) - row);
}

/// Node 1 started first, then node 0 here: greedy decoding through the two nodes gives the
/// tokens (and logits, bit for bit) of thread ranks; node 1 exits 0 when node 0 shuts down.
void expectGreedyTokensOfThreadRanks(int tp) {
  const uint32_t seed = ingot::testing::testSeed();
  TinyModel model = writeTiny(tp, "greedy" + std::to_string(tp), seed);
  const uint16_t port = freePort();
  const std::string err_path = model.path + ".node1.err";
  const pid_t node1 = launchNode1(model.path, port, err_path);
  ASSERT_GT(node1, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // node 1 waits for node 0

  auto nodes = MultiProcessTpBackend::create(model.artifact,
                                             node0Options(model, port, std::chrono::seconds(30)));
  ASSERT_TRUE(nodes.ok()) << nodes.status().message() << "\nnode 1: " << readFile(err_path);
  ASSERT_EQ((*nodes)->worldSize(), tp);
  TpCpuBackendOptions t;
  t.cpu.num_threads = 2;
  t.cpu.num_kv_blocks = kKvBlocks;
  auto threads = TpCpuBackend::create(model.artifact, t);
  ASSERT_TRUE(threads.ok()) << threads.status().message();

  std::mt19937 rng(seed);
  const int64_t vocab = (*threads)->vocabSize();
  Sequence a, b;
  a.tokens.resize(9);
  for (int32_t& x : a.tokens) x = static_cast<int32_t>(rng() % vocab);
  a.blocks = {0, 1};
  b = a;
  std::vector<Sequence*> on_nodes = {&a}, on_threads = {&b};
  std::vector<int32_t> got, want;
  for (int step = 0; step < 14; ++step) {
    const int count = step == 0 ? static_cast<int>(a.tokens.size()) : 1;
    const StepInputs in_a = makeStep(on_nodes, {count}, kBlockSize);
    const StepInputs in_b = makeStep(on_threads, {count}, kBlockSize);
    const size_t n = in_a.logit_rows.size() * static_cast<size_t>(vocab);
    std::vector<float> la(n, std::numeric_limits<float>::quiet_NaN()), lb = la;
    Status sa = (*nodes)->step(in_a, &la);
    Status sb = (*threads)->step(in_b, &lb);
    ASSERT_TRUE(sa.ok()) << "step " << step << ": " << sa.message();
    ASSERT_TRUE(sb.ok()) << "step " << step << ": " << sb.message();
    for (float x : la) ASSERT_TRUE(std::isfinite(x)) << "step " << step << ": unwritten logits";
    EXPECT_EQ(std::memcmp(la.data(), lb.data(), n * sizeof(float)), 0)
        << "step " << step << ": two nodes differ from thread ranks";
    got.push_back(argmaxOfLastRow(la, vocab));
    want.push_back(argmaxOfLastRow(lb, vocab));
    a.tokens.push_back(got.back());
    b.tokens.push_back(want.back());
  }
  EXPECT_EQ(got, want);
  nodes->reset();  // shutdown: node 1's ranks exit, then node 1
  EXPECT_EQ(waitExit(node1, std::chrono::seconds(10)), 0) << readFile(err_path);
  const std::string log = readFile(err_path);
  const std::string ranks = tp == 2 ? "rank 1 runs" : "ranks 2..3 run";
  EXPECT_NE(log.find("node 1 of 2: tensor-parallel " + ranks + " (of " + std::to_string(tp) + ")"),
            std::string::npos) << log;
  EXPECT_NE(log.find("no engine and no HTTP server on this node"), std::string::npos) << log;
  std::remove(err_path.c_str());
  std::remove(model.path.c_str());
}

TEST(MultiNodeTp, TwoNodesTp2GiveTheGreedyTokensOfThreadRanks) { expectGreedyTokensOfThreadRanks(2); }
TEST(MultiNodeTp, TwoNodesTp4GiveTheGreedyTokensOfThreadRanks) { expectGreedyTokensOfThreadRanks(4); }

TEST(MultiNodeTp, KilledNode1FailsNode0NamingTheRankAndNode) {
  TinyModel model = writeTiny(2, "kill", 5);
  const uint16_t port = freePort();
  const std::string err_path = model.path + ".node1.err";
  const pid_t node1 = launchNode1(model.path, port, err_path);
  auto nodes = MultiProcessTpBackend::create(model.artifact,
                                             node0Options(model, port, std::chrono::seconds(30)));
  ASSERT_TRUE(nodes.ok()) << nodes.status().message() << "\nnode 1: " << readFile(err_path);
  Sequence s;
  s.tokens = {1, 2, 3, 4};
  s.blocks = {0};
  std::vector<Sequence*> one = {&s};
  std::vector<float> logits;
  ASSERT_TRUE((*nodes)->step(makeStep(one, {4}, kBlockSize), &logits).ok());
  ASSERT_EQ(::kill(node1, SIGKILL), 0);  // node 1's rank dies with it (parent-death signal)
  EXPECT_EQ(waitExit(node1, std::chrono::seconds(5)), 128 + SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  s.tokens.push_back(5);
  const auto start = Clock::now();
  Status failed = (*nodes)->step(makeStep(one, {1}, kBlockSize), &logits);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  ASSERT_FALSE(failed.ok());
  std::cerr << "node 0 reports, " << ms << " ms after the step began: " << failed.message() << "\n";
  EXPECT_NE(failed.message().find("rank 1 (node 1"), std::string::npos) << failed.message();
  EXPECT_LT(ms, 5000.0) << "noticed by the closed connection, not the 30 s timeout";
  // Broken for good: the next call fails at once with the same error.
  s.tokens.push_back(6);
  EXPECT_EQ((*nodes)->step(makeStep(one, {1}, kBlockSize), &logits).message(), failed.message());
  std::remove(err_path.c_str());
  std::remove(model.path.c_str());
}

TEST(MultiNodeTp, RankOfAnotherNodeThatDiesBeforeJoiningFailsNode0AtOnceNamingIt) {
  TinyModel model = writeTiny(2, "crash", 7);
  const uint16_t port = freePort();
  WorkerNodeOptions w;
  w.artifact = model.path;
  w.world_size = 2;
  w.nnodes = 2;
  w.node_rank = 1;
  w.master_addr = "127.0.0.1";
  w.master_port = port;
  w.timeout = std::chrono::seconds(10);
  // Node 1's rank crashes before it joins (as a driver that faults at load would).
  w.launch_worker = [](const TpWorkerOptions&) -> StatusOr<pid_t> {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::usleep(200 * 1000);
      ::raise(SIGKILL);
      ::_exit(1);
    }
    return pid;
  };
  std::ostringstream log;
  StatusOr<int> node1_code = internalError("node 1 did not run");
  std::thread node1([&] { node1_code = runWorkerNode(w, log); });
  const auto start = Clock::now();
  auto nodes = MultiProcessTpBackend::create(model.artifact,
                                             node0Options(model, port, std::chrono::seconds(30)));
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  node1.join();
  ASSERT_FALSE(nodes.ok());
  const std::string& m = nodes.status().message();
  std::cerr << "node 0 reports, " << ms << " ms after it started: " << m << "\n";
  EXPECT_NE(m.find("tp rank 1 (node 1): its process (pid "), std::string::npos) << m;
  EXPECT_NE(m.find("was killed by signal 9"), std::string::npos) << m;
  EXPECT_NE(m.find("reported by node 1"), std::string::npos) << m;
  EXPECT_LT(ms, 5000.0) << "the notice, not the 30 s timeout, must end node 0's join";
  ASSERT_TRUE(node1_code.ok()) << node1_code.status().message();
  EXPECT_EQ(*node1_code, 128 + SIGKILL);
  EXPECT_NE(log.str().find("tp rank 1 (pid"), std::string::npos) << log.str();
  std::remove(model.path.c_str());
}

TEST(MultiNodeTp, Node0NamesTheRanksAndNodeThatNeverCame) {
  TinyModel model = writeTiny(4, "absent", 9);
  auto nodes = MultiProcessTpBackend::create(
      model.artifact, node0Options(model, freePort(), std::chrono::milliseconds(1500)));
  ASSERT_FALSE(nodes.ok());
  EXPECT_NE(nodes.status().message().find("rank 2 (node 1), rank 3 (node 1) did not connect within"),
            std::string::npos) << nodes.status().message();
  std::remove(model.path.c_str());
}

TEST(MultiNodeTp, WorkerNodeGivesUpOnANode0ThatNeverStarts) {
  WorkerNodeOptions o;
  o.artifact = "unused.ingot";
  o.world_size = 2;
  o.master_addr = "127.0.0.1";
  o.master_port = freePort();
  o.timeout = std::chrono::milliseconds(600);
  std::ostringstream log;
  const auto start = Clock::now();
  StatusOr<int> code = runWorkerNode(o, log);
  ASSERT_FALSE(code.ok());
  EXPECT_NE(code.status().message().find("node 1: node 0's store did not answer within 600 ms"),
            std::string::npos) << code.status().message();
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  EXPECT_GE(ms, 500.0);
}

TEST(MultiNodeTp, WorkerSpecRoundTripsAndRefusesMissingFields) {
  TpWorkerOptions w;
  w.world_size = 8;
  w.nnodes = 2;
  w.num_kv_blocks = 123;
  w.kv_dtype = "fp8";
  w.timeout = std::chrono::milliseconds(4567);
  w.chunk_floats = 999;
  w.gpu = 3;
  w.gpu_memory_utilization = 0.85;
  w.max_model_len = 2048;
  TpWorkerOptions back;
  ASSERT_TRUE(decodeWorkerSpec(encodeWorkerSpec(w), &back).ok());
  EXPECT_EQ(back.world_size, 8);
  EXPECT_EQ(back.nnodes, 2);
  EXPECT_EQ(back.num_kv_blocks, 123);
  EXPECT_EQ(back.kv_dtype, "fp8");
  EXPECT_EQ(back.timeout.count(), 4567);
  EXPECT_EQ(back.chunk_floats, 999);
  EXPECT_GE(back.gpu, 0);
  EXPECT_EQ(back.gpu_memory_utilization, 0.85);
  EXPECT_EQ(back.max_model_len, 2048);
  std::vector<uint8_t> spec = encodeWorkerSpec(w);
  std::string text(spec.begin(), spec.end());
  text.erase(text.find("chunk_floats"), text.find('\n', text.find("chunk_floats")) - text.find("chunk_floats") + 1);
  Status missing = decodeWorkerSpec(std::vector<uint8_t>(text.begin(), text.end()), &back);
  EXPECT_NE(missing.message().find("no 'chunk_floats'"), std::string::npos) << missing.message();
}

TEST(MultiNodeTp, CliRefusesANodeCountThatDoesNotDivideTheRanks) {
  TinyModel model = writeTiny(2, "divide", 3);
  const std::string err_path = model.path + ".err";
  const pid_t pid = launchIngot({"run", model.path, "-p", "x", "--tp-mode", "processes", "--nnodes", "3",
                                 "--node-rank", "1", "--master-addr", "127.0.0.1",
                                 "--master-port", "29999"},
                                err_path);
  EXPECT_EQ(waitExit(pid, std::chrono::seconds(20)), 1);
  const std::string err = readFile(err_path);
  EXPECT_NE(err.find("--nnodes 3 does not divide the 2 tensor-parallel ranks"), std::string::npos)
      << err;
  const pid_t no_master = launchIngot({"run", model.path, "-p", "x", "--tp-mode", "processes", "--nnodes",
                                       "2", "--node-rank", "1", "--master-port", "29999"},
                                      err_path);
  EXPECT_EQ(waitExit(no_master, std::chrono::seconds(20)), 1);
  EXPECT_NE(readFile(err_path).find("--node-rank 1 needs --master-addr"), std::string::npos)
      << readFile(err_path);
  std::remove(err_path.c_str());
  std::remove(model.path.c_str());
}

}  // namespace
}  // namespace ingot
