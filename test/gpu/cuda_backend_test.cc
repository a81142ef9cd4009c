// The CUDA backend against the CPU backend on one artifact (label gpu): teacher-forced
// logits within bf16 tolerance (also on the int4, fp8 and Gemma 3 artifacts), greedy tokens
// where the margin allows, decode graphs against eager steps, the PTX JIT path against the
// cubins, and KV block copies.
// The artifact comes from $INGOT_GPU_ARTIFACT (scripts/gpu-check.sh points it at a
// SmolLM2-shaped --dummy-weights artifact compiled with CUDA kernels on the build machine).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "core/artifact/artifact_reader.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/simd_level.h"
#include "runtime/backend/cuda/cuda_backend.h"
#include "testing/step_builder.h"
#include "testing/w8a8_emulation.h"
#include "test/gpu/backend_gpu_fixture.h"
#include "test/gpu/kernel_target.h"

namespace ingot {
namespace {

using testing::makeStep;
using testing::Sequence;

class CudaBackendGpuTest : public BackendGpuTest {
 protected:
  void SetUp() override {
    const Status gpu = cudaDeviceAvailable();
    if (!gpu.ok()) GTEST_SKIP() << "no GPU: " << gpu.message();
    const char* path = std::getenv("INGOT_GPU_ARTIFACT");
    if (!path) GTEST_SKIP() << "set INGOT_GPU_ARTIFACT to an artifact with CUDA kernels";
    StatusOr<Artifact> opened = Artifact::open(path);
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    artifact = std::make_unique<Artifact>(std::move(opened).value());
    block_size = std::max(1, artifact->manifest().config()->kv_block_size());
    vocab = artifact->manifest().config()->vocab_size();
  }

  std::unique_ptr<CudaBackend> cuda(int32_t graphs = 128, bool force_ptx = false,
                                    bool capture = true) {
    CudaBackendOptions o;
    o.num_kv_blocks = 64;
    o.max_model_len = 512;
    o.max_graph_batch = graphs;
    o.capture_decode_graphs = capture;
    o.kernels.force_ptx = force_ptx;
    o.kernels.ptx_cache_dir = "none";
    return createCuda(*artifact, o);
  }
  /// Makes $`env`'s artifact the one under test; false where `env` is unset.
  bool useArtifact(const char* env) {
    const char* path = std::getenv(env);
    if (!path) return false;
    StatusOr<Artifact> opened = Artifact::open(path);
    EXPECT_TRUE(opened.ok()) << opened.status().message();
    if (!opened.ok()) return false;
    artifact = std::make_unique<Artifact>(std::move(opened).value());
    block_size = std::max(1, artifact->manifest().config()->kv_block_size());
    vocab = artifact->manifest().config()->vocab_size();
    return true;
  }
  static int32_t argmax(const float* row, int64_t n) {
    return static_cast<int32_t>(std::max_element(row, row + n) - row);
  }
};

TEST_F(CudaBackendGpuTest, TeacherForcedLogitsMatchTheCpuBackend) {
  auto gpu = cuda();
  auto ref = cpu();
  ASSERT_TRUE(gpu && ref);
  Sequence seq;
  seq.tokens = randomTokens(40);
  seq.blocks = {5, 2, 9, 30};  // shuffled blocks, room for 64 tokens
  Sequence copy = seq;
  std::vector<float> got, want;
  // Prefill (eager, every row), then decode steps (graph bucket 1) fed the CPU's argmax.
  StepInputs prefill = makeStep({&seq}, {32}, block_size);
  makeStep({&copy}, {32}, block_size);
  ASSERT_TRUE(gpu->step(prefill, &got).ok());
  ASSERT_TRUE(ref->step(prefill, &want).ok());
  EXPECT_EQ(gpu->lastGraphBucket(), 0);
  double worst = relativeError(got, want);
  int agree = 0, confident = 0;
  for (int i = 0; i < 8; ++i) {
    StepInputs decode = makeStep({&seq}, {1}, block_size);
    ASSERT_TRUE(gpu->step(decode, &got).ok());
    ASSERT_TRUE(ref->step(decode, &want).ok());
    EXPECT_EQ(gpu->lastGraphBucket(), i == 0 ? -1 : 1) << "warm-up, then the graph";
    worst = std::max(worst, relativeError(got, want));
    std::vector<float> sorted(want);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    if (sorted[0] - sorted[1] > 0.05 * std::fabs(sorted[0])) {
      ++confident;
      agree += argmax(got.data(), vocab) == argmax(want.data(), vocab);
    }
  }
  std::cout << "[ cuda ] teacher-forced logits: max error " << worst
            << " of max |logit|; greedy agrees on " << agree << " of " << confident
            << " confident steps\n";
  EXPECT_LT(worst, 3e-2);
  EXPECT_EQ(agree, confident);
}

TEST_F(CudaBackendGpuTest, QuantizedArtifactMatchesTheCpuBackend) {
  // The same SmolLM2 shape compiled with --quant int4 (scripts/gpu-prepare.sh): the GEMV
  // kernels read the packed bytes the CPU backend reads.
  if (!useArtifact("INGOT_GPU_QUANT_ARTIFACT"))
    GTEST_SKIP() << "set INGOT_GPU_QUANT_ARTIFACT to a --quant artifact with CUDA kernels";
  auto gpu = cuda();
  auto ref = cpu();
  ASSERT_TRUE(gpu && ref);
  Sequence seq;
  seq.tokens = randomTokens(20);
  seq.blocks = {7, 3};
  std::vector<float> got, want;
  double worst = 0;
  for (int n : {12, 1, 1, 1}) {
    StepInputs step = makeStep({&seq}, {n}, block_size);
    ASSERT_TRUE(gpu->step(step, &got).ok());
    ASSERT_TRUE(ref->step(step, &want).ok());
    worst = std::max(worst, relativeError(got, want));
  }
  std::cout << "[ cuda ] quantized artifact: max logit error " << worst << " of max |logit|\n";
  EXPECT_LT(worst, 3e-2);
}

TEST_F(CudaBackendGpuTest, Gemma3ArtifactMatchesTheCpuBackend) {
  // Gemma 3 (scripts/gpu-prepare.sh: 270M's shape with dummy weights; under the emulator its
  // real weights): head dim 256 decode attention, gelu_mul, the embedding scale, per-head
  // q/k norms, sandwich norms, local and global layers.
  // Gemma is optional (INGOT_GEMMA3_GGUF): a named artifact that was not made skips.
  const char* gemma = std::getenv("INGOT_GPU_GEMMA3_ARTIFACT");
  if (!gemma || !std::filesystem::exists(gemma) || !useArtifact("INGOT_GPU_GEMMA3_ARTIFACT"))
    GTEST_SKIP() << "set INGOT_GPU_GEMMA3_ARTIFACT to a Gemma 3 artifact with CUDA kernels "
                    "(scripts/gpu-prepare.sh; under ctest, INGOT_GEMMA3_GGUF for the fixture)";
  auto gpu = cuda();
  auto ref = cpu();
  ASSERT_TRUE(gpu && ref);
  Sequence seq;
  seq.tokens = randomTokens(28);
  for (int32_t b = 0; b * block_size < 28; ++b) seq.blocks.push_back(12 - b);
  std::vector<float> got, want;
  for (int n : {24, 1, 1, 1}) {
    StepInputs step = makeStep({&seq}, {n}, block_size);
    ASSERT_TRUE(gpu->step(step, &got).ok());
    ASSERT_TRUE(ref->step(step, &want).ok());
    const double err = relativeError(got, want);
    std::cout << "[ cuda ] gemma3 artifact, step of " << n << " tokens: max logit error " << err
              << " of max |logit|\n";
    EXPECT_LT(err, 3e-2) << n << " tokens";
  }
}

TEST_F(CudaBackendGpuTest, QuantizedPrefillRunsTheTensorCoreGemmWithinBf16OfTheCpu) {
  // A prefill of 80 tokens (>= quantgemm::kQuantGemmMinRows) takes the ingot_quant_gemm_*
  // kernels, which round weights and activations to bf16; decode rows take the GEMVs.
  if (!useArtifact("INGOT_GPU_QUANT_ARTIFACT"))
    GTEST_SKIP() << "set INGOT_GPU_QUANT_ARTIFACT to a --quant artifact with CUDA kernels";
  auto gpu = cuda();
  auto ref = cpu();
  ASSERT_TRUE(gpu && ref);
  Sequence seq;
  seq.tokens = randomTokens(82);
  for (int32_t b = 0; b * block_size < 82; ++b) seq.blocks.push_back(20 + b);
  std::vector<float> got, want;
  for (int n : {80, 1, 1}) {
    StepInputs step = makeStep({&seq}, {n}, block_size);
    ASSERT_TRUE(gpu->step(step, &got).ok());
    ASSERT_TRUE(ref->step(step, &want).ok());
    const double err = relativeError(got, want);
    std::cout << "[ cuda ] quantized artifact, step of " << n << " tokens: max logit error "
              << err << " of max |logit|\n";
    EXPECT_LT(err, 3e-2) << n << " tokens";
  }
}

TEST_F(CudaBackendGpuTest, Fp8PrefillRunsW8a8WithinTheCpuEmulationOfIt) {
  // An fp8 artifact: on sm_90+ a prefill of 80 tokens (>= fp8_w8a8_min_rows) runs its fp8
  // linears W8A8 (per-token E4M3 activations made by rms_norm / silu_mul, cuBLASLt FP8, the
  // scale epilogue). Its reference is the CPU backend whose fp8 linears round each token's
  // activations with the same encoder first (testing::w8a8EmulatingQuantKernels); older
  // GPUs run the weight-only kernels and are held to the plain CPU backend.
  const char* path = std::getenv("INGOT_GPU_FP8_ARTIFACT");
  if (!path) GTEST_SKIP() << "set INGOT_GPU_FP8_ARTIFACT to a --quant fp8 artifact with CUDA kernels";
  StatusOr<Artifact> opened = Artifact::open(path);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  artifact = std::make_unique<Artifact>(std::move(opened).value());
  auto gpu = cuda();
  ASSERT_TRUE(gpu);
  const std::string what = gpu->describe();
  const size_t sm = what.find("(sm_");
  ASSERT_NE(sm, std::string::npos) << what;
  const bool w8a8 = std::stoi(what.substr(sm + 4, 3)) >= 90;
  EXPECT_EQ(what.find("W8A8 fp8 linears: ") != std::string::npos &&
                what.find("W8A8 fp8 linears: off") == std::string::npos,
            w8a8)
      << what;
  CpuBackendOptions o;
  o.num_kv_blocks = 64;
  if (w8a8) o.quant_kernels = &testing::w8a8EmulatingQuantKernels();
  StatusOr<std::unique_ptr<CpuBackend>> ref = CpuBackend::create(*artifact, o);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  Sequence seq;
  seq.tokens = randomTokens(80);
  for (int32_t b = 0; b * block_size < 80; ++b) seq.blocks.push_back(20 + b);
  std::vector<float> got, want;
  const StepInputs step = makeStep({&seq}, {80}, block_size);
  ASSERT_TRUE(gpu->step(step, &got).ok());
  ASSERT_TRUE((*ref)->step(step, &want).ok());
  // Per-token E4M3 activations make the model chaotic in its rounding: an f32 sum a few ulp
  // off moves an activation across a code boundary (6% apart), and 30 layers compound that.
  // Two valid W8A8 implementations differ by as much: the same emulation on the scalar
  // kernels (another summation order) lands 0.03-0.05 of max |logit| from the vector ones
  // on SmolLM2's shape, per token row, so that spread, not 3e-2, is the bound for the GPU too
  // (each linear is checked to 1e-4 of its terms in test/gpu/fp8_linear_test.cc). Its size
  // depends on the prompt, and the worst of 80 rows is the most chaotic statistic, so the
  // GPU is held to the alternative's spread on the same prompt twice: the median row within
  // 2x the alternative's median, the worst row within 4x its worst. Measured under the SIMT
  // emulator over 7 seeds: GPU / alternative medians 0.84-1.49, worst rows 0.83-2.26 (the
  // old bound, 2x the alternative's worst over all rows, failed 2 of them). A broken row
  // (a scale or layout off) lands near 1.
  std::vector<double> gpuRows = sortedRowErrors(got, want), altRows = gpuRows;
  if (w8a8) {
    CpuBackendOptions scalar = o;
    scalar.quant_kernels = &testing::w8a8EmulatingQuantKernels(SimdLevel::kScalar);
    StatusOr<std::unique_ptr<CpuBackend>> other = CpuBackend::create(*artifact, scalar);
    ASSERT_TRUE(other.ok()) << other.status().message();
    std::vector<float> alt;
    ASSERT_TRUE((*other)->step(step, &alt).ok());
    altRows = sortedRowErrors(alt, want);
  }
  ASSERT_EQ(gpuRows.size(), 80u);
  const double median = gpuRows[40], worst = gpuRows.back();
  const double altMedian = w8a8 ? altRows[40] : 0.0, altWorst = w8a8 ? altRows.back() : 0.0;
  std::cout << "[ cuda ] fp8 artifact, prefill of 80 tokens (" << (w8a8 ? "W8A8" : "weight-only")
            << "): logit error of max |logit| per token, median " << median << ", worst "
            << worst << " (scalar CPU emulation: median " << altMedian << ", worst " << altWorst
            << ")\n";
  EXPECT_LT(median, std::max(3e-2, 2.0 * altMedian));
  EXPECT_LT(worst, std::max(3e-2, 4.0 * altWorst));
}

// Decode graphs replay exactly what an eager step of the graph's shape computes: bit for bit
// against a backend that runs the same bucket shapes and split-KV plans without capturing.
// Against steps at their own size (5 requests, not the bucket of 8, split-KV planned for the
// real lengths, not the longest the tables hold) only the order of the attention partial
// sums differs. That is the same kind of difference as the CPU backend's (another summation
// order), so the bound is the CPU comparison's order of magnitude, not a guess below it: an
// f32 sum a few ulp off flips a bf16-rounded activation by one bf16 ulp (2^-8), and 30 layers
// carry that to the logits. Measured 5e-4 to 1.9e-3 of max |logit| over seeds under the SIMT
// emulator on SmolLM2's shape; 1e-2 leaves 5x and stays 3x inside the CPU bound (3e-2).
TEST_F(CudaBackendGpuTest, DecodeGraphsGiveTheLogitsOfEagerSteps) {
  auto graphs = cuda(128);
  auto bucketed = cuda(128, false, /*capture=*/false);
  auto eager = cuda(0);
  ASSERT_TRUE(graphs && bucketed && eager);
  std::vector<Sequence> seqs(5);
  std::vector<Sequence*> all;
  for (int r = 0; r < 5; ++r) {
    seqs[r].tokens = randomTokens(20 + r);
    for (int b = 0; b < 3; ++b) seqs[r].blocks.push_back(r * 3 + b + 1);
    all.push_back(&seqs[r]);
  }
  std::vector<float> a, same, b;
  StepInputs prefill = makeStep(all, {10, 11, 12, 13, 14}, block_size);
  ASSERT_TRUE(graphs->step(prefill, &a).ok());
  ASSERT_TRUE(bucketed->step(prefill, &same).ok());
  ASSERT_TRUE(eager->step(prefill, &b).ok());
  for (int i = 0; i < 4; ++i) {
    StepInputs decode = makeStep(all, {1, 1, 1, 1, 1}, block_size);
    ASSERT_TRUE(graphs->step(decode, &a).ok());
    ASSERT_TRUE(bucketed->step(decode, &same).ok());
    ASSERT_TRUE(eager->step(decode, &b).ok());
    EXPECT_EQ(graphs->lastGraphBucket(), i == 0 ? -8 : 8) << "5 requests take the graph of 8";
    EXPECT_EQ(bucketed->lastGraphBucket(), -8) << "the bucket's shape, eagerly";
    EXPECT_EQ(eager->lastGraphBucket(), 0);
    EXPECT_TRUE(a == same) << "decode step " << i << ": a replay differs from an eager step of "
                           << "its shape by " << relativeError(a, same);
    EXPECT_LT(relativeError(a, b), 1e-2) << "decode step " << i;
  }
}

TEST_F(CudaBackendGpuTest, PtxJitPathGivesTheLogitsOfTheCubins) {
  if (const char* why = noPtxJit(GpuTarget{0, 0, "", emulatedDevice()})) GTEST_SKIP() << why;
  auto cubin = cuda(16, false);
  auto ptx = cuda(16, true);
  ASSERT_TRUE(cubin && ptx);
  EXPECT_GT(ptx->kernelReport().ptx_jit, 0);
  Sequence seq;
  seq.tokens = randomTokens(24);
  seq.blocks = {3, 1};
  std::vector<float> a, b;
  StepInputs step = makeStep({&seq}, {24}, block_size);
  ASSERT_TRUE(cubin->step(step, &a).ok());
  ASSERT_TRUE(ptx->step(step, &b).ok());
  EXPECT_LT(relativeError(a, b), 1e-4);
}

TEST_F(CudaBackendGpuTest, CopiedKvBlocksServeAForkedSequence) {
  auto gpu = cuda();
  ASSERT_TRUE(gpu);
  Sequence seq;
  seq.tokens = randomTokens(2 * block_size + 1);
  seq.blocks = {4, 7, 8};
  std::vector<float> a, b;
  ASSERT_TRUE(gpu->step(makeStep({&seq}, {2 * block_size}, block_size), &a).ok());
  // A fork whose first two blocks are copies: the same next-token logits.
  Sequence fork = seq;
  fork.blocks = {10, 11, 12};
  ASSERT_TRUE(gpu->copyKvBlocks(4, 10).ok());
  ASSERT_TRUE(gpu->copyKvBlocks(7, 11).ok());
  ASSERT_TRUE(gpu->step(makeStep({&seq}, {1}, block_size), &a).ok());
  ASSERT_TRUE(gpu->step(makeStep({&fork}, {1}, block_size), &b).ok());
  EXPECT_LT(relativeError(a, b), 1e-6);
  EXPECT_FALSE(gpu->copyKvBlocks(0, 64).ok());
}

TEST_F(CudaBackendGpuTest, BadStepsAreRefusedBeforeAnythingRuns) {
  auto gpu = cuda();
  ASSERT_TRUE(gpu);
  Sequence seq;
  seq.tokens = {static_cast<int32_t>(vocab)};  // outside the vocabulary
  seq.blocks = {0};
  std::vector<float> logits;
  EXPECT_FALSE(gpu->step(makeStep({&seq}, {1}, block_size), &logits).ok());
}

}  // namespace
}  // namespace ingot
