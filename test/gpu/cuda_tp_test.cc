// CUDA tensor-parallel ranks (label gpu): a one-rank NCCL group against the plain CUDA
// backend; two CUDA ranks of a TP2 artifact against the CPU ranks of the same artifact — on
// one GPU through host-staged collectives (NCCL refuses two ranks on one device), and with
// 2+ GPUs one rank per GPU over NCCL. Artifacts: $INGOT_GPU_ARTIFACT (unsharded) and
// $INGOT_GPU_TP_ARTIFACT (compiled with --tp 2; scripts/gpu-prepare.sh makes both).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "core/artifact/artifact_reader.h"
#include "runtime/backend/cpu/tp_cpu_backend.h"
#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/backend/cuda/cuda_driver.h"
#include "testing/step_builder.h"
#include "testing/test_seed.h"
#include "runtime/dist/nccl_communicator.h"
#include "runtime/dist/shared_memory_group.h"
#include "runtime/dist/tcp_store.h"

namespace ingot {
namespace {

using std::chrono::milliseconds;
using testing::makeStep;
using testing::Sequence;

/// Max |a - b| over max |b|: bf16 GEMM inputs leave about 1e-2.
double relativeError(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 1e-6;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
  }
  return a.size() == b.size() ? diff / scale : 1e30;
}

/// One rank of ranks that share a GPU: device data staged through host memory into a
/// SharedMemoryGroup rank (the backend has drained its stream before each call).
class StagedCommunicator final : public Communicator {
 public:
  StagedCommunicator(CudaDriver& cu, Communicator* host) : cu_(cu), host_(host) {}
  int rank() const override { return host_->rank(); }
  int worldSize() const override { return host_->worldSize(); }
  Status allReduceSum(float* data, int64_t n) override {
    a_.resize(static_cast<size_t>(n));
    const CUdeviceptr d = reinterpret_cast<CUdeviceptr>(data);
    INGOT_RETURN_IF_ERROR(cu_.check("cuMemcpyDtoH", cu_.memcpyDtoH(a_.data(), d, n * 4)));
    INGOT_RETURN_IF_ERROR(host_->allReduceSum(a_.data(), n));
    return cu_.check("cuMemcpyHtoD", cu_.memcpyHtoD(d, a_.data(), n * 4));
  }
  Status allGather(const float* in, int64_t n, float* out) override {
    a_.resize(static_cast<size_t>(n));
    b_.resize(static_cast<size_t>(n * worldSize()));
    INGOT_RETURN_IF_ERROR(cu_.check(
        "cuMemcpyDtoH", cu_.memcpyDtoH(a_.data(), reinterpret_cast<CUdeviceptr>(in), n * 4)));
    INGOT_RETURN_IF_ERROR(host_->allGather(a_.data(), n, b_.data()));
    return cu_.check("cuMemcpyHtoD", cu_.memcpyHtoD(reinterpret_cast<CUdeviceptr>(out), b_.data(),
                                                    b_.size() * 4));
  }
  Status barrier() override { return host_->barrier(); }
  void abort(const Status& error) override { host_->abort(error); }
  Status groupStatus() const override { return host_->groupStatus(); }

 private:
  CudaDriver& cu_;
  Communicator* host_;
  std::vector<float> a_, b_;
};

class CudaTpGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const Status gpu = cudaDeviceAvailable();
    if (!gpu.ok()) GTEST_SKIP() << "no GPU: " << gpu.message();
    StatusOr<std::unique_ptr<CudaDriver>> cu = CudaDriver::load();
    ASSERT_TRUE(cu.ok()) << cu.status().message();
    cu_ = std::move(cu).value();
    ASSERT_TRUE(cu_->check("cuDeviceGetCount", cu_->deviceGetCount(&gpus_)).ok());
  }
  std::unique_ptr<Artifact> open(const char* env) {
    const char* path = std::getenv(env);
    if (!path) return nullptr;
    StatusOr<Artifact> a = Artifact::open(path);
    EXPECT_TRUE(a.ok()) << a.status().message();
    return a.ok() ? std::make_unique<Artifact>(std::move(a).value()) : nullptr;
  }
  std::unique_ptr<CudaBackend> cuda(const Artifact& a, int device, Communicator* comm, int rank,
                                    int32_t max_graph_batch = 128) {
    CudaBackendOptions o;
    o.max_graph_batch = max_graph_batch;
    o.device = device;
    o.num_kv_blocks = 64;
    o.max_model_len = 512;
    o.kernels.ptx_cache_dir = "none";
    o.communicator = comm;
    o.tp_rank = rank;
    StatusOr<std::unique_ptr<CudaBackend>> b = CudaBackend::create(a, o);
    EXPECT_TRUE(b.ok()) << b.status().message();
    if (!b.ok()) return nullptr;
    std::cout << "[ cuda ] " << (*b)->describe() << "\n";
    return std::move(b).value();
  }
  /// A prefill of two requests, then decode steps; each StepInputs once for every backend.
  std::vector<StepInputs> steps(int64_t vocab, int block_size) {
    std::vector<Sequence> seqs(2);
    for (int r = 0; r < 2; ++r) {
      for (int i = 0; i < 40; ++i) seqs[r].tokens.push_back(static_cast<int32_t>(rng() % vocab));
      seqs[r].blocks = {4 * r + 3, 4 * r + 1, 4 * r + 2};
    }
    std::vector<StepInputs> out = {makeStep({&seqs[0], &seqs[1]}, {24, 17}, block_size)};
    for (int i = 0; i < 6; ++i) out.push_back(makeStep({&seqs[0], &seqs[1]}, {1, 1}, block_size));
    return out;
  }
  /// Runs `ranks` (one per thread, lock-step) over `inputs` and compares rank 0's logits
  /// with the CPU ranks of the same artifact.
  void compareWithCpuRanks(const Artifact& a, std::vector<std::unique_ptr<CudaBackend>>& ranks,
                           const char* what, bool graphs) {
    TpCpuBackendOptions o;
    o.cpu.num_kv_blocks = 64;
    o.cpu.num_threads = 4;
    StatusOr<std::unique_ptr<TpCpuBackend>> cpu = TpCpuBackend::create(a, o);
    ASSERT_TRUE(cpu.ok()) << cpu.status().message();
    const std::vector<StepInputs> inputs =
        steps(a.manifest().config()->vocab_size(), a.manifest().config()->kv_block_size());
    double worst = 0;
    bool replayed = false;
    for (const StepInputs& in : inputs) {
      std::vector<std::vector<float>> got(ranks.size(), std::vector<float>(1, NAN));
      std::vector<Status> status(ranks.size());
      std::vector<std::thread> threads;
      for (size_t r = 0; r < ranks.size(); ++r)
        threads.emplace_back([&, r] { status[r] = ranks[r]->step(in, &got[r]); });
      for (std::thread& t : threads) t.join();
      for (size_t r = 0; r < ranks.size(); ++r) ASSERT_TRUE(status[r].ok()) << status[r].message();
      std::vector<float> want;
      ASSERT_TRUE((*cpu)->step(in, &want).ok());
      worst = std::max(worst, relativeError(got[0], want));
      EXPECT_EQ(got[0], got[1]) << "every rank gathers the same logits";
      replayed |= ranks[0]->lastGraphBucket() > 0;
    }
    // NCCL ranks replay decode graphs with the collectives inside; host-staged collectives
    // keep every step eager.
    EXPECT_EQ(replayed, graphs) << what;
    std::cout << "[ cuda ] " << what << ": max logit error vs CPU ranks " << worst << "\n";
    EXPECT_LT(worst, 3e-2);
  }

  std::unique_ptr<CudaDriver> cu_;
  int gpus_ = 0;
  std::mt19937 rng{ingot::testing::testSeed()};
};

TEST_F(CudaTpGpuTest, OneRankNcclGroupMatchesThePlainCudaBackend) {
  std::unique_ptr<Artifact> a = open("INGOT_GPU_ARTIFACT");
  if (!a) GTEST_SKIP() << "set INGOT_GPU_ARTIFACT to an artifact with CUDA kernels";
  StatusOr<std::unique_ptr<TcpStoreServer>> server = TcpStoreServer::start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status().message();
  StatusOr<std::unique_ptr<TcpStoreClient>> store =
      TcpStoreClient::connect("127.0.0.1", (*server)->port(), milliseconds(10000));
  ASSERT_TRUE(store.ok()) << store.status().message();
  NcclGroupOptions g;
  g.group_name = "one-rank";
  StatusOr<std::unique_ptr<NcclCommunicator>> comm = NcclCommunicator::create(*cu_, **store, g);
  ASSERT_TRUE(comm.ok()) << comm.status().message();
  auto grouped = cuda(*a, 0, comm->get(), 0);
  auto plain = cuda(*a, 0, nullptr, 0);
  ASSERT_TRUE(grouped && plain);
  for (const StepInputs& in :
       steps(a->manifest().config()->vocab_size(), a->manifest().config()->kv_block_size())) {
    std::vector<float> x(1, NAN), y(1, NAN);
    ASSERT_TRUE(grouped->step(in, &x).ok());
    ASSERT_TRUE(plain->step(in, &y).ok());
    EXPECT_LE(relativeError(x, y), 1e-6);
  }
}

TEST_F(CudaTpGpuTest, Tp2RanksOnOneGpuMatchTheCpuRanks) {
  std::unique_ptr<Artifact> a = open("INGOT_GPU_TP_ARTIFACT");
  if (!a) GTEST_SKIP() << "set INGOT_GPU_TP_ARTIFACT to a --tp 2 artifact with CUDA kernels";
  ASSERT_EQ(tensorParallelWorldSize(*a), 2);
  StatusOr<std::unique_ptr<SharedMemoryGroup>> host = SharedMemoryGroup::create(2);
  ASSERT_TRUE(host.ok()) << host.status().message();
  StagedCommunicator c0(*cu_, (*host)->communicator(0)), c1(*cu_, (*host)->communicator(1));
  std::vector<std::unique_ptr<CudaBackend>> ranks;
  ranks.push_back(cuda(*a, 0, &c0, 0));
  ranks.push_back(cuda(*a, 0, &c1, 1));
  ASSERT_TRUE(ranks[0] && ranks[1]);
  compareWithCpuRanks(*a, ranks, "TP2 on one GPU (staged collectives)", false);
}

TEST_F(CudaTpGpuTest, Tp2NcclRanksOnTwoGpusMatchTheCpuRanks) {
  if (gpus_ < 2) GTEST_SKIP() << "needs 2 GPUs (this machine has " << gpus_ << ")";
  std::unique_ptr<Artifact> a = open("INGOT_GPU_TP_ARTIFACT");
  if (!a) GTEST_SKIP() << "set INGOT_GPU_TP_ARTIFACT to a --tp 2 artifact with CUDA kernels";
  StatusOr<std::unique_ptr<TcpStoreServer>> server = TcpStoreServer::start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status().message();
  std::vector<std::unique_ptr<TcpStoreClient>> stores(2);
  std::vector<std::unique_ptr<NcclCommunicator>> comms(2);
  std::vector<Status> made(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      StatusOr<std::unique_ptr<TcpStoreClient>> store =
          TcpStoreClient::connect("127.0.0.1", (*server)->port(), milliseconds(10000));
      if (!store.ok()) { made[r] = store.status(); return; }
      stores[r] = std::move(store).value();
      NcclGroupOptions g;
      g.rank = r;
      g.world_size = 2;
      g.device = r;
      g.group_name = "tp2";
      StatusOr<std::unique_ptr<NcclCommunicator>> c = NcclCommunicator::create(*cu_, *stores[r], g);
      if (c.ok()) comms[r] = std::move(c).value(); else made[r] = c.status();
    });
  for (std::thread& t : threads) t.join();
  for (const Status& s : made) ASSERT_TRUE(s.ok()) << s.message();
  // The ranks' KV pools are given, so creation has no collective and may run in turn.
  std::vector<std::unique_ptr<CudaBackend>> ranks;
  for (int r = 0; r < 2; ++r) ranks.push_back(cuda(*a, r, comms[r].get(), r));
  ASSERT_TRUE(ranks[0] && ranks[1]);
  compareWithCpuRanks(*a, ranks, "TP2 on GPUs 0 and 1 (NCCL, decode graphs)", true);
  // The same group with capture off: every step eager, collectives still stream-ordered.
  ranks.clear();
  for (int r = 0; r < 2; ++r) ranks.push_back(cuda(*a, r, comms[r].get(), r, 0));
  ASSERT_TRUE(ranks[0] && ranks[1]);
  compareWithCpuRanks(*a, ranks, "TP2 on GPUs 0 and 1 (NCCL, graphs off)", false);
}

}  // namespace
}  // namespace ingot
