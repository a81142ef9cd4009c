// CublasLt::gemmBf16 on a real GPU against a CPU reference (decode and prefill shapes, odd N,
// a vocabulary-sized N), and GEMMs captured in a CUDA graph (also a shape first seen while
// capturing) and replayed on new inputs. Label `gpu`: skips, saying why, without a driver, a device or cuBLASLt.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/backend/cuda/cublaslt.h"
#include "testing/test_seed.h"
#include "test/gpu/gpu_fixture.h"

namespace ingot {
namespace {

/// float -> bf16 bits, round to nearest even (inputs here are finite).
uint16_t toBf16(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return static_cast<uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}
float fromBf16(uint16_t h) {
  uint32_t b = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

/// One GEMM problem with its inputs on the device and host copies for the reference.
struct Problem {
  Problem(int64_t t, int64_t n, int64_t k) : T(t), N(n), K(k) {}
  int64_t T, N, K;
  std::vector<uint16_t> x, w;  // bf16 bits
  CUdeviceptr dx = 0, dw = 0, dy = 0;
};

class CublasLtGpuTest : public GpuFixture {
 protected:
  void SetUp() override {
    GpuFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    StatusOr<std::unique_ptr<CublasLt>> loaded = CublasLt::load();
    if (!loaded.ok()) GTEST_SKIP() << "no cuBLASLt: " << loaded.status().message();
    lt_ = std::move(loaded).value();
    std::cout << "[ gpu ] " << gpu_.name << ", " << lt_->library() << " version "
              << lt_->version() << "\n";
    workspace_ = alloc(CublasLt::kWorkspaceBytes);
  }
  void TearDown() override {
    if (driver_ && stream_) driver_->streamSynchronize(stream_);
    lt_.reset();  // before the context goes
    GpuFixture::TearDown();
  }

  /// Fresh random bf16 x of `p` (uploaded), and w too when `newWeights`.
  void fill(Problem& p, std::mt19937& rng, bool newWeights) {
    std::uniform_real_distribution<float> dist(-1, 1);
    p.x.resize(p.T * p.K);
    for (uint16_t& v : p.x) v = toBf16(dist(rng));
    if (!p.dx) p.dx = alloc(p.x.size() * 2);
    ASSERT_EQ(driver_->memcpyHtoDAsync(p.dx, p.x.data(), p.x.size() * 2, stream_), CUDA_SUCCESS);
    if (newWeights) {
      p.w.resize(p.N * p.K);
      for (uint16_t& v : p.w) v = toBf16(dist(rng));
      if (!p.dw) p.dw = alloc(p.w.size() * 2);
      ASSERT_EQ(driver_->memcpyHtoDAsync(p.dw, p.w.data(), p.w.size() * 2, stream_), CUDA_SUCCESS);
    }
    if (!p.dy) p.dy = alloc(p.T * p.N * 4);
    poison(p.dy, p.T * p.N);
  }

  /// Reads y back and compares it with a double-precision reference over the same bf16 inputs:
  /// |y - ref| <= 1e-5 sum_k |x w| (f32 accumulation; a layout mistake is off by O(1)).
  void check(const Problem& p, const std::string& what) {
    std::vector<float> y(p.T * p.N);
    ASSERT_EQ(driver_->memcpyDtoHAsync(y.data(), p.dy, y.size() * 4, stream_), CUDA_SUCCESS);
    sync();
    std::vector<float> xf(p.x.size()), wf(p.w.size());
    for (size_t i = 0; i < xf.size(); ++i) xf[i] = fromBf16(p.x[i]);
    for (size_t i = 0; i < wf.size(); ++i) wf[i] = fromBf16(p.w[i]);
    for (int64_t t = 0; t < p.T; ++t) {
      for (int64_t n = 0; n < p.N; ++n) {
        const float* xr = &xf[t * p.K];
        const float* wr = &wf[n * p.K];
        double sum = 0, abs = 0;
        for (int64_t k = 0; k < p.K; ++k) {
          double v = double(xr[k]) * wr[k];
          sum += v;
          abs += std::fabs(v);
        }
        float got = y[t * p.N + n];
        ASSERT_TRUE(std::isfinite(got)) << what << " y[" << t << ", " << n << "] unwritten";
        ASSERT_LE(std::fabs(got - sum), 1e-5 * abs + 1e-6)
            << what << " y[" << t << ", " << n << "] = " << got << ", want " << sum;
      }
    }
  }
  /// Captures one gemmBf16 per problem into a graph, then replays it twice on new inputs
  /// (new weights too the second time): the graph reads its buffers at launch.
  void captureAndReplay(const std::vector<Problem*>& problems, std::mt19937& rng) {
    CudaDriver& cu = *driver_;
    ASSERT_EQ(cu.streamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
    std::vector<Status> captured;
    for (Problem* p : problems)
      captured.push_back(
          lt_->gemmBf16(stream_, p->dx, p->dw, p->dy, p->T, p->N, p->K, workspace_));
    CUgraph graph = nullptr;
    Status ended = cu.check("cuStreamEndCapture", cu.streamEndCapture(stream_, &graph));
    for (size_t i = 0; i < problems.size(); ++i)
      ASSERT_TRUE(captured[i].ok()) << name(*problems[i]) << ": " << captured[i].message();
    ASSERT_TRUE(ended.ok()) << ended.message();
    CUgraphExec exec = nullptr;
    Status inst = cu.check("cuGraphInstantiate", cu.graphInstantiate(&exec, graph, 0));
    ASSERT_TRUE(inst.ok()) << inst.message();
    for (int round = 0; round < 2; ++round) {
      for (Problem* p : problems) fill(*p, rng, round == 1);
      Status launched = cu.check("cuGraphLaunch", cu.graphLaunch(exec, stream_));
      ASSERT_TRUE(launched.ok()) << launched.message();
      for (Problem* p : problems) check(*p, "graph replay " + std::to_string(round) + " " + name(*p));
    }
    cu.graphExecDestroy(exec);
    cu.graphDestroy(graph);
  }
  static std::string name(const Problem& p) {
    return "T=" + std::to_string(p.T) + " N=" + std::to_string(p.N) + " K=" + std::to_string(p.K);
  }

  std::unique_ptr<CublasLt> lt_;
  CUdeviceptr workspace_ = 0;
};

TEST_F(CublasLtGpuTest, GemmBf16MatchesTheCpu) {
  std::mt19937 rng(ingot::testing::testSeed());
  std::vector<Problem> problems = {{1, 4096, 4096},  {7, 1531, 576}, {64, 3, 4096},
                                   {7, 49152, 576},  {64, 1536, 576}, {1, 576, 1536},
                                   {64, 4096, 1024}, {5, 4096, 4096}};
  for (Problem& p : problems) {
    fill(p, rng, true);
    Status s = lt_->gemmBf16(stream_, p.dx, p.dw, p.dy, p.T, p.N, p.K, workspace_);
    ASSERT_TRUE(s.ok()) << name(p) << ": " << s.message();
    check(p, name(p));
  }
  // A repeated shape reuses its plan: no new heuristic query.
  int queries = lt_->heuristicQueries();
  fill(problems[0], rng, false);
  ASSERT_TRUE(lt_->gemmBf16(stream_, problems[0].dx, problems[0].dw, problems[0].dy, 1, 4096,
                            4096, workspace_).ok());
  check(problems[0], "repeat " + name(problems[0]));
  EXPECT_EQ(lt_->heuristicQueries(), queries);

  // Decode GEMV bandwidth, for the report (weights dominate: N * K * 2 bytes per call).
  CUevent start, stop;
  ASSERT_EQ(driver_->eventCreate(&start, 0), CUDA_SUCCESS);
  ASSERT_EQ(driver_->eventCreate(&stop, 0), CUDA_SUCCESS);
  const Problem& g = problems[0];
  const int reps = 50;
  ASSERT_EQ(driver_->eventRecord(start, stream_), CUDA_SUCCESS);
  for (int i = 0; i < reps; ++i)
    ASSERT_TRUE(lt_->gemmBf16(stream_, g.dx, g.dw, g.dy, 1, 4096, 4096, workspace_).ok());
  ASSERT_EQ(driver_->eventRecord(stop, stream_), CUDA_SUCCESS);
  ASSERT_EQ(driver_->eventSynchronize(stop), CUDA_SUCCESS);
  float ms = 0;
  ASSERT_EQ(driver_->eventElapsedTime(&ms, start, stop), CUDA_SUCCESS);
  std::cout << "[ gpu ] gemmBf16 T=1 N=4096 K=4096: " << 1000.0 * ms / reps << " us, "
            << (4096.0 * 4096 * 2 * reps) / (ms * 1e-3) / 1e9 << " GB/s of weights\n";
  driver_->eventDestroy(start);
  driver_->eventDestroy(stop);
}

TEST_F(CublasLtGpuTest, BadArgumentsAreErrorsNamingTheShape) {
  Status s = lt_->gemmBf16(stream_, workspace_, workspace_, workspace_, 1, 0, 64, workspace_);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("y[1, 0]"), std::string::npos) << s.message();
  s = lt_->gemmBf16(stream_, 0, workspace_, workspace_, 1, 8, 64, workspace_);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("x is a null device pointer"), std::string::npos) << s.message();
  EXPECT_TRUE(lt_->gemmBf16(stream_, 0, 0, 0, 0, 8, 64, workspace_).ok());  // T = 0: nothing
}

TEST_F(CublasLtGpuTest, GemmsReplayFromACapturedGraph) {
  std::mt19937 rng(ingot::testing::testSeed());
  Problem qkv{7, 1536, 576}, logits{3, 49152, 576};
  for (Problem* p : {&qkv, &logits}) {  // warmed up outside the capture, as a backend does
    fill(*p, rng, true);
    ASSERT_TRUE(lt_->gemmBf16(stream_, p->dx, p->dw, p->dy, p->T, p->N, p->K, workspace_).ok());
  }
  sync();
  captureAndReplay({&qkv, &logits}, rng);
}

TEST_F(CublasLtGpuTest, FirstCallOfAShapeCanBeCaptured) {
  // The plan for this shape (layouts, heuristic query, algorithm check) is made while the
  // stream is capturing: none of it may allocate device memory or synchronize.
  std::mt19937 rng(ingot::testing::testSeed());
  Problem fresh{2, 2048, 1536};
  fill(fresh, rng, true);
  sync();
  captureAndReplay({&fresh}, rng);
}

}  // namespace
}  // namespace ingot
