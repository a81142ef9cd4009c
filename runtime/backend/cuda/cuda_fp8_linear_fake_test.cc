// Which fp8 linears go W8A8, over the fake libcuda and libcublasLt: on a faked sm_90 a
// prefill-sized step quantizes its activations per token, runs cuBLASLt FP8 and the scale
// epilogue with padded shapes, a decode step keeps the weight-only GEMV, and sm_89 / sm_80,
// the option and $INGOT_CUDA_W8A8 keep weight-only; with the quantizing producers in the
// artifact, rms_norm and silu_mul write the codes of q/k/v, gate/up and down, which then skip
// the quantizer (decode graphs too). No kernel runs here: values are the GPU
// test's (test/gpu/fp8_linear_test.cc) and gemmFp8's (cublaslt_fp8_fake_test.cc).
#include <cublasLt.h>
#include <dlfcn.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/backend/cuda/cuda_backend.h"
#include "testing/cuda/fake_cuda_test.h"
#include "testing/cuda/fake_libcuda.h"
#include "testing/llama_program.h"
#include "testing/step_builder.h"
#include "testing/test_seed.h"

namespace ingot {
namespace {

using testing::makeStep;
using testing::Sequence;

constexpr const char* kQuantize = "ingot_fp8_quantize_rows";
constexpr const char* kEpilogue = "ingot_fp8_scale_epilogue";
constexpr const char* kGemv = "ingot_quant_gemv_fp8";
constexpr const char* kRmsNormQuant = "ingot_fp8_rms_norm_quant";
constexpr const char* kSiluMulQuant = "ingot_fp8_silu_mul_quant";
constexpr const char* kRmsNorm = "ingot_fused_rms_norm_residual_f32";
constexpr const char* kSiluMul = "ingot_fused_silu_mul_f32";

using Launch = RecordedLaunch;

/// One fake cuBLASLt call: A, B, D (rows, cols) and A's element type.
struct Gemm {
  std::vector<int64_t> shape;
  int type;
};

class CudaFp8LinearFakeTest : public FakeCudaTest {
 protected:
  void TearDown() override { ::unsetenv("INGOT_CUDA_W8A8"); }

  /// fp8 per-channel q/k/v/o and gate/up/down; intermediate 120 pads gate/up's N and down's
  /// K to 128.
  testing::LlamaProgramOptions fp8Options() {
    testing::LlamaProgramOptions o;
    o.linear_quant = schema::QuantKind::PerChannel;
    o.hidden = 64;
    o.intermediate = 120;
    o.fake_cuda_kernels = true;
    return o;
  }
  std::unique_ptr<Artifact> artifact(const testing::LlamaProgramOptions& o) {
    return tinyLlama(o);
  }
  StatusOr<std::unique_ptr<CudaBackend>> backend(const Artifact& a, int major, int minor,
                                                 int64_t minRows = 32) {
    reinterpret_cast<FakeCudaSetComputeCapabilityFn>(
        ::dlsym(driver_, "fakeCudaSetComputeCapability"))(major, minor);
    CudaBackendOptions o;
    o.num_kv_blocks = 64;
    o.max_model_len = 256;
    o.max_graph_batch = 8;
    o.kernels.ptx_cache_dir = "none";
    o.fp8_w8a8_min_rows = minRows;
    return CudaBackend::create(a, o);
  }
  std::vector<Gemm> gemms() {
    auto count = reinterpret_cast<int (*)()>(::dlsym(blas_, "fakeCublasLtCallCount"));
    auto get = reinterpret_cast<void (*)(int, int64_t*)>(::dlsym(blas_, "fakeCublasLtCall"));
    auto type = reinterpret_cast<int (*)(int)>(::dlsym(blas_, "fakeCublasLtCallType"));
    std::vector<Gemm> out;
    for (int i = 0; i < count(); ++i) {
      Gemm g{std::vector<int64_t>(6), type(i)};
      get(i, g.shape.data());
      out.push_back(g);
    }
    return out;
  }
  /// Runs one step of `tokens` new tokens for each of `requests` fresh sequences; resets the
  /// fakes' logs first (the capability stays).
  void runStep(CudaBackend& b, int requests, int tokens, const testing::LlamaProgramOptions& o) {
    reinterpret_cast<FakeCudaResetFn>(::dlsym(driver_, "fakeCudaReset"))();
    reinterpret_cast<void (*)()>(::dlsym(blas_, "fakeCublasLtReset"))();
    std::vector<Sequence> seqs(requests);
    std::vector<Sequence*> ptrs;
    std::vector<int> counts;
    for (int r = 0; r < requests; ++r) {
      seqs[r].tokens.resize(tokens);
      for (int32_t& t : seqs[r].tokens) t = static_cast<int32_t>(rng_() % o.vocab);
      seqs[r].blocks = {r * 4, r * 4 + 1, r * 4 + 2, r * 4 + 3};
      ptrs.push_back(&seqs[r]);
      counts.push_back(tokens);
    }
    std::vector<float> logits;
    Status s = b.step(makeStep(ptrs, counts, o.block_size), &logits);
    ASSERT_TRUE(s.ok()) << s.message();
  }
  static size_t countOf(const std::vector<Launch>& ls, const std::string& name) {
    size_t n = 0;
    for (const Launch& l : ls) n += l.name == name;
    return n;
  }
  size_t fp8Gemms() {
    size_t n = 0;
    for (const Gemm& g : gemms()) n += g.type == CUDA_R_8F_E4M3;
    return n;
  }

  std::mt19937 rng_{ingot::testing::testSeed()};
};

TEST_F(CudaFp8LinearFakeTest, Sm90PrefillRunsW8a8WithPaddedShapesAndDecodeKeepsTheGemv) {
  const testing::LlamaProgramOptions o = fp8Options();
  auto a = artifact(o);
  StatusOr<std::unique_ptr<CudaBackend>> b = backend(*a, 9, 0);
  ASSERT_TRUE(b.ok()) << b.status().message();
  // gate and up (N = 120) and down (K = 120) of each layer get a padded copy.
  EXPECT_NE((*b)->describe().find("W8A8 fp8 linears: 14 steps from 32 rows (6 padded weight copies; "
                                  "0 read codes made by their rms_norm / silu_mul)"),
            std::string::npos)
      << (*b)->describe();
  const int T = 40;  // >= 32 rows
  runStep(**b, 1, T, o);
  const std::vector<Launch> ls = launches();
  const size_t linears = 7 * static_cast<size_t>(o.layers);
  EXPECT_EQ(countOf(ls, kGemv), 0u) << "no fp8 linear of a 40-token step stays weight-only";
  EXPECT_EQ(countOf(ls, kQuantize), linears);
  EXPECT_EQ(countOf(ls, kEpilogue), linears);
  for (const Launch& l : ls)
    if (l.name == kQuantize) {
      EXPECT_EQ(l.dims[0], static_cast<unsigned>(T)) << "one CTA per token";
      EXPECT_EQ(l.dims[3], 256u);
    }
  // Each W8A8 linear is quantizer, FP8 GEMM, epilogue, in that order.
  for (size_t i = 0; i < ls.size(); ++i)
    if (ls[i].name == kQuantize) {
      ASSERT_LT(i + 1, ls.size());
      EXPECT_EQ(ls[i + 1].name, kEpilogue) << "the GEMM (not a launch) sits between them";
    }
  // A = w (Kp x Np), B = x codes (Kp x T), D (Np x T): q (64 x 64), k/v (64 x 32),
  // o (64 x 64), gate/up (64 x 128, N 120 padded), down (128 x 64, K 120 padded).
  const std::vector<Gemm> g = gemms();
  ASSERT_EQ(fp8Gemms(), linears);
  std::vector<std::vector<int64_t>> fp8Shapes;
  for (const Gemm& x : g)
    if (x.type == CUDA_R_8F_E4M3) fp8Shapes.push_back(x.shape);
  for (const auto& s : fp8Shapes) {
    EXPECT_EQ(s[0] % 16, 0) << "Kp";
    EXPECT_EQ(s[1] % 16, 0) << "Np";
    EXPECT_EQ(s[2], s[0]) << "x codes share the weight's padded K";
    EXPECT_EQ(s[3], T);
    EXPECT_EQ(s[4], s[1]);
    EXPECT_EQ(s[5], T);
  }
  const std::vector<int64_t> gate = {64, 128, 64, T, 128, T}, down = {128, 64, 128, T, 64, T};
  EXPECT_EQ(fp8Shapes[4], gate) << "gate: N = 120 padded to 128";
  EXPECT_EQ(fp8Shapes[6], down) << "down: K = 120 padded to 128";

  runStep(**b, 3, 1, o);  // a decode step: 3 rows
  EXPECT_EQ(countOf(launches(), kGemv), linears);
  EXPECT_EQ(countOf(launches(), kQuantize), 0u);
  EXPECT_EQ(fp8Gemms(), 0u);
}

TEST_F(CudaFp8LinearFakeTest, Sm89AndSm80StayWeightOnlyForPrefill) {
  const testing::LlamaProgramOptions o = fp8Options();
  auto a = artifact(o);
  for (auto [major, minor] : {std::pair{8, 9}, std::pair{8, 0}}) {
    StatusOr<std::unique_ptr<CudaBackend>> b = backend(*a, major, minor);
    ASSERT_TRUE(b.ok()) << b.status().message();
    const std::string why = "W8A8 fp8 linears: off, sm_" + std::to_string(major) +
                            std::to_string(minor) + " runs fp8 weight-only";
    EXPECT_NE((*b)->describe().find(why), std::string::npos) << (*b)->describe();
    runStep(**b, 1, 40, o);
    const std::vector<Launch> ls = launches();
    EXPECT_EQ(countOf(ls, kQuantize), 0u) << "sm_" << major << minor;
    EXPECT_EQ(fp8Gemms(), 0u) << "sm_" << major << minor;
    size_t weightOnly = 0;
    for (const Launch& l : ls) weightOnly += l.name.rfind("ingot_quant_", 0) == 0;
    EXPECT_EQ(weightOnly, 7u * o.layers) << "sm_" << major << minor;
  }
}

TEST_F(CudaFp8LinearFakeTest, OptionAndEnvironmentTurnW8a8OffOrMoveItsThreshold) {
  const testing::LlamaProgramOptions o = fp8Options();
  auto a = artifact(o);
  StatusOr<std::unique_ptr<CudaBackend>> off = backend(*a, 9, 0, /*minRows=*/0);
  ASSERT_TRUE(off.ok()) << off.status().message();
  runStep(**off, 1, 40, o);
  EXPECT_EQ(countOf(launches(), kQuantize), 0u) << "fp8_w8a8_min_rows = 0";

  ::setenv("INGOT_CUDA_W8A8", "off", 1);
  StatusOr<std::unique_ptr<CudaBackend>> envOff = backend(*a, 9, 0);
  ASSERT_TRUE(envOff.ok()) << envOff.status().message();
  runStep(**envOff, 1, 40, o);
  EXPECT_EQ(countOf(launches(), kQuantize), 0u) << "INGOT_CUDA_W8A8=off";

  // From 4 rows: a decode step of 5 requests (graph bucket 8: 8 rows) goes W8A8, one of 2
  // (bucket 2) does not.
  ::setenv("INGOT_CUDA_W8A8", "4", 1);
  StatusOr<std::unique_ptr<CudaBackend>> four = backend(*a, 9, 0);
  ASSERT_TRUE(four.ok()) << four.status().message();
  runStep(**four, 5, 1, o);
  EXPECT_EQ(countOf(launches(), kQuantize), 7u * o.layers);
  runStep(**four, 2, 1, o);
  EXPECT_EQ(countOf(launches(), kQuantize), 0u);

  ::setenv("INGOT_CUDA_W8A8", "sometimes", 1);
  StatusOr<std::unique_ptr<CudaBackend>> bad = backend(*a, 9, 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("INGOT_CUDA_W8A8='sometimes'"), std::string::npos)
      << bad.status().message();
}

/// Per layer: the input norm feeds q, k, v; the post-attention norm gate and up; silu_mul
/// down. Only o (fed by attention) keeps the separate quantizer.
TEST_F(CudaFp8LinearFakeTest, Sm90ProducersQuantizeSharedInputsOnceForTheirLinears) {
  testing::LlamaProgramOptions o = fp8Options();
  auto unfusedArtifact = artifact(o);
  o.fake_fp8_producer_kernels = true;
  auto fusedArtifact = artifact(o);
  const int T = 40;
  const size_t layers = static_cast<size_t>(o.layers);

  StatusOr<std::unique_ptr<CudaBackend>> unfused = backend(*unfusedArtifact, 9, 0);
  ASSERT_TRUE(unfused.ok()) << unfused.status().message();
  runStep(**unfused, 1, T, o);
  const std::vector<Launch> before = launches();
  const std::vector<Gemm> gemmsBefore = gemms();

  StatusOr<std::unique_ptr<CudaBackend>> fused = backend(*fusedArtifact, 9, 0);
  ASSERT_TRUE(fused.ok()) << fused.status().message();
  EXPECT_NE((*fused)->describe().find("; 12 read codes made by their rms_norm / silu_mul)"),
            std::string::npos)
      << (*fused)->describe();
  runStep(**fused, 1, T, o);
  const std::vector<Launch> after = launches();
  const std::vector<Gemm> gemmsAfter = gemms();

  EXPECT_EQ(countOf(before, kQuantize), 7 * layers);
  EXPECT_EQ(countOf(before, kRmsNormQuant) + countOf(before, kSiluMulQuant), 0u);
  EXPECT_EQ(countOf(after, kQuantize), layers) << "only o_proj quantizes its own input";
  EXPECT_EQ(countOf(after, kRmsNormQuant), 2 * layers);
  EXPECT_EQ(countOf(after, kSiluMulQuant), layers);
  EXPECT_EQ(countOf(after, kEpilogue), 7 * layers);
  // The plain norm remains for the final norm (it feeds the logits, not an fp8 linear).
  EXPECT_EQ(countOf(before, kRmsNorm), 2 * layers + 1);
  EXPECT_EQ(countOf(after, kRmsNorm), 1u);
  EXPECT_EQ(countOf(after, kSiluMul), 0u);
  EXPECT_EQ(before.size() - after.size(), 6 * layers) << "six quantizer passes fewer per layer";
  for (const Launch& l : after)
    if (l.name == kRmsNormQuant || l.name == kSiluMulQuant) {
      EXPECT_EQ(l.dims[0], static_cast<unsigned>(T)) << l.name << ": one CTA per token";
      EXPECT_EQ(l.dims[3], 256u) << l.name;
    }
  // Each producer comes before its consumers' epilogues, and no quantizer sits between an
  // input norm and the three epilogues of q, k and v.
  size_t norm = after.size();
  for (size_t i = 0; i < after.size() && norm == after.size(); ++i)
    if (after[i].name == kRmsNormQuant) norm = i;
  ASSERT_LT(norm + 3, after.size());
  for (size_t i = norm + 1, epilogues = 0; epilogues < 3; ++i) {
    ASSERT_LT(i, after.size());
    EXPECT_NE(after[i].name, kQuantize) << "launch " << i;
    epilogues += after[i].name == kEpilogue;
  }
  // The same FP8 GEMMs, in the same order, on the same shapes.
  ASSERT_EQ(gemmsAfter.size(), gemmsBefore.size());
  for (size_t i = 0; i < gemmsAfter.size(); ++i) {
    EXPECT_EQ(gemmsAfter[i].type, gemmsBefore[i].type) << "gemm " << i;
    EXPECT_EQ(gemmsAfter[i].shape, gemmsBefore[i].shape) << "gemm " << i;
  }

  // A decode step stays weight-only and unfused.
  runStep(**fused, 3, 1, o);
  EXPECT_EQ(countOf(launches(), kRmsNormQuant) + countOf(launches(), kSiluMulQuant), 0u);
  EXPECT_EQ(countOf(launches(), kRmsNorm), 2 * layers + 1);
  EXPECT_EQ(countOf(launches(), kGemv), 7 * layers);
}

TEST_F(CudaFp8LinearFakeTest, DecodeGraphsOfW8a8SizeReplayTheProducers) {
  testing::LlamaProgramOptions o = fp8Options();
  o.fake_fp8_producer_kernels = true;
  auto a = artifact(o);
  ::setenv("INGOT_CUDA_W8A8", "4", 1);  // W8A8 from 4 rows: the graph bucket 8 qualifies
  StatusOr<std::unique_ptr<CudaBackend>> b = backend(*a, 9, 0);
  ASSERT_TRUE(b.ok()) << b.status().message();
  const size_t layers = static_cast<size_t>(o.layers);
  for (int round = 0; round < 2; ++round) {  // capture, then replay
    runStep(**b, 5, 1, o);
    const std::vector<Launch> ls = launches();
    EXPECT_EQ(countOf(ls, kRmsNormQuant), 2 * layers) << "round " << round;
    EXPECT_EQ(countOf(ls, kSiluMulQuant), layers) << "round " << round;
    EXPECT_EQ(countOf(ls, kQuantize), layers) << "round " << round;
    for (const Launch& l : ls)
      if (l.name == kRmsNormQuant) EXPECT_EQ(l.dims[0], 8u) << "the bucket's rows";
  }
  EXPECT_GE(stats().graphLaunches, 1);
  runStep(**b, 2, 1, o);  // bucket 2: below the threshold, unfused and weight-only
  EXPECT_EQ(countOf(launches(), kRmsNormQuant), 0u);
  EXPECT_EQ(countOf(launches(), kQuantize), 0u);
}

TEST_F(CudaFp8LinearFakeTest, Sm89WithProducerKernelsIsUnchanged) {
  testing::LlamaProgramOptions o = fp8Options();
  o.fake_fp8_producer_kernels = true;
  auto a = artifact(o);
  StatusOr<std::unique_ptr<CudaBackend>> b = backend(*a, 8, 9);
  ASSERT_TRUE(b.ok()) << b.status().message();
  runStep(**b, 1, 40, o);
  const std::vector<Launch> ls = launches();
  EXPECT_EQ(countOf(ls, kRmsNormQuant) + countOf(ls, kSiluMulQuant) + countOf(ls, kQuantize), 0u);
  EXPECT_EQ(countOf(ls, kRmsNorm), 2u * o.layers + 1);
  EXPECT_EQ(countOf(ls, kSiluMul), static_cast<size_t>(o.layers));
  EXPECT_EQ(fp8Gemms(), 0u);
}

}  // namespace
}  // namespace ingot
