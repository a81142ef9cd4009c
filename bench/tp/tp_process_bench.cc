// Decode step time of a sharded artifact with ranks as threads vs as processes (same run), and
// how long a killed worker takes to fail the next step.
//
//   tp_process_bench [ARTIFACT] [--steps N] [--threads T] [--batch B] [--nnodes 2]
//
// Without ARTIFACT it writes a TP2 tiny Llama to /tmp and measures that. Steps alternate
// between the backends so all see the same machine load; logits are compared too. With
// --nnodes 2 a third backend runs the ranks as two "nodes" on this host (node 1 a forked
// runWorkerNode, collectives over TCP: TcpProcessGroup) next to the shared-memory ones.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/backend/cpu/tp_cpu_backend.h"
#include "testing/llama_program.h"
#include "testing/step_builder.h"
#include "runtime/backend/tp/multi_process_tp_backend.h"
#include "runtime/backend/tp/worker_node.h"

namespace {

using Clock = std::chrono::steady_clock;
using ingot::Status;

int die(const std::string& what) {
  std::fprintf(stderr, "tp_process_bench: %s\n", what.c_str());
  return 1;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}

ingot::StatusOr<pid_t> forkWorker(const ingot::TpWorkerOptions& w) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    Status s = ingot::runTpWorker(w);
    ::_exit(s.ok() ? 0 : 1);
  }
  if (pid < 0) return ingot::ioError("fork failed");
  return pid;
}

/// A loopback port nobody listens on now.
uint16_t freePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  return ok ? ntohs(a.sin_port) : 0;
}

/// The bench's command line.
struct BenchArgs {
  std::string path;
  int steps = 64, threads = 2, batch = 1, nnodes = 1;
};

/// Node 1 of a two-node group, forked while this process has no threads yet; it waits
/// for node 0.
void startNodeOne(const std::string& path, int world, uint16_t port, int threads) {
  const pid_t node1 = ::fork();
  if (node1 == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ingot::WorkerNodeOptions n;
    n.artifact = path;
    n.world_size = world;
    n.nnodes = 2;
    n.node_rank = 1;
    n.master_addr = "127.0.0.1";
    n.master_port = port;
    n.num_threads = std::max(1, threads / 2);
    n.launch_worker = forkWorker;
    auto code = ingot::runWorkerNode(n, std::cerr);
    ::_exit(code.ok() ? *code : 1);
  }
}

/// The step inputs of every sequence in `seqs` with its remaining tokens.
ingot::StepInputs stepOf(std::vector<ingot::testing::Sequence>& seqs, int block_size) {
  std::vector<ingot::testing::Sequence*> ptrs;
  std::vector<int> counts;
  for (auto& s : seqs) {
    ptrs.push_back(&s);
    counts.push_back(static_cast<int>(s.tokens.size()) - s.done);
  }
  return ingot::testing::makeStep(ptrs, counts, block_size);
}

/// Runs the prefill and `steps` greedy decode steps on every backend, each with its own
/// copy of the sequences; ms[b] gets backend b's decode step times. Returns whether every
/// backend gave the thread ranks' logits bit for bit, or the first step error.
ingot::StatusOr<bool> runSteps(const std::vector<ingot::Backend*>& backends,
                               std::vector<std::vector<ingot::testing::Sequence>>& seqs,
                               int steps, int batch, int block_size, int vocab,
                               std::vector<std::vector<double>>& ms,
                               std::vector<std::vector<float>>& logits) {
  const int kinds = static_cast<int>(backends.size());
  bool identical = true;
  for (int step = 0; step <= steps; ++step) {
    for (int b = 0; b < kinds; ++b) {
      const ingot::StepInputs in = stepOf(seqs[b], block_size);
      const auto start = Clock::now();
      Status st = backends[b]->step(in, &logits[b]);
      const double took = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      if (!st.ok()) return st;
      if (step > 0) ms[b].push_back(took);  // step 0 is the prefill
    }
    for (int b = 1; b < kinds; ++b) identical = identical && logits[0] == logits[b];
    // Greedy next token of each request (its last logit row), from the thread ranks.
    const size_t rows_per_request = logits[0].size() / static_cast<size_t>(vocab) / batch;
    for (int r = 0; r < batch; ++r) {
      const auto row = logits[0].begin() + ((r + 1) * rows_per_request - 1) * vocab;
      const int32_t next = static_cast<int32_t>(std::max_element(row, row + vocab) - row);
      for (auto& s : seqs) s[r].tokens.push_back(next);
    }
  }
  return identical;
}

}  // namespace

int main(int argc, char** argv) {
  BenchArgs args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--steps" && i + 1 < argc) args.steps = std::atoi(argv[++i]);
    else if (a == "--threads" && i + 1 < argc) args.threads = std::atoi(argv[++i]);
    else if (a == "--batch" && i + 1 < argc) args.batch = std::atoi(argv[++i]);
    else if (a == "--nnodes" && i + 1 < argc) args.nnodes = std::atoi(argv[++i]);
    else if (!a.empty() && a[0] != '-') args.path = a;
    else return die("unknown argument '" + a + "'");
  }
  std::string path = args.path;
  const int steps = args.steps, threads = args.threads, batch = args.batch, nnodes = args.nnodes;
  if (steps < 1 || threads < 1 || batch < 1) return die("--steps, --threads, --batch must be >= 1");
  if (nnodes != 1 && nnodes != 2) return die("--nnodes must be 1 or 2");
  bool temporary = false;
  if (path.empty()) {
    ingot::testing::LlamaProgramOptions o;
    o.tp = 2;
    auto bytes = ingot::testing::buildLlamaArtifact(o);
    if (!bytes.ok()) return die(bytes.status().message());
    path = "/tmp/tp_process_bench-" + std::to_string(::getpid()) + ".ingot";
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes->data()), static_cast<std::streamsize>(bytes->size()));
    temporary = true;
  }
  auto artifact = ingot::Artifact::open(path);
  if (!artifact.ok()) return die(artifact.status().message());
  const int block_size = std::max(1, artifact->manifest().config()->kv_block_size());
  const int prompt = 32;
  const int per_seq_blocks = (prompt + steps + block_size) / block_size + 1;

  // Node 1 first (forked while this process has no threads yet); it waits for node 0.
  const uint16_t port = nnodes == 2 ? freePort() : 0;
  const int world = ingot::tensorParallelWorldSize(*artifact);
  if (nnodes == 2) startNodeOne(path, world, port, threads);

  ingot::TpCpuBackendOptions to;
  to.cpu.num_threads = threads;
  to.cpu.num_kv_blocks = per_seq_blocks * batch;
  auto thread_ranks = ingot::TpCpuBackend::create(*artifact, to);
  if (!thread_ranks.ok()) return die(thread_ranks.status().message());
  ingot::MultiProcessTpOptions po;
  po.artifact_path = path;
  po.cpu = to.cpu;
  po.launch_worker = forkWorker;
  auto process_ranks = ingot::MultiProcessTpBackend::create(*artifact, po);
  if (!process_ranks.ok()) return die(process_ranks.status().message());

  std::unique_ptr<ingot::MultiProcessTpBackend> two_nodes;
  if (nnodes == 2) {
    ingot::MultiProcessTpOptions no = po;
    no.master_addr = "127.0.0.1";
    no.master_port = port;
    no.nnodes = 2;
    no.cpu.num_threads = std::max(1, threads / 2);  // node 0's share; node 1 has the rest
    auto b = ingot::MultiProcessTpBackend::create(*artifact, no);
    if (!b.ok()) return die(b.status().message());
    two_nodes = std::move(b).value();
  }

  std::vector<ingot::Backend*> backends = {thread_ranks->get(), process_ranks->get()};
  if (two_nodes) backends.push_back(two_nodes.get());
  const int kinds = static_cast<int>(backends.size());
  std::mt19937 rng(1);
  const int vocab = static_cast<int>(backends[0]->vocabSize());
  std::vector<std::vector<ingot::testing::Sequence>> seqs(kinds, std::vector<ingot::testing::Sequence>(batch));
  for (int r = 0; r < batch; ++r) {
    std::vector<int32_t> tokens(prompt);
    for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % vocab);
    for (auto& s : seqs) {
      s[r].tokens = tokens;
      for (int b = 0; b < per_seq_blocks; ++b) s[r].blocks.push_back(r * per_seq_blocks + b);
    }
  }
  std::vector<std::vector<double>> ms(kinds);
  std::vector<std::vector<float>> logits(kinds);
  ingot::StatusOr<bool> same =
      runSteps(backends, seqs, steps, batch, block_size, vocab, ms, logits);
  if (!same.ok()) return die(same.status().message());
  const bool identical = *same;
  const char* names[3] = {"threads", "processes", "two nodes"};
  std::printf("%s: tp %d, %d threads, batch %d, %d decode steps\n", path.c_str(),
              backends[0]->worldSize(), threads, batch, steps);
  for (int b = 0; b < kinds; ++b)
    std::printf("  %-9s  median %.3f ms/step  mean %.3f ms/step  %.1f tokens/s\n", names[b],
                median(ms[b]), mean(ms[b]), 1000.0 * batch / mean(ms[b]));
  std::printf("  process overhead: %+.1f us/step (median), %+.1f us/step (mean); logits %s\n",
              1000.0 * (median(ms[1]) - median(ms[0])), 1000.0 * (mean(ms[1]) - mean(ms[0])),
              identical ? "bit-identical" : "DIFFER");
  if (two_nodes)
    std::printf("  TCP group (two nodes) vs shm group (processes): %+.1f us/step (median), "
                "%+.1f us/step (mean)\n",
                1000.0 * (median(ms[2]) - median(ms[1])), 1000.0 * (mean(ms[2]) - mean(ms[1])));

  // A worker killed while idle: how long the next step takes to fail.
  auto* mp = static_cast<ingot::MultiProcessTpBackend*>(backends[1]);
  ::kill(mp->workerPid(1), SIGKILL);
  const auto start = Clock::now();
  Status st = mp->step(stepOf(seqs[1], block_size), &logits[1]);
  std::printf("  killed worker: step failed after %.1f ms: %s\n",
              std::chrono::duration<double, std::milli>(Clock::now() - start).count(),
              st.ok() ? "(no error!)" : st.message().c_str());
  if (temporary) std::remove(path.c_str());
  return identical && !st.ok() ? 0 : 1;
}
