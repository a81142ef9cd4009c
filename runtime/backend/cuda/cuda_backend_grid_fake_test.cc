// CudaBackend over the fake libcuda: every launch's grid is the artifact's rule
// (KernelDef.grid) evaluated on the step's counts, an artifact without rules (format 1.4)
// gets the same grids from the kernels' families, and a rule the launch cannot evaluate is
// an error naming the step and the kernel. A scale step launches its kernel, or is refused
// at load where the artifact lacks it.
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

using schema::GridCount;
using testing::makeStep;
using testing::Sequence;

using Launch = RecordedLaunch;

class CudaBackendGridFakeTest : public FakeCudaTest {
 protected:
  std::unique_ptr<CudaBackend> backend(const Artifact& a) {
    CudaBackendOptions o;
    o.num_kv_blocks = 64;
    o.max_model_len = 256;
    o.max_graph_batch = 16;
    o.kernels.ptx_cache_dir = "none";
    StatusOr<std::unique_ptr<CudaBackend>> b = CudaBackend::create(a, o);
    EXPECT_TRUE(b.ok()) << b.status().message();
    return b.ok() ? std::move(b).value() : nullptr;
  }
  /// The launches of a 12-token prefill, then of three decode steps of 3 requests (a
  /// warm-up and two graph replays), on an artifact built with `o`.
  std::vector<Launch> run(testing::LlamaProgramOptions o, Status* failed = nullptr) {
    o.fake_cuda_kernels = true;
    auto a = tinyLlama(o);
    auto b = backend(*a);
    if (!b) return {};
    SetUp();  // forget what loading did
    std::mt19937 rng(seed);
    std::vector<Sequence> seqs(3);
    std::vector<Sequence*> all;
    for (int r = 0; r < 3; ++r) {
      for (int t = 0; t < 16; ++t) seqs[r].tokens.push_back(static_cast<int32_t>(rng() % 256u));
      seqs[r].blocks = {2 * r + 1, 2 * r + 2};
      all.push_back(&seqs[r]);
    }
    std::vector<float> logits;
    Status s = b->step(makeStep(all, {12, 12, 12}, o.block_size), &logits);
    for (int i = 0; s.ok() && i < 3; ++i)
      s = b->step(makeStep(all, {1, 1, 1}, o.block_size), &logits);
    if (failed) *failed = s;
    else EXPECT_TRUE(s.ok()) << s.message();
    return launches();
  }
  uint32_t seed = ingot::testing::testSeed();
};

TEST_F(CudaBackendGridFakeTest, AnArtifactWithoutGridRulesLaunchesTheSameGridsByKernelFamily) {
  testing::LlamaProgramOptions o;  // 2 layers, 4 q / 2 kv heads of 16, vocab 256
  o.fake_quant_gemm_kernels = true;
  const std::vector<Launch> recorded = run(o);
  o.fake_kernel_grids = false;  // format 1.4: no KernelDef.grid
  const std::vector<Launch> byName = run(o);
  ASSERT_FALSE(recorded.empty());
  ASSERT_EQ(recorded.size(), byName.size());
  for (size_t i = 0; i < recorded.size(); ++i) {
    EXPECT_EQ(recorded[i].name, byName[i].name) << i;
    EXPECT_EQ(recorded[i].fromGraph, byName[i].fromGraph) << i;
    for (int d = 0; d < 6; ++d) EXPECT_EQ(recorded[i].dims[d], byName[i].dims[d]) << i << " " << d;
  }
}

TEST_F(CudaBackendGridFakeTest, TheArtifactsRuleSizesTheLaunchNotTheRuntime) {
  testing::LlamaProgramOptions o;
  // The embedding with a CTA per 4 tokens, and attention with its axes swapped: the backend
  // launches what the artifact says (the fake kernels do not run, so any grid is legal).
  o.fake_kernel_grid_overrides["ingot_fused_embedding_f32"] = {
      gridAxis(GridCount::Tokens, 4), gridAxis(GridCount::One), gridAxis(GridCount::One)};
  const std::string attention = "ingot_decode_test_f32_d16_g2";
  o.fake_kernel_grid_overrides[attention] = {gridAxis(GridCount::Requests),
                                             gridAxis(GridCount::KvHeads),
                                             gridAxis(GridCount::Splits)};
  const std::vector<Launch> ls = run(o);
  ASSERT_FALSE(ls.empty());
  EXPECT_EQ(ls.front().name, "ingot_fused_embedding_f32");
  EXPECT_EQ(ls.front().dims[0], 9u) << "36 prefill tokens, 4 per CTA";
  const Launch* prefill = nullptr;
  for (const Launch& l : ls)
    if (l.name == attention && !prefill) prefill = &l;
  ASSERT_TRUE(prefill);
  EXPECT_EQ(prefill->dims[0], 3u) << "x: the prefill's 3 requests";
  EXPECT_EQ(prefill->dims[1], static_cast<unsigned>(o.kv_heads)) << "y: kv heads";
}

TEST_F(CudaBackendGridFakeTest, ARuleReadingACountTheLaunchDoesNotHaveFailsTheStepNamingIt) {
  testing::LlamaProgramOptions o;
  o.fake_kernel_grid_overrides["ingot_fused_silu_mul_f32"] = {
      gridAxis(GridCount::Splits), gridAxis(GridCount::One), gridAxis(GridCount::One)};
  Status failed;
  run(o, &failed);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.message().find("kernel ingot_fused_silu_mul_f32: its grid reads the count "
                                  "'Splits', which this launch does not give"),
            std::string::npos)
      << failed.message();
  EXPECT_NE(failed.message().find("step "), std::string::npos) << failed.message();
}

TEST_F(CudaBackendGridFakeTest, APerHeadNormLaunchesOneRowPerTokenAndHead) {
  testing::LlamaProgramOptions o;  // 4 q / 2 kv heads of 16
  o.qk_norm = true;
  const std::vector<Launch> ls = run(o);
  // Per layer: the input and post-attention norms (a row per token), then q's and k's norm
  // (a row per token and head, each normalizing head_dim features with its own weight).
  std::vector<unsigned> prefill, replayed;
  for (const Launch& l : ls)
    if (l.name == "ingot_fused_rms_norm_residual_f32")
      (l.fromGraph ? replayed : prefill).push_back(l.dims[0]);
  const unsigned T = 36, D = 4;  // the prefill's tokens; a decode graph's (3 padded to 4)
  std::vector<unsigned> want;
  for (int layer = 0; layer < o.layers; ++layer)
    for (unsigned rows : {T, T * 4, T * 2, T}) want.push_back(rows);
  want.push_back(T);  // the final norm
  ASSERT_GE(prefill.size(), want.size());
  EXPECT_EQ(std::vector<unsigned>(prefill.begin(), prefill.begin() + want.size()), want);
  for (unsigned& rows : want) rows = rows / T * D;
  ASSERT_EQ(replayed.size(), 2 * want.size()) << "two graph replays";
  EXPECT_EQ(std::vector<unsigned>(replayed.begin(), replayed.begin() + want.size()), want);
}

TEST_F(CudaBackendGridFakeTest, AScaleStepLaunchesItsKernelOverTheStepsElements) {
  testing::LlamaProgramOptions o;
  o.embedding_scale = 25.298221f;
  // (in, out, factor, count): the launch's arguments are checked against these sizes.
  o.fake_kernel_param_bytes = {{"ingot_fused_scale_f32", {8, 8, 4, 8}}};
  const std::vector<Launch> ls = run(o);
  std::vector<const Launch*> scales;
  for (const Launch& l : ls)
    if (l.name == "ingot_fused_scale_f32") scales.push_back(&l);
  ASSERT_EQ(scales.size(), 4u) << "one per step: the prefill and three decode steps";
  EXPECT_EQ(scales[0]->dims[0], 9u) << "36 tokens x 64 features, 256 per CTA";
  EXPECT_EQ(scales[3]->dims[0], 1u) << "3 tokens x 64 features";
  EXPECT_EQ(scales[0]->dims[3], 256u);
  EXPECT_TRUE(scales[3]->fromGraph) << "a decode graph replays the scale too";
  EXPECT_EQ(ls[1].name, "ingot_fused_scale_f32") << "right after the embedding";
}

TEST_F(CudaBackendGridFakeTest, AScaleStepWithoutItsKernelIsRefusedAtLoadNamingIt) {
  testing::LlamaProgramOptions o;
  o.embedding_scale = 2.0f;
  o.fake_cuda_kernels = true;
  o.fake_scale_kernel = false;  // compiled by a compiler without the scale kernel
  auto a = tinyLlama(o);
  CudaBackendOptions options;
  options.num_kv_blocks = 8;
  options.kernels.ptx_cache_dir = "none";
  StatusOr<std::unique_ptr<CudaBackend>> b = CudaBackend::create(*a, options);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("step 1 (scale) needs CUDA kernel ingot_fused_scale_f32"),
            std::string::npos)
      << b.status().message();
}

}  // namespace
}  // namespace ingot
