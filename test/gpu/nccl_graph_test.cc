// NCCL collectives enqueued on a stream and captured in CUDA graphs, on a real GPU (label gpu).
//
// A one-rank NcclCommunicator (any machine with one GPU and NCCL): the stream-ordered
// all_gather and all_reduce, followed by a copy on the same stream, run eagerly and as a
// captured graph replayed on fresh inputs give the same bytes; the one bounded wait at the
// end, its cost per step, and an abort that ends it at once. Skips, saying why, without a
// driver, a device or NCCL.
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <random>

#include <gtest/gtest.h>

#include "runtime/backend/cuda/cuda_driver.h"
#include "testing/test_seed.h"
#include "runtime/dist/nccl_communicator.h"
#include "runtime/dist/tcp_store.h"
#include "test/gpu/kernel_target.h"

namespace ingot {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

/// Replays timed for the per-step cost.
constexpr int kTimedSteps = 200;

std::vector<float> randomFloats(std::mt19937& rng, size_t n) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

class NcclGraphGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cuda = CudaDriver::load();
    if (!cuda.ok()) GTEST_SKIP() << "no GPU: " << cuda.status().message();
    cu_ = std::move(cuda).value();
    int count = 0;
    if (cu_->deviceGetCount(&count) != CUDA_SUCCESS || count == 0) GTEST_SKIP() << "no CUDA device";
    auto nccl = NcclLibrary::load();
    if (!nccl.ok()) GTEST_SKIP() << "GPU present but " << nccl.status().message();
    auto server = TcpStoreServer::start("127.0.0.1", 0);
    ASSERT_TRUE(server.ok()) << server.status().message();
    server_ = std::move(server).value();
    auto store = TcpStoreClient::connect("127.0.0.1", server_->port(), milliseconds(10000));
    ASSERT_TRUE(store.ok()) << store.status().message();
    store_ = std::move(store).value();
    NcclGroupOptions g;
    g.group_name = "graph-one-rank";
    g.timeout = milliseconds(10000);
    auto comm = NcclCommunicator::create(*cu_, *store_, g);  // makes its context current
    ASSERT_TRUE(comm.ok()) << comm.status().message();
    comm_ = std::move(comm).value();
    ASSERT_EQ(cu_->streamCreate(&stream_, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    for (CUdeviceptr* p : {&in_, &gathered_, &copied_})
      ASSERT_EQ(cu_->memAlloc(p, kCount * sizeof(float)), CUDA_SUCCESS);
  }
  void TearDown() override {
    if (!cu_) return;
    for (CUdeviceptr p : {in_, gathered_, copied_})
      if (p) cu_->memFree(p);
    if (stream_) cu_->streamDestroy(stream_);
    comm_.reset();
  }

  /// The step: gather (one rank: a copy), an in-place sum, then a copy on the same stream.
  Status enqueue() {
    INGOT_RETURN_IF_ERROR(comm_->enqueueAllGather(in_, kCount, gathered_, stream_));
    INGOT_RETURN_IF_ERROR(comm_->enqueueAllReduceSum(gathered_, kCount, stream_));
    return cu_->check("cuMemcpyDtoDAsync",
                      cu_->memcpyDtoDAsync(copied_, gathered_, kCount * sizeof(float), stream_));
  }
  void upload(CUdeviceptr dst, const std::vector<float>& v) {
    ASSERT_EQ(cu_->memcpyHtoD(dst, v.data(), v.size() * sizeof(float)), CUDA_SUCCESS);
  }
  std::vector<float> copied() {
    std::vector<float> v(kCount);
    EXPECT_EQ(cu_->memcpyDtoH(v.data(), copied_, v.size() * sizeof(float)), CUDA_SUCCESS);
    return v;
  }
  void poison() {
    upload(gathered_, std::vector<float>(kCount, NAN));
    upload(copied_, std::vector<float>(kCount, NAN));
  }

  static constexpr size_t kCount = 4099;  // not a multiple of NCCL's chunk sizes
  std::unique_ptr<CudaDriver> cu_;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<TcpStoreClient> store_;
  std::unique_ptr<NcclCommunicator> comm_;
  CUstream stream_ = nullptr;
  CUdeviceptr in_ = 0, gathered_ = 0, copied_ = 0;
  std::mt19937 rng{ingot::testing::testSeed()};
};

TEST_F(NcclGraphGpuTest, OneRankCollectivesCapturedInAGraphMatchEagerOnFreshInputs) {
  std::vector<float> x = randomFloats(rng, kCount);
  upload(in_, x);
  poison();
  ASSERT_TRUE(enqueue().ok());
  ASSERT_TRUE(comm_->waitStream(stream_, "eager step").ok());
  const std::vector<float> eager = copied();
  ASSERT_EQ(std::memcmp(eager.data(), x.data(), kCount * sizeof(float)), 0)
      << "a one-rank gather and sum leave the values as they were";

  ASSERT_EQ(cu_->streamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
  Status enqueued = enqueue();
  CUgraph graph = nullptr;
  const CUresult ended = cu_->streamEndCapture(stream_, &graph);
  ASSERT_TRUE(enqueued.ok()) << enqueued.message();
  ASSERT_EQ(ended, CUDA_SUCCESS) << "NCCL calls must be capturable";
  CUgraphExec exec = nullptr;
  ASSERT_EQ(cu_->graphInstantiate(&exec, graph, 0), CUDA_SUCCESS);
  cu_->graphDestroy(graph);
  for (int replay = 0; replay < 3; ++replay) {
    x = randomFloats(rng, kCount);  // fresh inputs: a stale replay would not match
    upload(in_, x);
    poison();
    ASSERT_EQ(cu_->graphLaunch(exec, stream_), CUDA_SUCCESS);
    ASSERT_TRUE(comm_->waitStream(stream_, "replay " + std::to_string(replay)).ok());
    const std::vector<float> got = copied();
    ASSERT_EQ(std::memcmp(got.data(), x.data(), kCount * sizeof(float)), 0) << "replay " << replay;
  }

  // What a step's host side costs: enqueueing each call vs one graph launch, one wait each.
  auto start = Clock::now();
  for (int i = 0; i < kTimedSteps; ++i) {
    ASSERT_TRUE(enqueue().ok());
    ASSERT_TRUE(comm_->waitStream(stream_, "timed eager step").ok());
  }
  const double eagerUs =
      std::chrono::duration<double, std::micro>(Clock::now() - start).count() / kTimedSteps;
  start = Clock::now();
  for (int i = 0; i < kTimedSteps; ++i) {
    ASSERT_EQ(cu_->graphLaunch(exec, stream_), CUDA_SUCCESS);
    ASSERT_TRUE(comm_->waitStream(stream_, "timed replay").ok());
  }
  const double graphUs =
      std::chrono::duration<double, std::micro>(Clock::now() - start).count() / kTimedSteps;
  std::cout << "[ gpu ] one-rank gather + sum + copy of " << kCount << " f32: eager "
            << eagerUs << " us, graph replay " << graphUs << " us per step (with the wait)"
            << speedNote(GpuTarget{0, 0, "", emulatedCudaLibrary().ok()}) << "\n";
  cu_->graphExecDestroy(exec);
  EXPECT_TRUE(comm_->groupStatus().ok());
}

TEST_F(NcclGraphGpuTest, AbortedGroupFailsTheStreamWaitAtOnce) {
  upload(in_, randomFloats(rng, kCount));
  ASSERT_TRUE(enqueue().ok());
  comm_->abort(internalError("tp rank 1 (pid 7) exited with status 1"));
  const auto start = Clock::now();
  Status st = comm_->waitStream(stream_, "step 9");
  EXPECT_EQ(st.message(), "tp rank 1 (pid 7) exited with status 1");
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  EXPECT_LT(ms, 1000.0);
  EXPECT_EQ(comm_->enqueueAllReduceSum(gathered_, 1, stream_).message(), st.message());
  // The aborted communicator's kernels have exited: the stream drains.
  EXPECT_EQ(cu_->streamSynchronize(stream_), CUDA_SUCCESS);
}

}  // namespace
}  // namespace ingot
