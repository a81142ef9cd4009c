// A CUDA tensor-parallel rank with NCCL on the CPU: decode graphs with the collectives inside.
//
// A TP2 tiny Llama rank over the fake libcuda + libnccl (testing/cuda/nccl_fake_driver.cc,
// loaded as libcuda.so.1) and the fake libcublasLt, with a real NcclCommunicator. The fake
// records stream work made during a capture into the graph and runs it at each launch, and
// its NCCL group mirrors this rank (a sum doubles, a gather repeats the slice), so the data a
// replayed step moves can be compared with an eager step's. Checked: decode steps capture and
// replay graphs that run the collectives in program order on the same inputs and give the
// same logits as eager steps; a hung collective fails the step within the group's timeout
// naming it and aborts NCCL; a peer NCCL reports dead fails the step long before it.
#include <dlfcn.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/backend/cuda/cuda_backend.h"
#include "testing/cuda/fake_cuda_test.h"
#include "testing/cuda/fake_libcuda.h"
#include "testing/llama_program.h"
#include "testing/step_builder.h"
#include "testing/test_seed.h"
#include "runtime/dist/nccl_communicator.h"
#include "runtime/dist/tcp_store.h"

namespace ingot {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using testing::makeStep;
using testing::Sequence;

/// One collective that ran on the fake device, as the fake NCCL logged it.
struct RanCollective {
  std::string name;
  unsigned count = 0, input_hash = 0, ranks = 0;
  bool from_graph = false;
};

class CudaBackendTpGraphFakeTest : public FakeCudaTest {
 protected:
  void SetUp() override {
    FakeCudaTest::SetUp();
    ::setenv("INGOT_NCCL_LIBRARY", INGOT_FAKE_LIBCUDA, 1);
    setModes_ = reinterpret_cast<void (*)(int, int)>(::dlsym(driver_, "fakeSetModes"));
    aborts_ = reinterpret_cast<int (*)()>(::dlsym(driver_, "fakeAborts"));
    abortHangs_ = reinterpret_cast<int (*)()>(::dlsym(driver_, "fakeAbortHangs"));
    ASSERT_NE(setModes_, nullptr);
    setModes_(0, 0);
    if (!driver) {
      auto loaded = CudaDriver::load();
      ASSERT_TRUE(loaded.ok()) << loaded.status().message();
      driver = std::move(loaded).value();
    }
    if (!server) {
      auto started = TcpStoreServer::start("127.0.0.1", 0);
      ASSERT_TRUE(started.ok()) << started.status().message();
      server = std::move(started).value();
      auto client = TcpStoreClient::connect("127.0.0.1", server->port(), milliseconds(5000));
      ASSERT_TRUE(client.ok()) << client.status().message();
      store = std::move(client).value();
    }
  }
  /// Resets the fakes' logs and counters between steps (not the NCCL modes).
  void resetFakes() { FakeCudaTest::SetUp(); }

  void build() {
    o.tp = 2;
    o.fake_cuda_kernels = true;
    o.seed = rng();
    StatusOr<std::vector<uint8_t>> bytes = testing::buildLlamaArtifact(o);
    ASSERT_TRUE(bytes.ok()) << bytes.status().message();
    bytes_ = std::move(bytes).value();
    StatusOr<Artifact> a = Artifact::openFromMemory(bytes_);
    ASSERT_TRUE(a.ok()) << a.status().message();
    artifact = std::make_unique<Artifact>(std::move(a).value());
  }
  /// Rank 0 of a 2-rank NCCL group (the fake needs no peer to form it).
  StatusOr<std::unique_ptr<NcclCommunicator>> group(milliseconds timeout) {
    NcclGroupOptions g;
    g.rank = 0;
    g.world_size = 2;
    g.timeout = timeout;
    g.group_name = "tp-graph-" + std::to_string(next_group_++);
    return NcclCommunicator::create(*driver, *store, g);
  }
  StatusOr<std::unique_ptr<CudaBackend>> rank0(Communicator* comm, int32_t max_graph_batch) {
    CudaBackendOptions options;
    options.num_kv_blocks = 64;
    options.max_model_len = 256;
    options.max_graph_batch = max_graph_batch;
    options.kernels.ptx_cache_dir = "none";
    options.tp_rank = 0;
    options.communicator = comm;
    return CudaBackend::create(*artifact, options);
  }
  std::vector<RanCollective> ranCollectives() {
    auto count = reinterpret_cast<FakeCudaLaunchCountFn>(::dlsym(driver_, "fakeCudaLaunchCount"));
    auto entry = reinterpret_cast<FakeCudaLaunchFn>(::dlsym(driver_, "fakeCudaLaunch"));
    std::vector<RanCollective> ran;
    for (int i = 0; i < count(); ++i) {
      unsigned dims[6];
      int fromGraph = 0;
      const std::string name = entry(i, dims, &fromGraph);
      if (name.rfind("nccl", 0) != 0) continue;
      ran.push_back({name, dims[0], dims[1], dims[2], fromGraph != 0});
    }
    return ran;
  }
  void fillGemmOutputs(uint64_t seed) {
    reinterpret_cast<void (*)(uint64_t)>(::dlsym(blas_, "fakeCublasLtSetFillSeed"))(seed);
  }
  std::vector<int32_t> randomTokens(int n) {
    std::vector<int32_t> t(n);
    for (int32_t& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(o.vocab));
    return t;
  }
  /// Gives `seq` 16 random tokens in block 4, prefills 10 of them, then decodes twice at
  /// batch 1 (a warm-up at the bucket's shape, then the capture): `b` then holds the captured
  /// batch-1 decode graph. Call through ASSERT_NO_FATAL_FAILURE.
  void captureBatchOneGraph(CudaBackend& b, Sequence* seq, std::vector<float>* logits) {
    seq->tokens = randomTokens(16);
    seq->blocks = {4};
    ASSERT_TRUE(b.step(makeStep({seq}, {10}, o.block_size), logits).ok());
    for (int i = 0; i < 2; ++i)
      ASSERT_TRUE(b.step(makeStep({seq}, {1}, o.block_size), logits).ok());
    ASSERT_EQ(b.lastGraphBucket(), 1);
  }

  testing::LlamaProgramOptions o;
  std::unique_ptr<Artifact> artifact;
  std::mt19937 rng{ingot::testing::testSeed()};
  void (*setModes_)(int init, int collective) = nullptr;
  int (*aborts_)() = nullptr;
  int (*abortHangs_)() = nullptr;  // aborts that found live graphs (NCCL 2.26+ would hang)
  inline static std::unique_ptr<CudaDriver> driver;
  inline static std::unique_ptr<TcpStoreServer> server;
  inline static std::unique_ptr<TcpStoreClient> store;

 private:
  std::vector<uint8_t> bytes_;
  inline static int next_group_ = 0;
};

TEST_F(CudaBackendTpGraphFakeTest, DecodeGraphsReplayTheCollectivesInOrderWithEagerLogits) {
  build();
  auto graphComm = group(milliseconds(5000));
  auto eagerComm = group(milliseconds(5000));
  ASSERT_TRUE(graphComm.ok() && eagerComm.ok()) << graphComm.status().message();
  auto graphs = rank0(graphComm->get(), 8);
  auto eager = rank0(eagerComm->get(), 0);  // capture off: every step eager
  ASSERT_TRUE(graphs.ok()) << graphs.status().message();
  ASSERT_TRUE(eager.ok()) << eager.status().message();
  EXPECT_NE((*graphs)->describe().find("collectives on the compute stream"), std::string::npos)
      << (*graphs)->describe();

  // Both ranks see the same requests: a prefill, then decode steps of two requests (bucket 2:
  // the first runs eagerly at the bucket's shape, the second is captured, the rest replay).
  std::vector<Sequence> seqs(2);
  for (int r = 0; r < 2; ++r) {
    seqs[r].tokens = randomTokens(20);
    seqs[r].blocks = {3 * r + 1, 3 * r + 2};
  }
  std::vector<Sequence*> all = {&seqs[0], &seqs[1]};
  const int64_t V = o.vocab, W = V / 2;
  const std::vector<int32_t> expectedBucket = {0, -2, 2, 2, 2};
  const size_t collectives = static_cast<size_t>(1 + 2 * o.layers + 1);
  for (size_t stepIndex = 0; stepIndex < expectedBucket.size(); ++stepIndex) {
    const std::vector<int> counts =
        stepIndex == 0 ? std::vector<int>{7, 5} : std::vector<int>{1, 1};
    const StepInputs in = makeStep(all, counts, o.block_size);
    const size_t L = in.logit_rows.size();
    // A fresh seed per step: a replay that moved stale data would not match.
    const uint64_t seed = rng() | 1u;
    std::vector<float> logits[2];
    std::vector<RanCollective> ran[2];
    for (int b = 0; b < 2; ++b) {
      CudaBackend& backend = b == 0 ? **eager : **graphs;
      resetFakes();
      fillGemmOutputs(seed);
      logits[b].assign(L * V, std::numeric_limits<float>::quiet_NaN());
      Status st = backend.step(in, &logits[b]);
      ASSERT_TRUE(st.ok()) << "step " << stepIndex << ": " << st.message();
      ran[b] = ranCollectives();
      if (b == 0) {
        EXPECT_EQ(backend.lastGraphBucket(), 0);
        EXPECT_EQ(stats().captures, 0) << "capture off";
      } else {
        EXPECT_EQ(backend.lastGraphBucket(), expectedBucket[stepIndex]) << "step " << stepIndex;
        EXPECT_EQ(stats().captures, stepIndex == 2 ? 1 : 0) << "step " << stepIndex;
        EXPECT_EQ(stats().graphLaunches, expectedBucket[stepIndex] > 0 ? 1 : 0);
      }
    }
    // The vocab-parallel embedding sum, per layer the o_proj and down_proj sums, then the
    // gather of the head's slices: in that order, every one run by the replayed graph.
    ASSERT_EQ(ran[0].size(), collectives) << "step " << stepIndex;
    ASSERT_EQ(ran[1].size(), collectives) << "step " << stepIndex;
    for (size_t c = 0; c < collectives; ++c) {
      const bool gather = c + 1 == collectives;
      EXPECT_EQ(ran[1][c].name, gather ? "ncclAllGather" : "ncclAllReduce") << c;
      EXPECT_EQ(ran[1][c].name, ran[0][c].name) << c;
      EXPECT_EQ(ran[1][c].count, ran[0][c].count) << c;
      EXPECT_EQ(ran[1][c].ranks, 2u);
      EXPECT_EQ(ran[1][c].from_graph, expectedBucket[stepIndex] > 0) << "step " << stepIndex;
      // Each sum's input is what the GEMM before it wrote in this very step (the first one
      // follows the embedding kernel, which the fake does not run).
      if (c > 0)
        EXPECT_EQ(ran[1][c].input_hash, ran[0][c].input_hash)
            << "step " << stepIndex << ", collective " << c << " saw other data than eager";
    }
    EXPECT_EQ(ran[1].back().count, static_cast<unsigned>(L * W)) << "this rank's [L, V/2] slice";
    // Same logits bit for bit; the mirrored gather puts this rank's slice in both halves.
    bool nonzero = false;
    for (size_t t = 0; t < L; ++t)
      for (int64_t j = 0; j < V; ++j) {
        const float g = logits[1][t * V + j];
        ASSERT_FALSE(std::isnan(g)) << "row " << t << ", column " << j << " never written";
        ASSERT_EQ(std::memcmp(&g, &logits[0][t * V + j], 4), 0)
            << "step " << stepIndex << ", row " << t << ", column " << j;
        if (j < W) ASSERT_EQ(g, logits[1][t * V + W + j]) << "row " << t << ", column " << j;
        nonzero |= g != 0.0f;
      }
    EXPECT_TRUE(nonzero) << "the head GEMM's values must reach the logits";
  }
}

TEST_F(CudaBackendTpGraphFakeTest, HungCollectiveInAReplayedGraphFailsWithinTheTimeoutAndAborts) {
  build();
  auto comm = group(milliseconds(300));
  ASSERT_TRUE(comm.ok()) << comm.status().message();
  auto made = rank0(comm->get(), 8);
  ASSERT_TRUE(made.ok()) << made.status().message();
  CudaBackend& b = **made;
  Sequence seq;
  std::vector<float> logits;
  ASSERT_NO_FATAL_FAILURE(captureBatchOneGraph(b, &seq, &logits));

  setModes_(0, 1);  // the peer never arrives: the graph's first collective never completes
  const int aborts = aborts_();
  const auto start = Clock::now();
  Status st = b.step(makeStep({&seq}, {1}, o.block_size), &logits);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(b.stepStarted());
  EXPECT_GE(seconds, 0.29);
  EXPECT_LT(seconds, 3.0);
  EXPECT_NE(st.message().find("tp rank 0 step (decode graph of batch 1)"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("did not complete within 300 ms"), std::string::npos)
      << st.message();
  // The abort runs on the communicator's own thread and ends once the backend has dropped
  // the graphs that captured the collectives (as NCCL 2.26+ does): promptly, never a hang.
  const int hangs = abortHangs_();
  const auto aborting = Clock::now();
  while (aborts_() == aborts && Clock::now() - aborting < std::chrono::seconds(3))
    std::this_thread::sleep_for(milliseconds(1));
  const double abortMs =
      std::chrono::duration<double, std::milli>(Clock::now() - aborting).count();
  std::printf("[ measured ] NCCL abort finished %.2f ms after the failed step returned\n", abortMs);
  EXPECT_EQ(aborts_(), aborts + 1) << "NCCL aborted, so its kernels exit";
  EXPECT_EQ(abortHangs_(), hangs) << "the abort found the captured graphs still alive";
  EXPECT_LT(abortMs, 500.0);
  // Broken for good: the next step fails at once with the same error.
  setModes_(0, 0);
  const auto again = Clock::now();
  EXPECT_EQ(b.step(makeStep({&seq}, {1}, o.block_size), &logits).message(), st.message());
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - again).count(), 0.25);
}

TEST_F(CudaBackendTpGraphFakeTest, PeerThatNcclReportsDeadFailsTheStepLongBeforeTheTimeout) {
  build();
  auto comm = group(milliseconds(20000));
  ASSERT_TRUE(comm.ok()) << comm.status().message();
  auto made = rank0(comm->get(), 8);
  ASSERT_TRUE(made.ok()) << made.status().message();
  Sequence seq;
  seq.tokens = randomTokens(9);
  seq.blocks = {2};
  std::vector<float> logits;
  setModes_(0, 2);  // ncclRemoteError a few polls after the first collective
  const auto start = Clock::now();
  Status st = (*made)->step(makeStep({&seq}, {9}, o.block_size), &logits);
  ASSERT_FALSE(st.ok());
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 2.0);
  EXPECT_NE(st.message().find("tp rank 0 step (eager, 9 tokens)"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("remote process exited"), std::string::npos) << st.message();
}

TEST_F(CudaBackendTpGraphFakeTest, AbortBetweenStepsEndsOnceTheNextStepDropsTheGraphs) {
  // A watcher thread aborts the group (a worker died) while this rank holds captured graphs
  // and runs no step: the abort waits for them (NCCL 2.26+), and the next step must fail
  // at once with the group's error, replay nothing and drop them, so the abort ends.
  build();
  auto comm = group(milliseconds(300));
  ASSERT_TRUE(comm.ok()) << comm.status().message();
  auto made = rank0(comm->get(), 8);
  ASSERT_TRUE(made.ok()) << made.status().message();
  CudaBackend& b = **made;
  Sequence seq;
  std::vector<float> logits;
  ASSERT_NO_FATAL_FAILURE(captureBatchOneGraph(b, &seq, &logits));
  ASSERT_GT(stats().liveGraphExecs, 0);
  const int aborts = aborts_(), hangs = abortHangs_(), launches = stats().graphLaunches;
  std::thread watcher([&] { (*comm)->abort(internalError("tp rank 1 (pid 42) exited")); });
  watcher.join();
  const auto start = Clock::now();
  Status st = b.step(makeStep({&seq}, {1}, o.block_size), &logits);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 0.25);
  EXPECT_NE(st.message().find("tp rank 1 (pid 42) exited"), std::string::npos) << st.message();
  EXPECT_EQ(stats().graphLaunches, launches) << "a graph replayed on an aborted group";
  EXPECT_EQ(stats().liveGraphExecs, 0);
  while (aborts_() == aborts && Clock::now() - start < std::chrono::seconds(3))
    std::this_thread::sleep_for(milliseconds(1));
  EXPECT_EQ(aborts_(), aborts + 1);
  EXPECT_EQ(abortHangs_(), hangs) << "the abort found the captured graphs still alive";
}

}  // namespace
}  // namespace ingot
