// CUDA ranks' control flow on the CPU, over the fake libcuda + libnccl (one fake GPU whose
// NCCL groups hold one rank) and the fake libcublasLt: a one-rank NCCL group runs the CUDA
// backend and steps; more ranks than GPUs are refused naming both counts, before any worker
// process starts.
#include "runtime/backend/tp/rank_backend.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <random>

#include <gtest/gtest.h>

#include "testing/llama_program.h"
#include "testing/step_builder.h"
#include "runtime/backend/tp/multi_process_tp_backend.h"
#include "testing/test_seed.h"
#include "runtime/dist/tcp_store.h"

namespace ingot {
namespace {

using std::chrono::milliseconds;

class CudaRanksFake : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Opened by path first, the fake (soname libcuda.so.1) is what the driver loader gets;
    // NCCL and cuBLASLt are taken from the environment.
    driver_ = ::dlopen(INGOT_FAKE_CUDA_NCCL, RTLD_NOW | RTLD_GLOBAL);
    blas_ = ::dlopen(INGOT_FAKE_CUBLASLT, RTLD_NOW | RTLD_GLOBAL);
    ::setenv("INGOT_NCCL_LIBRARY", INGOT_FAKE_CUDA_NCCL, 1);
    ::setenv("INGOT_CUBLASLT_LIBRARY", INGOT_FAKE_CUBLASLT, 1);
  }
  void SetUp() override {
    ASSERT_NE(driver_, nullptr) << ::dlerror();
    ASSERT_NE(blas_, nullptr) << ::dlerror();
  }
  std::vector<uint8_t> artifactBytes(int32_t tp) {
    testing::LlamaProgramOptions o;
    o.tp = tp;
    o.seed = rng();
    o.fake_cuda_kernels = true;
    StatusOr<std::vector<uint8_t>> bytes = testing::buildLlamaArtifact(o);
    EXPECT_TRUE(bytes.ok()) << bytes.status().message();
    return bytes.ok() ? std::move(bytes).value() : std::vector<uint8_t>();
  }

  /// A store on a free port, and a client of it in store_.
  void startStore() {
    StatusOr<std::unique_ptr<TcpStoreServer>> server = TcpStoreServer::start("127.0.0.1", 0);
    ASSERT_TRUE(server.ok()) << server.status().message();
    server_ = std::move(server).value();
    StatusOr<std::unique_ptr<TcpStoreClient>> store =
        TcpStoreClient::connect("127.0.0.1", server_->port(), milliseconds(5000));
    ASSERT_TRUE(store.ok()) << store.status().message();
    store_ = std::move(store).value();
  }

  static void* driver_;
  static void* blas_;
  std::mt19937 rng{ingot::testing::testSeed()};
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<TcpStoreClient> store_;
};
void* CudaRanksFake::driver_ = nullptr;
void* CudaRanksFake::blas_ = nullptr;

TEST_F(CudaRanksFake, BuildHasCudaRanks) { EXPECT_TRUE(cudaRanksBuilt()); }

TEST_F(CudaRanksFake, MoreRanksThanGpusAreRefusedNamingTheCounts) {
  EXPECT_TRUE(checkGpusForRanks(0, 1).ok());
  Status s = checkGpusForRanks(0, 2);  // the fake machine has one GPU
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("2 tensor-parallel ranks"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("GPUs 0..1"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("has 1 GPU"), std::string::npos) << s.message();
  EXPECT_FALSE(checkGpusForRanks(1, 1).ok()) << "cuda:1 does not exist here";

  // The process backend checks before it starts a worker: no launch is attempted.
  const std::vector<uint8_t> bytes = artifactBytes(2);
  const std::string path = "/tmp/ingot-cuda-ranks-" + std::to_string(::getpid()) + ".ingot";
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
  StatusOr<Artifact> artifact = Artifact::open(path);
  ASSERT_TRUE(artifact.ok()) << artifact.status().message();
  MultiProcessTpOptions o;
  o.artifact_path = path;
  o.first_gpu = 0;
  int launches = 0;
  o.launch_worker = [&](const TpWorkerOptions&) -> StatusOr<pid_t> {
    ++launches;
    return internalError("no worker should start");
  };
  StatusOr<std::unique_ptr<MultiProcessTpBackend>> b = MultiProcessTpBackend::create(*artifact, o);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("has 1 GPU"), std::string::npos) << b.status().message();
  EXPECT_EQ(launches, 0);
  std::remove(path.c_str());
}

TEST_F(CudaRanksFake, JoinProbeErrorEndsRankZerosNcclInitAtOnce) {
  auto set_modes = reinterpret_cast<void (*)(int, int)>(::dlsym(driver_, "fakeSetModes"));
  ASSERT_NE(set_modes, nullptr);
  ASSERT_NO_FATAL_FAILURE(startStore());
  RankOptions options;
  options.gpu = 0;
  options.timeout = milliseconds(20000);
  options.group = "probe-" + std::to_string(rng());
  const auto start = std::chrono::steady_clock::now();
  // What MultiProcessTpBackend's probe says of a worker that died before NCCL connected.
  options.join_probe = [&]() -> Status {
    if (std::chrono::steady_clock::now() - start < milliseconds(30)) return okStatus();
    return failedPrecondition("tp rank 1 (pid 99) exited with status 1 while the group formed");
  };
  set_modes(1, 0);  // the init waits for a rank that never connects
  StatusOr<std::unique_ptr<RankBackend>> rank = RankBackend::join(*store_, options);
  set_modes(0, 0);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(rank.ok());
  EXPECT_LT(seconds, 1.0) << "the probe, not the 20 s timeout, must end the init";
  EXPECT_NE(rank.status().message().find("tp rank 1 (pid 99) exited"), std::string::npos)
      << rank.status().message();
}

TEST_F(CudaRanksFake, OneRankNcclGroupRunsTheCudaBackend) {
  ASSERT_NO_FATAL_FAILURE(startStore());
  RankOptions options;
  options.gpu = 0;
  options.timeout = milliseconds(5000);
  options.group = "one-" + std::to_string(rng());
  options.cpu.num_kv_blocks = 32;
  options.max_model_len = 256;
  StatusOr<std::unique_ptr<RankBackend>> rank = RankBackend::join(*store_, options);
  ASSERT_TRUE(rank.ok()) << rank.status().message();
  EXPECT_EQ((*rank)->communicator().worldSize(), 1);
  EXPECT_EQ((*rank)->deviceName(), "cuda:0");

  const std::vector<uint8_t> bytes = artifactBytes(1);
  StatusOr<Artifact> artifact = Artifact::openFromMemory(bytes);
  ASSERT_TRUE(artifact.ok()) << artifact.status().message();
  ASSERT_TRUE((*rank)->load(*artifact).ok());
  EXPECT_NE((*rank)->describe().find("Fake GPU"), std::string::npos) << (*rank)->describe();
  EXPECT_EQ((*rank)->backend().numKvBlocks(), 32);
  testing::Sequence seq;
  seq.tokens = {1, 2, 3, 4};
  seq.blocks = {7};
  std::vector<float> logits;
  ASSERT_TRUE((*rank)->backend().step(testing::makeStep({&seq}, {4}, 16), &logits).ok());
  EXPECT_EQ(logits.size(), 4u * 256u);
  EXPECT_TRUE((*rank)->stepStarted());
  seq.tokens.push_back(99999);  // outside the vocabulary: refused before anything runs
  EXPECT_FALSE((*rank)->backend().step(testing::makeStep({&seq}, {1}, 16), &logits).ok());
  EXPECT_FALSE((*rank)->stepStarted());
}

}  // namespace
}  // namespace ingot
