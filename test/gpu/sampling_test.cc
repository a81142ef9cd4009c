// The token sampling kernel (ingot_fused_sample_f32, codegen/cuda/kernels/sampling.cuh) on a GPU
// against the same algorithm run on the host (sampleRowHost, itself tested against the CPU
// Sampler): fresh random rows of 49152 and 128256 logits (SmolLM2's and Llama 3's
// vocabularies), 64 rows with mixed parameters, poisoned outputs, the time per batch printed.
// Label `gpu`: skips, saying why, without a driver or a device.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codegen/cuda/FusedOpsSource.h"
#include "codegen/cuda/NvrtcCompiler.h"
#include "codegen/cuda/kernels/sampling.cuh"
#include "testing/test_seed.h"
#include "test/gpu/kernel_target.h"
#include "test/gpu/gpu_fixture.h"

namespace ingot {
namespace {

using codegen::AttentionDtype;
using codegen::FusedOp;
using sampling::RowParams;

class SamplingGpuTest : public GpuFixture {
 protected:
  void SetUp() override {
    GpuFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    const std::string target = kernelTarget(gpu_);
    auto bin = codegen::compileCuda(codegen::fusedOpsSource({FusedOp::kSample}, {AttentionDtype::kF32}),
                                    "sampling.cu", {target});
    ASSERT_TRUE(bin.ok()) << bin.status().message();
    std::vector<uint8_t> image = (*bin)[0].data;
    image.push_back(0);
    CudaDriver& cu = *driver_;
    ASSERT_TRUE(cu.check("cuModuleLoadData", cu.moduleLoadData(&module_, image.data())).ok());
    const std::string name = codegen::fusedKernelName(FusedOp::kSample, AttentionDtype::kF32);
    ASSERT_TRUE(cu.check("cuModuleGetFunction", cu.moduleGetFunction(&fn_, module_, name.c_str())).ok());
  }
  void TearDown() override {
    if (module_) driver_->moduleUnload(module_);
    GpuFixture::TearDown();
  }

  void upload(CUdeviceptr p, const void* data, size_t bytes) {
    ASSERT_TRUE(driver_->check("cuMemcpyHtoD", driver_->memcpyHtoD(p, data, bytes)).ok());
  }
  void launch(sampling::SampleParams& params) {
    void* args[] = {&params};
    ASSERT_EQ(driver_->launchKernel(fn_, params.rows, 1, 1, sampling::kSampleThreads, 1, 1, 0,
                                    stream_, args, nullptr),
              CUDA_SUCCESS);
  }

  /// Random rows (normal logits at a per-row scale, some quantized for ties, some with
  /// masked -inf / NaN entries, padded rows of `stride`) and mixed parameters; the kernel's
  /// tokens must equal sampleRowHost's. Returns the mean time of one launch over all rows.
  double checkBatch(int vocab, int rows, std::mt19937_64& rng) {
    const int stride = vocab + 64;  // the kernel must use only the first `vocab` of a row
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    std::vector<float> logits(static_cast<size_t>(rows) * stride, NAN);
    std::vector<RowParams> params(rows);
    for (int r = 0; r < rows; ++r) {
      std::normal_distribution<float> normal(0.0f, 0.5f + 5.0f * unit(rng));
      const bool ties = r % 5 == 1, masked = r % 7 == 2;
      for (int i = 0; i < vocab; ++i) {
        float v = normal(rng);
        if (ties) v = std::round(v * 4.0f) / 4.0f;
        if (masked && unit(rng) < 0.3f) v = unit(rng) < 0.5f ? -INFINITY : NAN;
        logits[static_cast<size_t>(r) * stride + i] = v;
      }
      RowParams& p = params[r];
      switch (r % 8) {  // greedy, plain, top-k small / large, top-p, min-p, all, k >= vocab
        case 0: p = {0.0f, 0, 1.0f, 0.0f, 0.0}; break;
        case 1: p = {1.0f, 0, 1.0f, 0.0f, 0.0}; break;
        case 2: p = {0.7f, 1 + static_cast<int>(rng() % 100), 1.0f, 0.0f, 0.0}; break;
        case 3: p = {1.2f, 1000 + static_cast<int>(rng() % 5000), 1.0f, 0.0f, 0.0}; break;
        case 4: p = {0.8f, 0, 0.05f + 0.9f * unit(rng), 0.0f, 0.0}; break;
        case 5: p = {1.0f, 0, 1.0f, 0.2f * unit(rng), 0.0}; break;
        case 6: p = {0.6f, 50, 0.9f, 0.05f, 0.0}; break;
        default: p = {1.5f, vocab + 3, 1.0f, 0.0f, 0.0}; break;
      }
      p.u = static_cast<double>(rng() >> 11) * 0x1.0p-53;  // as Sampler::nextUniform
    }
    if (rows > 3) {  // a row with a +inf and an all-NaN row
      logits[static_cast<size_t>(1) * stride + vocab / 2] = INFINITY;
      for (int i = 0; i < vocab; ++i) logits[static_cast<size_t>(3) * stride + i] = NAN;
    }
    const CUdeviceptr dLogits = alloc(logits.size() * 4), dParams = alloc(rows * sizeof(RowParams)),
                      dTokens = alloc(rows * 4);
    upload(dLogits, logits.data(), logits.size() * 4);
    upload(dParams, params.data(), params.size() * sizeof(RowParams));
    poison(dTokens, rows);
    sampling::SampleParams sp{reinterpret_cast<const float*>(dLogits), stride, vocab, rows,
                              reinterpret_cast<const RowParams*>(dParams),
                              reinterpret_cast<int*>(dTokens)};
    launch(sp);
    sync();
    std::vector<int> tokens(rows, -7);
    EXPECT_TRUE(driver_->check("cuMemcpyDtoH", driver_->memcpyDtoH(tokens.data(), dTokens, rows * 4)).ok());
    for (int r = 0; r < rows; ++r) {
      const RowParams& p = params[r];
      const int want = sampling::sampleRowHost(&logits[static_cast<size_t>(r) * stride], vocab, p);
      EXPECT_EQ(tokens[r], want) << "vocab " << vocab << " row " << r << ": T " << p.temperature
                                 << " top_k " << p.top_k << " top_p " << p.top_p << " min_p "
                                 << p.min_p << " u " << p.u;
    }
    // Timing: back-to-back launches, one synchronization.
    const int kReps = sizeFor(gpu_, 20, 1);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kReps; ++i) launch(sp);
    sync();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
               .count() / kReps;
  }

  CUmodule module_ = nullptr;
  CUfunction fn_ = nullptr;
};

TEST_F(SamplingGpuTest, MatchesTheHostAlgorithmOnRandomRows) {
  std::mt19937_64 rng(ingot::testing::testSeed());
  // On the SIMT emulator: SmolLM2's vocabulary and 8 rows (every parameter mix still drawn).
  const int rows = sizeFor(gpu_, 64, 8);
  for (int vocab : sizeFor<std::vector<int>>(gpu_, {49152, 128256}, {49152})) {
    const double us = checkBatch(vocab, rows, rng);
    std::printf("[ sampling ] vocab %6d, %d rows (mixed parameters): %8.1f us per batch%s\n", vocab,
                rows, us, speedNote(gpu_));
  }
}

TEST_F(SamplingGpuTest, SmallAndOddVocabularies) {
  std::mt19937_64 rng(ingot::testing::testSeed());
  for (int vocab : {1, 2, 255, 256, 257, 1000}) checkBatch(vocab, 16, rng);
}

}  // namespace
}  // namespace ingot
