// CudaBackend's control flow on the CPU, over a fake libcuda (host memory, launches recorded,
// graphs replay their captured launches) and a fake libcublasLt (GEMM shapes recorded): what
// each step launches and with which grids, decode graphs warmed up, captured and replayed,
// buffers that grow dropping their graphs, bad steps refused before any launch, and the
// errors of unsupported artifacts. No kernel runs, so no logits are checked here; the GPU
// test (test/gpu/cuda_backend_test.cc) checks those against the CPU backend.
#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/kernels/fused_params.h"
#include "core/kernels/quant_params.h"
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

using Launch = RecordedLaunch;

class CudaBackendFakeTest : public FakeCudaTest {
 protected:

  std::unique_ptr<Artifact> artifact(testing::LlamaProgramOptions o) {
    o.fake_cuda_kernels = true;
    return tinyLlama(o);
  }
  std::unique_ptr<CudaBackend> backend(const Artifact& a, int32_t graphs = 16) {
    CudaBackendOptions o;
    o.num_kv_blocks = 64;
    o.max_model_len = 256;
    o.max_graph_batch = graphs;
    o.kernels.ptx_cache_dir = "none";
    StatusOr<std::unique_ptr<CudaBackend>> b = CudaBackend::create(a, o);
    EXPECT_TRUE(b.ok()) << b.status().message();
    return b.ok() ? std::move(b).value() : nullptr;
  }
  /// (rows, cols) of A, B and D of every GEMM since the reset.
  std::vector<std::vector<int64_t>> gemms() {
    auto count = reinterpret_cast<int (*)()>(::dlsym(blas_, "fakeCublasLtCallCount"));
    auto get = reinterpret_cast<void (*)(int, int64_t*)>(::dlsym(blas_, "fakeCublasLtCall"));
    std::vector<std::vector<int64_t>> out;
    for (int i = 0; i < count(); ++i) {
      std::vector<int64_t> shape(6);
      get(i, shape.data());
      out.push_back(shape);
    }
    return out;
  }
  std::vector<int32_t> randomTokens(int n, int vocab) {
    std::vector<int32_t> t(n);
    for (int32_t& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
    return t;
  }

  std::mt19937 rng{ingot::testing::testSeed()};
};

size_t countOf(const std::vector<Launch>& ls, const std::string& name) {
  size_t n = 0;
  for (const Launch& l : ls) n += l.name == name;
  return n;
}

/// Each launch of `kernel` (a gated MLP's activation) follows its gate and up products, int4
/// GEMVs here.
void expectAfterGateAndUpGemvs(const std::vector<Launch>& ls, const std::string& kernel) {
  for (size_t i = 0; i < ls.size(); ++i) {
    if (ls[i].name != kernel) continue;
    ASSERT_GE(i, 2u);
    EXPECT_EQ(ls[i - 1].name, "ingot_quant_gemv_int4min_f16") << "the up product";
    EXPECT_EQ(ls[i - 2].name, "ingot_quant_gemv_int4min_f16") << "the gate product";
  }
}

TEST_F(CudaBackendFakeTest, PrefillLaunchesEveryStepWithItsGridAndGemmShapes) {
  testing::LlamaProgramOptions o;  // 2 layers, 4 q / 2 kv heads of 16, vocab 256
  auto a = artifact(o);
  auto b = backend(*a);
  ASSERT_TRUE(b);
  EXPECT_NE(b->describe().find("Fake GPU"), std::string::npos) << b->describe();
  SetUp();  // forget what loading did
  Sequence seq;
  seq.tokens = randomTokens(12, o.vocab);
  seq.blocks = {3, 9};
  std::vector<float> logits;
  ASSERT_TRUE(b->step(makeStep({&seq}, {12}, o.block_size), &logits).ok());
  EXPECT_EQ(logits.size(), static_cast<size_t>(12 * o.vocab));
  EXPECT_EQ(b->lastGraphBucket(), 0) << "a prefill runs eagerly";
  const std::vector<Launch> ls = launches();
  ASSERT_FALSE(ls.empty());
  EXPECT_EQ(ls.front().name, "ingot_fused_embedding_f32");
  EXPECT_EQ(ls.front().dims[0], 12u) << "one CTA per token";
  EXPECT_EQ(ls.front().dims[3], 256u);
  EXPECT_EQ(countOf(ls, "ingot_fused_embedding_f32"), 1u);
  EXPECT_EQ(countOf(ls, "ingot_fused_gather_rows_f32"), 1u);
  // Per layer: q/k rope and a kv write (one kernel), attention, silu_mul, two adds.
  EXPECT_EQ(countOf(ls, "ingot_fused_rope_kv_write_f32"), static_cast<size_t>(3 * o.layers));
  EXPECT_EQ(countOf(ls, "ingot_fused_silu_mul_f32"), static_cast<size_t>(o.layers));
  EXPECT_EQ(countOf(ls, "ingot_fused_add_f32"), static_cast<size_t>(2 * o.layers));
  EXPECT_EQ(countOf(ls, "ingot_fused_rms_norm_residual_f32"), static_cast<size_t>(2 * o.layers + 1));
  size_t attention = 0;
  for (const Launch& l : ls)
    if (l.name.rfind("ingot_decode_test", 0) == 0) {
      ++attention;
      EXPECT_EQ(l.dims[0], static_cast<unsigned>(o.kv_heads)) << "grid x: kv heads";
      EXPECT_EQ(l.dims[1], 1u) << "grid y: requests";
      EXPECT_EQ(l.dims[3], 128u);
    }
  EXPECT_EQ(attention, static_cast<size_t>(o.layers));
  // Every linear is x [12, K] . w [N, K]^T, the head [12, D] . [vocab, D]^T: in cuBLASLt's
  // column-major terms A = w (K x N), B = x (K x 12), D = y (N x 12).
  const auto g = gemms();
  ASSERT_EQ(g.size(), static_cast<size_t>(7 * o.layers + 1));
  EXPECT_EQ(countOf(ls, "ingot_fused_to_bf16_f32"), g.size()) << "each GEMM input is rounded once";
  for (const auto& s : g) {
    EXPECT_EQ(s[0], s[2]) << "K of A and B agree";
    EXPECT_EQ(s[3], 12) << "B has the step's 12 rows";
    EXPECT_EQ(s[4], s[1]) << "D has N rows";
    EXPECT_EQ(s[5], 12);
  }
  EXPECT_EQ(g.back()[1], o.vocab) << "the head GEMM is last";
}

TEST_F(CudaBackendFakeTest, DecodeWarmsUpCapturesOnceAndReplaysTheSameLaunches) {
  testing::LlamaProgramOptions o;
  auto a = artifact(o);
  auto b = backend(*a);
  ASSERT_TRUE(b);
  std::vector<Sequence> seqs(3);
  std::vector<Sequence*> all;
  for (int r = 0; r < 3; ++r) {
    seqs[r].tokens = randomTokens(12, o.vocab);
    seqs[r].blocks = {2 * r + 1, 2 * r + 2};
    all.push_back(&seqs[r]);
  }
  std::vector<float> logits;
  ASSERT_TRUE(b->step(makeStep(all, {8, 8, 8}, o.block_size), &logits).ok());
  SetUp();
  std::vector<std::vector<Launch>> perStep;
  for (int i = 0; i < 3; ++i) {
    const size_t before = launches().size();
    ASSERT_TRUE(b->step(makeStep(all, {1, 1, 1}, o.block_size), &logits).ok());
    EXPECT_EQ(logits.size(), static_cast<size_t>(3 * o.vocab));
    const std::vector<Launch> ls = launches();
    perStep.emplace_back(ls.begin() + static_cast<long>(before), ls.end());
    EXPECT_EQ(b->lastGraphBucket(), i == 0 ? -4 : 4) << "3 requests take the graph of 4";
  }
  EXPECT_EQ(stats().captures, 1);
  EXPECT_EQ(stats().graphLaunches, 2);
  // The graph replays exactly what the warm-up ran: same kernels, same grids (4 padded rows).
  ASSERT_EQ(perStep[0].size(), perStep[1].size());
  ASSERT_EQ(perStep[1].size(), perStep[2].size());
  for (size_t i = 0; i < perStep[0].size(); ++i) {
    EXPECT_FALSE(perStep[0][i].fromGraph);
    EXPECT_TRUE(perStep[1][i].fromGraph && perStep[2][i].fromGraph);
    EXPECT_EQ(perStep[0][i].name, perStep[1][i].name);
    for (int d = 0; d < 6; ++d) EXPECT_EQ(perStep[0][i].dims[d], perStep[2][i].dims[d]);
  }
  EXPECT_EQ(perStep[0].front().dims[0], 4u) << "the embedding runs over the bucket's 4 rows";
  // Without graphs the same decode step runs eagerly at its own 3 rows.
  auto eager = backend(*a, 0);
  ASSERT_TRUE(eager);
  SetUp();
  std::vector<Sequence> copies = seqs;
  std::vector<Sequence*> call;
  for (Sequence& s : copies) call.push_back(&s);
  ASSERT_TRUE(eager->step(makeStep(call, {1, 1, 1}, o.block_size), &logits).ok());
  EXPECT_EQ(eager->lastGraphBucket(), 0);
  EXPECT_EQ(launches().front().dims[0], 3u);
  EXPECT_EQ(stats().captures, 0);
}

TEST_F(CudaBackendFakeTest, ALargerStepGrowsTheBuffersAndDropsStaleGraphs) {
  testing::LlamaProgramOptions o;
  o.max_context = 1024;
  auto a = artifact(o);
  auto b = backend(*a);
  ASSERT_TRUE(b);
  Sequence seq;
  seq.tokens = randomTokens(700, o.vocab);
  for (int k = 0; k < 44; ++k) seq.blocks.push_back(k + 1);
  Sequence small = seq;
  small.tokens.resize(16);
  small.blocks = {60};
  std::vector<float> logits;
  // Two decode steps: warm-up, then a captured graph.
  ASSERT_TRUE(b->step(makeStep({&small}, {8}, o.block_size), &logits).ok());
  ASSERT_TRUE(b->step(makeStep({&small}, {1}, o.block_size), &logits).ok());
  ASSERT_TRUE(b->step(makeStep({&small}, {1}, o.block_size), &logits).ok());
  EXPECT_EQ(b->lastGraphBucket(), 1);
  EXPECT_EQ(stats().liveGraphExecs, 1);
  // 600 tokens at once: more than the first buffers hold (512), so they grow and the graph
  // that pointed into them goes.
  ASSERT_TRUE(b->step(makeStep({&seq}, {600}, o.block_size), &logits).ok());
  EXPECT_EQ(stats().liveGraphExecs, 0);
  // The next decode step is captured anew (its bucket needs no second warm-up).
  const int captures = stats().captures;
  ASSERT_TRUE(b->step(makeStep({&small}, {1}, o.block_size), &logits).ok());
  EXPECT_EQ(b->lastGraphBucket(), 1);
  EXPECT_EQ(stats().captures, captures + 1);
  EXPECT_EQ(stats().liveGraphExecs, 1);
}

TEST_F(CudaBackendFakeTest, SamplingKeepsTheLogitsOnTheGpuWithGraphsOfItsOwn) {
  testing::LlamaProgramOptions o;
  auto a = artifact(o);
  auto b = backend(*a);
  ASSERT_TRUE(b);
  ASSERT_TRUE(b->samplesOnBackend());
  std::vector<Sequence> seqs(3);
  std::vector<Sequence*> all;
  for (int r = 0; r < 3; ++r) {
    seqs[r].tokens = randomTokens(16, o.vocab);  // 8 prefilled, 5 decoded
    seqs[r].blocks = {2 * r + 1, 2 * r + 2};
    all.push_back(&seqs[r]);
  }
  auto rowsFor = [&](const StepInputs& in) {
    std::vector<RowSampling> rows(in.logit_rows.size());
    for (size_t i = 0; i < rows.size(); ++i)
      rows[i] = {0.8f, 40, 0.9f, 0.05f, 0.9 * static_cast<double>(i) / rows.size()};
    return rows;
  };
  SetUp();
  std::vector<int32_t> tokens;
  StepInputs prefill = makeStep(all, {8, 8, 8}, o.block_size);
  ASSERT_TRUE(b->stepAndSample(prefill, rowsFor(prefill), &tokens).ok());
  EXPECT_EQ(tokens.size(), prefill.logit_rows.size());
  std::vector<Launch> ls = launches();
  ASSERT_FALSE(ls.empty());
  EXPECT_EQ(ls.back().name, "ingot_fused_sample_f32") << "sampling runs after the head";
  EXPECT_EQ(ls.back().dims[0], static_cast<unsigned>(prefill.logit_rows.size()));
  // Decode: warm-up, capture, replay, on a graph key of its own; then a step that wants
  // logits warms up and captures its own graph of the same bucket.
  for (int i = 0; i < 3; ++i) {
    StepInputs decode = makeStep(all, {1, 1, 1}, o.block_size);
    ASSERT_TRUE(b->stepAndSample(decode, rowsFor(decode), &tokens).ok());
    EXPECT_EQ(tokens.size(), 3u);
    EXPECT_EQ(b->lastGraphBucket(), i == 0 ? -4 : 4);
  }
  EXPECT_EQ(stats().captures, 1);
  std::vector<float> logits;
  ASSERT_TRUE(b->step(makeStep(all, {1, 1, 1}, o.block_size), &logits).ok());
  EXPECT_EQ(b->lastGraphBucket(), -4) << "the logits graph is another graph";
  ASSERT_TRUE(b->step(makeStep(all, {1, 1, 1}, o.block_size), &logits).ok());
  EXPECT_EQ(b->lastGraphBucket(), 4);
  EXPECT_EQ(stats().captures, 2);
  EXPECT_EQ(stats().liveGraphExecs, 2);
  // Rows that do not match the logit rows, or a uniform outside [0, 1), are refused.
  StepInputs next = makeStep(all, {1, 1, 1}, o.block_size);
  std::vector<RowSampling> bad = rowsFor(next);
  bad.pop_back();
  EXPECT_FALSE(b->stepAndSample(next, bad, &tokens).ok());
  bad = rowsFor(next);
  bad[1].u = 1.0;
  EXPECT_FALSE(b->stepAndSample(next, bad, &tokens).ok());
}

TEST_F(CudaBackendFakeTest, QuantizedLinearsRunTheirFormatsGemvKernelFromThePackedBytes) {
  for (schema::QuantKind kind : {schema::QuantKind::Int4Group, schema::QuantKind::Nvfp4}) {
    testing::LlamaProgramOptions o;
    o.linear_quant = kind;
    o.hidden = 64;
    o.intermediate = 128;
    auto a = artifact(o);
    auto b = backend(*a);
    ASSERT_TRUE(b);
    SetUp();
    Sequence seq;
    seq.tokens = randomTokens(5, o.vocab);
    seq.blocks = {1};
    std::vector<float> logits;
    ASSERT_TRUE(b->step(makeStep({&seq}, {5}, o.block_size), &logits).ok());
    const std::string name = kind == schema::QuantKind::Nvfp4 ? "ingot_quant_gemv_nvfp4"
                                                               : "ingot_quant_gemv_int4min_f16";
    size_t gemv = 0;
    for (const Launch& l : launches())
      if (l.name == name) {
        ++gemv;
        EXPECT_EQ(l.dims[3], 128u);
        // A warp per output row, four per CTA: N = 32 (k, v), 64 (q, o, down), 128 (gate, up).
        EXPECT_TRUE(l.dims[0] == 8 || l.dims[0] == 16 || l.dims[0] == 32) << l.dims[0];
      }
    EXPECT_EQ(gemv, static_cast<size_t>(7 * o.layers)) << name;
    EXPECT_EQ(gemms().size(), 1u) << "only the (bf16) head goes through cuBLASLt";
  }
}

TEST_F(CudaBackendFakeTest, AGatedLinearRunsItsTwoProductsThenTheSiluMulInPlace) {
  for (schema::QuantKind kind : {schema::QuantKind::None, schema::QuantKind::Int4Group}) {
    SCOPED_TRACE(schema::EnumNameQuantKind(kind));
    testing::LlamaProgramOptions o;
    o.linear_quant = kind;
    o.fuse_elementwise = true;  // every MLP's gate, up and silu_mul in one gated_linear
    auto a = artifact(o);
    auto b = backend(*a);
    ASSERT_TRUE(b);
    SetUp();
    Sequence seq;
    seq.tokens = randomTokens(5, o.vocab);
    seq.blocks = {1};
    std::vector<float> logits;
    ASSERT_TRUE(b->step(makeStep({&seq}, {5}, o.block_size), &logits).ok());
    const std::vector<Launch> ls = launches();
    // Each layer's silu_mul over [5, intermediate], after its up product.
    EXPECT_EQ(countOf(ls, "ingot_fused_silu_mul_f32"), static_cast<size_t>(o.layers));
    if (kind != schema::QuantKind::None) expectAfterGateAndUpGemvs(ls, "ingot_fused_silu_mul_f32");
    if (kind == schema::QuantKind::None) {
      // q, k, v, o, gate, up, down per layer and the head, gate and up of [intermediate, D].
      const auto g = gemms();
      ASSERT_EQ(g.size(), static_cast<size_t>(7 * o.layers + 1));
      EXPECT_EQ(g[4][1], o.intermediate);
      EXPECT_EQ(g[5][1], o.intermediate);
    } else {
      EXPECT_EQ(countOf(ls, "ingot_quant_gemv_int4min_f16"), static_cast<size_t>(7 * o.layers));
    }
  }
}

TEST_F(CudaBackendFakeTest, AGeluGatedLinearRunsGeluMulInPlaceAfterItsTwoProducts) {
  testing::LlamaProgramOptions o;
  o.linear_quant = schema::QuantKind::Int4Group;
  o.fuse_elementwise = true;
  o.gated_activation = 1;  // gelu
  auto a = artifact(o);
  auto b = backend(*a);
  ASSERT_TRUE(b);
  SetUp();
  Sequence seq;
  seq.tokens = randomTokens(5, o.vocab);
  seq.blocks = {1};
  std::vector<float> logits;
  ASSERT_TRUE(b->step(makeStep({&seq}, {5}, o.block_size), &logits).ok());
  const std::vector<Launch> ls = launches();
  EXPECT_EQ(countOf(ls, "ingot_fused_gelu_mul_f32"), static_cast<size_t>(o.layers));
  EXPECT_EQ(countOf(ls, "ingot_fused_silu_mul_f32"), 0u);
  expectAfterGateAndUpGemvs(ls, "ingot_fused_gelu_mul_f32");
}

TEST_F(CudaBackendFakeTest, AGeluGatedLinearWithoutItsKernelIsRefusedAtLoadNamingIt) {
  testing::LlamaProgramOptions o;
  o.fuse_elementwise = true;
  o.gated_activation = 1;  // gelu
  o.fake_cuda_kernels = true;
  o.fake_gelu_kernel = false;  // an artifact whose GELU-gated MLPs have no kernel
  std::unique_ptr<Artifact> a = tinyLlama(o);
  CudaBackendOptions options;
  options.num_kv_blocks = 8;
  options.kernels.ptx_cache_dir = "none";
  StatusOr<std::unique_ptr<CudaBackend>> b = CudaBackend::create(*a, options);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("needs CUDA kernel ingot_fused_gelu_mul_f32, which the "
                                      "artifact lacks"),
            std::string::npos)
      << b.status().message();
}

TEST_F(CudaBackendFakeTest, PrefillRowsRunTheTensorCoreGemmAndDecodeRowsTheGemv) {
  testing::LlamaProgramOptions o;
  o.linear_quant = schema::QuantKind::Mxfp4;
  o.hidden = 64;
  o.intermediate = 320;  // gate/up: N = 320, three 128-wide GEMM tiles
  auto a = artifact(o);
  auto b = backend(*a);
  ASSERT_TRUE(b);
  Sequence seq;
  const int prefill = 150, below = quantgemm::kQuantGemmMinRows - 1;
  seq.tokens = randomTokens(prefill + below + 1, o.vocab);
  for (int32_t blk = 0; blk < 12; ++blk) seq.blocks.push_back(blk);
  // rows: the step's token count; want: whether the GEMM serves it.
  for (const auto& [rows, want] : {std::pair<int, bool>{prefill, true}, {below, false}, {1, false}}) {
    SCOPED_TRACE("rows " + std::to_string(rows));
    SetUp();
    std::vector<float> logits;
    ASSERT_TRUE(b->step(makeStep({&seq}, {rows}, o.block_size), &logits).ok());
    size_t gemm = 0, gemv = 0;
    for (const Launch& l : launches()) {
      if (l.name == "ingot_quant_gemm_mxfp4") {
        ++gemm;
        EXPECT_EQ(l.dims[3], 256u);
        // 128 outputs x 64 tokens per CTA: N = 32 (k, v) or 64 (q, o, down) in one column
        // of tiles, N = 320 (gate, up) in three; 150 tokens in three rows of tiles.
        EXPECT_TRUE(l.dims[0] == 1 || l.dims[0] == 3) << l.dims[0];
        EXPECT_EQ(l.dims[1], 3u);
      } else if (l.name == "ingot_quant_gemv_mxfp4") {
        ++gemv;
        EXPECT_EQ(l.dims[1], 1u);
      }
    }
    EXPECT_EQ(gemm, want ? static_cast<size_t>(7 * o.layers) : 0u);
    EXPECT_EQ(gemv, want ? 0u : static_cast<size_t>(7 * o.layers));
  }
}

TEST_F(CudaBackendFakeTest, AnArtifactWithoutTheGemmsRunsPrefillThroughTheGemv) {
  testing::LlamaProgramOptions o;
  o.linear_quant = schema::QuantKind::Int4Group;
  o.fake_quant_gemm_kernels = false;
  auto a = artifact(o);
  auto b = backend(*a);
  ASSERT_TRUE(b);
  SetUp();
  Sequence seq;
  seq.tokens = randomTokens(100, o.vocab);
  for (int32_t blk = 0; blk < 7; ++blk) seq.blocks.push_back(blk);
  std::vector<float> logits;
  ASSERT_TRUE(b->step(makeStep({&seq}, {100}, o.block_size), &logits).ok());
  size_t gemv = 0;
  for (const Launch& l : launches()) {
    EXPECT_EQ(l.name.rfind("ingot_quant_gemm_", 0), std::string::npos) << l.name;
    gemv += l.name == "ingot_quant_gemv_int4min_f16";
  }
  EXPECT_EQ(gemv, static_cast<size_t>(7 * o.layers));
}

TEST_F(CudaBackendFakeTest, AnFp8WeightWithKEightModSixteenRunsPrefillThroughTheGemv) {
  // intermediate 120: down_proj's K = 120 takes the GEMV's 8-byte code chunks, but a GEMM
  // stage's 16 codes would read past its rows, so down stays on the GEMV for every row
  // count while q/k/v/o and gate/up (K = 64) take the GEMM. W8A8 off: weight-only fp8.
  testing::LlamaProgramOptions o;
  o.linear_quant = schema::QuantKind::PerChannel;
  o.hidden = 64;
  o.intermediate = 120;
  auto a = artifact(o);
  CudaBackendOptions options;
  options.num_kv_blocks = 64;
  options.max_model_len = 256;
  options.kernels.ptx_cache_dir = "none";
  options.fp8_w8a8_min_rows = 0;
  StatusOr<std::unique_ptr<CudaBackend>> b = CudaBackend::create(*a, options);
  ASSERT_TRUE(b.ok()) << b.status().message();
  SetUp();
  Sequence seq;
  const int rows = 2 * quantgemm::kQuantGemmMinRows;
  seq.tokens = randomTokens(rows, o.vocab);
  for (int32_t blk = 0; blk < rows / o.block_size + 1; ++blk) seq.blocks.push_back(blk);
  std::vector<float> logits;
  ASSERT_TRUE((*b)->step(makeStep({&seq}, {rows}, o.block_size), &logits).ok());
  const std::vector<Launch> ls = launches();
  EXPECT_EQ(countOf(ls, "ingot_quant_gemm_fp8"), static_cast<size_t>(6 * o.layers));
  EXPECT_EQ(countOf(ls, "ingot_quant_gemv_fp8"), static_cast<size_t>(o.layers));
  for (const Launch& l : ls)
    if (l.name == "ingot_quant_gemv_fp8")  // down: N = 64, a warp per row, four per CTA
      EXPECT_EQ(l.dims[0], 16u);
}

TEST_F(CudaBackendFakeTest, AQuantizedWeightTheGemvCannotReadIsRefusedAtLoadNamingIt) {
  // intermediate 100: down_proj's K = 100 is not whole 8-byte fp8 code chunks.
  testing::LlamaProgramOptions o;
  o.linear_quant = schema::QuantKind::PerChannel;
  o.hidden = 64;
  o.intermediate = 100;
  auto a = artifact(o);
  CudaBackendOptions options;
  options.num_kv_blocks = 8;
  options.kernels.ptx_cache_dir = "none";
  StatusOr<std::unique_ptr<CudaBackend>> b = CudaBackend::create(*a, options);
  ASSERT_FALSE(b.ok());
  const std::string m = b.status().message();
  EXPECT_NE(m.find("mlp.down_proj"), std::string::npos) << m;
  EXPECT_NE(m.find("K = 100"), std::string::npos) << m;
  EXPECT_NE(m.find("multiple of 8"), std::string::npos) << m;
  EXPECT_NE(m.find("ingot_quant_gemv_fp8"), std::string::npos) << m;
  EXPECT_TRUE(launches().empty());
}

TEST_F(CudaBackendFakeTest, BadStepsAreRefusedBeforeAnyLaunch) {
  testing::LlamaProgramOptions o;
  auto a = artifact(o);
  auto b = backend(*a);
  ASSERT_TRUE(b);
  SetUp();
  Sequence seq;
  seq.tokens = {static_cast<int32_t>(o.vocab)};
  seq.blocks = {0};
  std::vector<float> logits;
  Status s = b->step(makeStep({&seq}, {1}, o.block_size), &logits);
  EXPECT_FALSE(s.ok());
  Sequence outside;
  outside.tokens = {1};
  outside.blocks = {64};  // the pool has 64 blocks
  EXPECT_FALSE(b->step(makeStep({&outside}, {1}, o.block_size), &logits).ok());
  EXPECT_TRUE(launches().empty());
  EXPECT_FALSE(b->copyKvBlocks(0, 64).ok());
  EXPECT_FALSE(b->copyKvSlots({{0, 64 * o.block_size}}).ok());
}

TEST_F(CudaBackendFakeTest, ALaunchWithArgumentsTheKernelDoesNotTakeIsRefusedNamingBoth) {
  testing::LlamaProgramOptions o;
  // The embedding kernel takes what this runtime passes; the rms_norm kernel is recorded as
  // if built for another kernel ABI, one without the epsilon.
  o.fake_kernel_param_bytes = {
      {"ingot_fused_embedding_f32", {static_cast<uint32_t>(sizeof(fused::EmbeddingParams))}},
      {"ingot_fused_rms_norm_residual_f32", {8, 8, 8, 8, 4}}};
  auto a = artifact(o);
  auto b = backend(*a);
  ASSERT_TRUE(b);
  SetUp();
  Sequence seq;
  seq.tokens = {1, 2};
  seq.blocks = {0};
  std::vector<float> logits;
  Status s = b->step(makeStep({&seq}, {2}, o.block_size), &logits);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("kernel 'ingot_fused_rms_norm_residual_f32' takes 5 parameters of "
                             "8, 8, 8, 8, 4 bytes (the artifact's kernel ABI); this runtime "
                             "passes 6 parameters of 8, 8, 8, 8, 4, 4 bytes"),
            std::string::npos)
      << s.message();
  // The embedding before it ran: its recorded sizes matched.
  EXPECT_EQ(countOf(launches(), "ingot_fused_embedding_f32"), 1u);
  EXPECT_EQ(countOf(launches(), "ingot_fused_rms_norm_residual_f32"), 0u);
}

TEST_F(CudaBackendFakeTest, UnsupportedArtifactsAreRefusedAtLoadNamingWhy) {
  CudaBackendOptions options;
  options.num_kv_blocks = 8;
  // No kernels at all: the first missing fused kernel is named.
  testing::LlamaProgramOptions plain;
  StatusOr<std::vector<uint8_t>> bytes = testing::buildLlamaArtifact(plain);
  ASSERT_TRUE(bytes.ok());
  StatusOr<Artifact> bare = Artifact::openFromMemory(*bytes);
  ASSERT_TRUE(bare.ok());
  StatusOr<std::unique_ptr<CudaBackend>> b = CudaBackend::create(*bare, options);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("ingot_fused_embedding_f32"), std::string::npos)
      << b.status().message();
  EXPECT_NE(b.status().message().find("--cuda-targets"), std::string::npos);
  options.kv_dtype = KvDtype::kFp8E4M3;
  auto ok = artifact(plain);
  b = CudaBackend::create(*ok, options);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("fp8"), std::string::npos) << b.status().message();
}

TEST_F(CudaBackendFakeTest, KvPoolIsSizedFromFreeMemoryWhenNotGiven) {
  testing::LlamaProgramOptions o;
  auto a = artifact(o);
  CudaBackendOptions options;
  options.max_model_len = 256;
  options.gpu_memory_utilization = 0.535;  // the fake: 16 GiB, half of it free
  StatusOr<std::unique_ptr<CudaBackend>> b = CudaBackend::create(*a, options);
  ASSERT_TRUE(b.ok()) << b.status().message();
  // 0.535 x 16 GiB - 8 GiB in use - 512 MiB reserve = 61 MiB of blocks.
  const int64_t blockBytes = int64_t{o.layers} * 2 * o.block_size * o.kv_heads * o.head_dim * 4;
  const double expected = (0.535 * 16 - 8 - 0.5) * (1 << 30) / blockBytes;
  EXPECT_NEAR(static_cast<double>((*b)->numKvBlocks()), expected, 1.0);
  options.gpu_memory_utilization = 0.5;  // nothing left: an error that says what to change
  b = CudaBackend::create(*a, options);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("--gpu-memory-utilization"), std::string::npos);
}

}  // namespace
}  // namespace ingot
