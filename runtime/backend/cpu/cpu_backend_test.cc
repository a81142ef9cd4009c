// CpuBackend end to end on tiny Llama programs: a dense reference model, batching
// invariance, weight dtypes, dummy weights, copy-on-write blocks and error paths.
#include "runtime/backend/cpu/cpu_backend.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>

#include "core/region/region_examples.h"
#include "runtime/backend/cpu/half_float.h"
#include "runtime/backend/cpu/program_plan.h"
#include "testing/llama_program.h"
#include "runtime/backend/cpu/weight_store.h"
#include "testing/step_builder.h"
#include "testing/test_seed.h"

namespace ingot {
namespace {

using testing::makeStep;
using testing::Sequence;

using testing::LlamaProgramOptions;

Artifact openLlama(const LlamaProgramOptions& o) {
  StatusOr<std::vector<uint8_t>> bytes = testing::buildLlamaArtifact(o);
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  StatusOr<Artifact> a = Artifact::openFromMemory(*bytes);
  EXPECT_TRUE(a.ok()) << a.status().message();
  return std::move(*a);
}

std::unique_ptr<CpuBackend> makeBackend(const Artifact& a, int64_t blocks = 32, int threads = 2,
                                        std::optional<SimdLevel> simd = std::nullopt) {
  CpuBackendOptions opts;
  opts.num_kv_blocks = blocks;
  opts.num_threads = threads;
  opts.simd = simd;
  StatusOr<std::unique_ptr<CpuBackend>> b = CpuBackend::create(a, opts);
  EXPECT_TRUE(b.ok()) << b.status().message();
  return b.ok() ? std::move(*b) : nullptr;
}

std::vector<int32_t> randomTokens(int n, int vocab, std::mt19937& rng) {
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % vocab);
  return t;
}

// ---- A dense reference model: naive loops in double over the artifact's weights. ----

class ReferenceLlama {
 public:
  ReferenceLlama(const Artifact& a, const LlamaProgramOptions& o) : a_(a), o_(o) {}

  /// Logits [n, vocab] for every position of one sequence, with causal attention.
  std::vector<double> forward(const std::vector<int32_t>& tokens) {
    const int64_t n = tokens.size(), D = o_.hidden, H = o_.heads, Hk = o_.kv_heads,
                  Dh = o_.head_dim, V = o_.vocab, F = o_.intermediate;
    const std::vector<double>& embed = w("model.embed_tokens.weight");
    std::vector<double> h(n * D);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t d = 0; d < D; ++d) h[t * D + d] = embed[tokens[t] * D + d];
    for (int l = 0; l < o_.layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      std::vector<double> x = rms(h, w(p + "input_layernorm.weight"), n, D);
      std::vector<double> q = lin(x, p + "self_attn.q_proj", n, D, H * Dh);
      std::vector<double> k = lin(x, p + "self_attn.k_proj", n, D, Hk * Dh);
      std::vector<double> v = lin(x, p + "self_attn.v_proj", n, D, Hk * Dh);
      rope(q, n, H, Dh);
      rope(k, n, Hk, Dh);
      std::vector<double> att(n * H * Dh, 0.0);
      for (int64_t t = 0; t < n; ++t)
        for (int64_t hh = 0; hh < H; ++hh) {
          const int64_t g = hh / (H / Hk);
          std::vector<double> s(t + 1);
          double mx = -INFINITY, sum = 0;
          for (int64_t j = 0; j <= t; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < Dh; ++d) dot += q[(t * H + hh) * Dh + d] * k[(j * Hk + g) * Dh + d];
            s[j] = dot / std::sqrt(double(Dh));
            mx = std::max(mx, s[j]);
          }
          for (double& e : s) sum += (e = std::exp(e - mx));
          for (int64_t j = 0; j <= t; ++j)
            for (int64_t d = 0; d < Dh; ++d)
              att[(t * H + hh) * Dh + d] += s[j] / sum * v[(j * Hk + g) * Dh + d];
        }
      std::vector<double> o = lin(att, p + "self_attn.o_proj", n, H * Dh, D);
      for (int64_t i = 0; i < n * D; ++i) h[i] += o[i];
      std::vector<double> y = rms(h, w(p + "post_attention_layernorm.weight"), n, D);
      std::vector<double> gate = lin(y, p + "mlp.gate_proj", n, D, F);
      std::vector<double> up = lin(y, p + "mlp.up_proj", n, D, F);
      for (int64_t i = 0; i < n * F; ++i) gate[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
      std::vector<double> down = lin(gate, p + "mlp.down_proj", n, F, D);
      for (int64_t i = 0; i < n * D; ++i) h[i] += down[i];
    }
    std::vector<double> hn = rms(h, w("model.norm.weight"), n, D);
    const std::vector<double>& table =
        o_.tie_embeddings ? w("model.embed_tokens.weight") : w("lm_head.weight");
    std::vector<double> logits(n * V, 0.0);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t vv = 0; vv < V; ++vv)
        for (int64_t d = 0; d < D; ++d) logits[t * V + vv] += hn[t * D + d] * table[vv * D + d];
    return logits;
  }

 private:
  const std::vector<double>& w(const std::string& name) {
    auto it = cache_.find(name);
    if (it != cache_.end()) return it->second;
    const size_t i = *a_.findTensor(name);
    const schema::TensorDef& def = a_.tensor(i);
    ByteSpan span = a_.tensorBytes(i);
    std::vector<double> values;
    if (def.dtype() == schema::DType::F32) {
      for (size_t j = 0; j < span.size / 4; ++j) {
        float f;
        std::memcpy(&f, span.data + 4 * j, 4);
        values.push_back(f);
      }
    } else {
      for (size_t j = 0; j < span.size / 2; ++j) {
        uint16_t hbits;
        std::memcpy(&hbits, span.data + 2 * j, 2);
        values.push_back(def.dtype() == schema::DType::BF16 ? bf16ToF32(hbits) : f16ToF32(hbits));
      }
    }
    return cache_[name] = values;
  }
  std::vector<double> rms(const std::vector<double>& x, const std::vector<double>& g, int64_t n,
                          int64_t D) {
    std::vector<double> y(n * D);
    for (int64_t t = 0; t < n; ++t) {
      double ss = 0;
      for (int64_t d = 0; d < D; ++d) ss += x[t * D + d] * x[t * D + d];
      for (int64_t d = 0; d < D; ++d) y[t * D + d] = x[t * D + d] / std::sqrt(ss / D + o_.rms_eps) * g[d];
    }
    return y;
  }
  std::vector<double> lin(const std::vector<double>& x, const std::string& name, int64_t n,
                          int64_t K, int64_t N) {
    const std::vector<double>& W = w(name + ".weight");
    const std::vector<double>* bias = a_.findTensor(name + ".bias") ? &w(name + ".bias") : nullptr;
    std::vector<double> y(n * N);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < N; ++j) {
        double acc = bias ? (*bias)[j] : 0.0;
        for (int64_t k = 0; k < K; ++k) acc += x[t * K + k] * W[j * K + k];
        y[t * N + j] = acc;
      }
    return y;
  }
  void rope(std::vector<double>& x, int64_t n, int64_t H, int64_t Dh) {
    for (int64_t t = 0; t < n; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < Dh / 2; ++i) {
          const double angle = t * std::pow(o_.rope_theta, -2.0 * i / Dh);
          double& a = x[(t * H + h) * Dh + i];
          double& b = x[(t * H + h) * Dh + i + Dh / 2];
          const double a0 = a, b0 = b;
          a = a0 * std::cos(angle) - b0 * std::sin(angle);
          b = b0 * std::cos(angle) + a0 * std::sin(angle);
        }
  }

  const Artifact& a_;
  const LlamaProgramOptions& o_;
  std::map<std::string, std::vector<double>> cache_;
};

/// Largest |a - b| over the largest |b|.
double relativeError(const std::vector<float>& a, const std::vector<double>& b) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    err = std::max(err, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return err / scale;
}

/// `tolerance` for f32 activations; bf16-weight models on a table that rounds activations
/// to bf16 (8-bit mantissa, relative error up to 2^-9 per element) get `bf16_tolerance`.
void expectMatchesReference(const LlamaProgramOptions& o, double tolerance,
                            double bf16_tolerance = 0) {
  Artifact a = openLlama(o);
  std::mt19937 rng(o.seed);
  Sequence seq{randomTokens(19, static_cast<int>(o.vocab), rng), {3, 0, 5}};
  const std::vector<double> want = ReferenceLlama(a, o).forward(seq.tokens);
  for (int l = 0; l <= static_cast<int>(detectSimdLevel()); ++l) {
    SCOPED_TRACE(simdLevelName(static_cast<SimdLevel>(l)));
    auto backend = makeBackend(a, 8, 2, static_cast<SimdLevel>(l));
    ASSERT_NE(backend, nullptr);
    Sequence s = seq;
    std::vector<float> logits;
    Status st = backend->step(makeStep({&s}, {19}, o.block_size), &logits);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(logits.size(), want.size());
    const bool rounded = cpuKernels(static_cast<SimdLevel>(l)).bf16_activations &&
                         o.weight_dtype == schema::DType::BF16;
    EXPECT_LT(relativeError(logits, want), rounded ? bf16_tolerance : tolerance);
  }
}

TEST(CpuBackendTest, F32ModelMatchesDenseReference) {
  LlamaProgramOptions o;
  expectMatchesReference(o, 1e-5);
}

TEST(CpuBackendTest, UntiedModelWithQkvBiasAndGqa3MatchesDenseReference) {
  LlamaProgramOptions o;
  o.tie_embeddings = false;
  o.qkv_bias = true;
  o.heads = 6;
  o.kv_heads = 2;
  o.hidden = 48;
  o.intermediate = 80;
  o.layers = 3;
  o.block_size = 8;
  o.seed = 5;
  expectMatchesReference(o, 1e-5);
}

TEST(CpuBackendTest, Bf16AndF16ModelsMatchDenseReference) {
  for (schema::DType dtype : {schema::DType::BF16, schema::DType::F16}) {
    LlamaProgramOptions o;
    o.weight_dtype = dtype;
    o.seed = 9;
    expectMatchesReference(o, 1e-5, 1e-2);
  }
}

/// Both artifacts' logits, prefill then decode, main and draft program, at every SIMD level
/// here: bit for bit the same.
/// Logits of a prefill of `prefill` tokens and one decode step, x against y, bit for bit.
void expectSameLogits(const Artifact& x, const Artifact& y, const LlamaProgramOptions& o,
                      int prefill = 18) {
  std::mt19937 rng(o.seed);
  const std::vector<int32_t> tokens = randomTokens(prefill + 1, static_cast<int>(o.vocab), rng);
  std::vector<int32_t> blocks = {3, 0, 5};  // out of order
  const int needed = (prefill + 1 + static_cast<int>(o.block_size) - 1) / static_cast<int>(o.block_size);
  for (int b = 6; static_cast<int>(blocks.size()) < needed; ++b) blocks.push_back(b);
  for (int l = 0; l <= static_cast<int>(detectSimdLevel()); ++l)
  for (int32_t program : {0, 1}) {
    SCOPED_TRACE(std::string(simdLevelName(static_cast<SimdLevel>(l))) + " program " +
                 std::to_string(program));
    CpuBackendOptions opts;
    opts.num_kv_blocks = std::max(8, static_cast<int>(blocks.size()) + 6);
    opts.simd = static_cast<SimdLevel>(l);
    opts.program = program;
    StatusOr<std::unique_ptr<CpuBackend>> a = CpuBackend::create(x, opts);
    StatusOr<std::unique_ptr<CpuBackend>> b = CpuBackend::create(y, opts);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status().message() << " / " << b.status().message();
    Sequence sa{tokens, blocks}, sb = sa;
    for (int count : {prefill, 1}) {  // a prefill, then a decode step
      std::vector<float> la, lb;
      ASSERT_TRUE((*a)->step(makeStep({&sa}, {count}, o.block_size), &la).ok());
      ASSERT_TRUE((*b)->step(makeStep({&sb}, {count}, o.block_size), &lb).ok());
      EXPECT_EQ(la, lb) << "fused steps compute what the unfused ones do, in their order";
    }
  }
}

TEST(CpuBackendTest, FusedStepsWorkInPlaceAndGiveTheUnfusedLogits) {
  for (schema::DType kv : {schema::DType::F32, schema::DType::F8E4M3FN}) {
    SCOPED_TRACE(schema::EnumNameDType(kv));
    LlamaProgramOptions o;
    o.layers = 3;
    o.seed = 11;
    o.kv_dtype = kv;
    o.draft_layers = 2;  // the early-exit draft ends in the fused add of layer 2
    const Artifact unfused = openLlama(o);
    o.fuse_elementwise = true;
    const Artifact fused = openLlama(o);
    // Every residual add is fused with its norm, every layer's ropes with its KV write.
    WeightStore weights(fused);
    StatusOr<ProgramPlan> plan = planProgram(fused, weights);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    int addNorms = 0, ropeWrites = 0;
    auto slot = [&](int32_t b) { return plan->buffers[b].slot; };
    for (const PlannedStep& s : plan->steps) {
      EXPECT_NE(s.op, schema::OpKind::Add);
      EXPECT_NE(s.op, schema::OpKind::Rope);
      EXPECT_NE(s.op, schema::OpKind::KvWrite);
      // The inputs are read last here, so the outputs take their slots.
      if (s.op == schema::OpKind::AddRmsNorm) {
        ++addNorms;
        EXPECT_EQ(slot(s.outputs[0]), slot(s.inputs[1]));
        EXPECT_NE(slot(s.outputs[1]), slot(s.outputs[0]));
      } else if (s.op == schema::OpKind::RopeKvWrite) {
        ++ropeWrites;
        EXPECT_EQ(slot(s.outputs[0]), slot(s.inputs[0]));
        EXPECT_EQ(slot(s.outputs[1]), slot(s.inputs[1]));
      }
    }
    EXPECT_EQ(addNorms, 2 * o.layers);
    EXPECT_EQ(ropeWrites, o.layers);
    expectSameLogits(unfused, fused, o);
  }
}

TEST(CpuBackendTest, GatedLinearsGiveTheUnfusedLogitsInEveryWeightFormat) {
  struct Format {
    const char* name;
    schema::DType dtype;
    schema::QuantKind quant;
    schema::ZeroKind zero;
  };
  const Format formats[] = {
      {"f32", schema::DType::F32, schema::QuantKind::None, schema::ZeroKind::Min},
      {"bf16", schema::DType::BF16, schema::QuantKind::None, schema::ZeroKind::Min},
      {"int4 min", schema::DType::F32, schema::QuantKind::Int4Group, schema::ZeroKind::Min},
      {"int4 zero", schema::DType::F32, schema::QuantKind::Int4Group, schema::ZeroKind::Zero},
      {"nvfp4", schema::DType::F32, schema::QuantKind::Nvfp4, schema::ZeroKind::Min},
      {"mxfp4", schema::DType::F32, schema::QuantKind::Mxfp4, schema::ZeroKind::Min},
      {"fp8", schema::DType::F32, schema::QuantKind::PerChannel, schema::ZeroKind::Min},
  };
  for (const Format& f : formats) {
    SCOPED_TRACE(f.name);
    LlamaProgramOptions o;
    o.layers = 2;
    o.seed = 5;
    o.draft_layers = 1;  // program 1, the early-exit draft, ends after layer 0's MLP
    o.weight_dtype = f.dtype;
    o.linear_quant = f.quant;
    o.quant_zero_kind = f.zero;
    const Artifact unfused = openLlama(o);
    o.fuse_elementwise = true;
    const Artifact fused = openLlama(o);
    WeightStore weights(fused);
    StatusOr<ProgramPlan> plan = planProgram(fused, weights);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    int gated = 0, siluMuls = 0;
    for (const PlannedStep& s : plan->steps) {
      siluMuls += s.op == schema::OpKind::SiluMul;
      if (s.op != schema::OpKind::GatedLinear) continue;
      ++gated;
      ASSERT_EQ(s.parts.size(), 2u);
      EXPECT_EQ(s.parts[0].quantized, f.quant != schema::QuantKind::None);
      EXPECT_NE(s.parts[0].weight.name, s.parts[1].weight.name);
      EXPECT_NE(plan->buffers[s.outputs[0]].slot, plan->buffers[s.inputs[0]].slot);
    }
    // fp8 MLPs stay unfused (W8A8 on CUDA quantizes in the norm and the silu_mul).
    const bool fp8 = f.quant == schema::QuantKind::PerChannel;
    EXPECT_EQ(gated, fp8 ? 0 : o.layers);
    EXPECT_EQ(siluMuls, fp8 ? o.layers : 0);
    // 150 tokens: the gated linear runs its columns through three blocks of tokens.
    expectSameLogits(unfused, fused, o, 150);
  }
}

TEST(CpuBackendTest, AGatedLinearWithAnUnknownActivationIsRefusedAtLoad) {
  LlamaProgramOptions o;
  o.fuse_elementwise = true;
  o.gated_activation = 7;
  const Artifact a = openLlama(o);
  StatusOr<std::unique_ptr<CpuBackend>> backend = CpuBackend::create(a, CpuBackendOptions{});
  ASSERT_FALSE(backend.ok());
  EXPECT_NE(backend.status().message().find(
                "(GatedLinear): param activation must be 0 (silu) or 1 (gelu), found 7"),
            std::string::npos)
      << backend.status().message();
}

TEST(CpuBackendTest, AScaleStepWithANonFiniteFactorIsRefusedAtLoad) {
  LlamaProgramOptions o;
  o.embedding_scale = std::numeric_limits<float>::infinity();
  const Artifact a = openLlama(o);
  StatusOr<std::unique_ptr<CpuBackend>> backend = CpuBackend::create(a, CpuBackendOptions{});
  ASSERT_FALSE(backend.ok());
  EXPECT_NE(backend.status().message().find("(Scale): its factor inf is not a finite f32"),
            std::string::npos)
      << backend.status().message();
}

/// Logits of every position of seqA, by feeding it in the given chunk sizes, optionally
/// interleaved with another request in the same steps.
std::vector<std::vector<float>> runChunks(CpuBackend& backend, const std::vector<int32_t>& a,
                                          const std::vector<int>& chunks,
                                          const std::vector<int32_t>* other,
                                          const std::vector<int>* otherChunks,
                                          bool otherFirst = false) {
  const int64_t V = backend.vocabSize();
  const int bs = backend.modelShape().kv_block_size;
  Sequence sa{a, {7, 2, 11, 4}};
  Sequence sb{other ? *other : std::vector<int32_t>{}, {1, 9, 5, 0}};
  std::vector<std::vector<float>> rows;
  for (size_t c = 0; c < chunks.size(); ++c) {
    std::vector<Sequence*> seqs = {&sa};
    std::vector<int> counts = {chunks[c]};
    if (other && c < otherChunks->size()) {
      seqs.insert(otherFirst ? seqs.begin() : seqs.end(), &sb);
      counts.insert(otherFirst ? counts.begin() : counts.end(), (*otherChunks)[c]);
    }
    const int offset = otherFirst && seqs.size() == 2 ? counts[0] : 0;
    std::vector<float> logits;
    Status st = backend.step(makeStep(seqs, counts, bs), &logits);
    EXPECT_TRUE(st.ok()) << st.message();
    for (int i = 0; i < chunks[c]; ++i)
      rows.emplace_back(logits.begin() + (offset + i) * V, logits.begin() + (offset + i + 1) * V);
  }
  return rows;
}

TEST(CpuBackendTest, OneTokenOrManyAloneOrBatchedGiveTheSameLogits) {
  LlamaProgramOptions o;
  o.seed = 3;
  Artifact a = openLlama(o);
  std::mt19937 rng(3);
  const std::vector<int32_t> seqA = randomTokens(40, 256, rng), seqB = randomTokens(30, 256, rng);
  auto fresh = [&] { return makeBackend(a, 16, 2); };
  const auto allAtOnce = runChunks(*fresh(), seqA, {40}, nullptr, nullptr);
  const auto byToken = runChunks(*fresh(), seqA, std::vector<int>(40, 1), nullptr, nullptr);
  const auto chunked = runChunks(*fresh(), seqA, {13, 13, 1, 13}, nullptr, nullptr);
  const std::vector<int> bChunks = {7, 1, 20, 2};
  const auto batched = runChunks(*fresh(), seqA, {13, 13, 1, 13}, &seqB, &bChunks);
  const auto batchedFirst = runChunks(*fresh(), seqA, {5, 35}, &seqB, &bChunks, true);
  ASSERT_EQ(allAtOnce.size(), 40u);
  for (const auto* other : {&byToken, &chunked, &batched, &batchedFirst}) {
    ASSERT_EQ(other->size(), 40u);
    for (size_t p = 0; p < 40; ++p) {
      double err = 0, scale = 0;
      for (size_t v = 0; v < allAtOnce[p].size(); ++v) {
        err = std::max<double>(err, std::abs(allAtOnce[p][v] - (*other)[p][v]));
        scale = std::max<double>(scale, std::abs(allAtOnce[p][v]));
      }
      EXPECT_LE(err, 1e-5 * scale) << "position " << p;
    }
  }
}

TEST(CpuBackendTest, LargeDummyWeightsFillInParallelWithTheSequentialValues) {
  // Past 4M elements the fill runs in chunks on several threads; every element must be
  // the one a single splitmix64 pass gives (here recomputed element by element).
  const std::vector<int64_t> shape = {3, (int64_t{5} << 22) / 3 + 7};
  const int64_t n = shape[0] * shape[1];
  std::vector<float> out(n, NAN);
  const uint64_t seed = ingot::testing::testSeed();
  fillDummyWeight(seed, "layers.0.mlp.up_proj.weight", shape, WeightType::kF32, out.data());
  uint64_t state = seed ^ XXH64("layers.0.mlp.up_proj.weight", 27, 0);
  const float amplitude = 1.0f / std::sqrt(static_cast<float>(shape[1]));
  std::mt19937_64 pick(seed);
  for (int k = 0; k < 2000; ++k) {
    const int64_t i = k < 1000 ? static_cast<int64_t>(pick() % n) : n - 1 - (k - 1000);
    uint64_t z = state + static_cast<uint64_t>(i + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
    ASSERT_EQ(out[i], 0.0f + amplitude * (2.0f * u - 1.0f)) << "element " << i;
  }
}

TEST(CpuBackendTest, DummyWeightsAreSeededAndFinite) {
  LlamaProgramOptions o;
  o.dummy_weights = true;
  o.weight_dtype = schema::DType::BF16;
  o.seed = 77;
  Artifact a = openLlama(o);
  ASSERT_FALSE(a.hasBlob());
  std::mt19937 rng(1);
  const std::vector<int32_t> toks = randomTokens(9, 256, rng);
  const auto one = runChunks(*makeBackend(a), toks, {9}, nullptr, nullptr);
  const auto two = runChunks(*makeBackend(a), toks, {4, 5}, nullptr, nullptr);
  EXPECT_EQ(one, two);
  for (const auto& row : one)
    for (float v : row) ASSERT_TRUE(std::isfinite(v));
  // A different seed gives different weights.
  o.seed = 78;
  Artifact b = openLlama(o);
  EXPECT_NE(runChunks(*makeBackend(b), toks, {9}, nullptr, nullptr), one);
}

TEST(CpuBackendTest, CopiedKvBlocksDecodeLikeTheOriginals) {
  LlamaProgramOptions o;
  Artifact a = openLlama(o);
  auto backend = makeBackend(a, 8, 2);
  std::mt19937 rng(2);
  Sequence s{randomTokens(21, 256, rng), {0, 1}};
  std::vector<float> logits, viaOriginal, viaCopy;
  ASSERT_TRUE(backend->step(makeStep({&s}, {20}, 16), &logits).ok());
  ASSERT_TRUE(backend->copyKvBlocks(0, 5).ok());
  ASSERT_TRUE(backend->copyKvBlocks(1, 6).ok());
  Sequence copy = s;
  copy.blocks = {5, 6};
  ASSERT_TRUE(backend->step(makeStep({&s}, {1}, 16), &viaOriginal).ok());
  ASSERT_TRUE(backend->step(makeStep({&copy}, {1}, 16), &viaCopy).ok());
  EXPECT_EQ(viaOriginal, viaCopy);
  EXPECT_FALSE(backend->copyKvBlocks(0, 8).ok());
  EXPECT_FALSE(backend->copyKvBlocks(-1, 0).ok());
}

TEST(CpuBackendTest, RejectsBadStepsWithoutTouchingTheCache) {
  LlamaProgramOptions o;
  Artifact a = openLlama(o);
  auto backend = makeBackend(a, 4, 1);
  std::vector<float> before(backend->kvPool(), backend->kvPool() + backend->kvPoolFloats());
  Sequence s{{1, 2, 300}, {0}};
  std::vector<float> logits;
  Status st = backend->step(makeStep({&s}, {3}, 16), &logits);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("vocabulary"), std::string::npos) << st.message();
  Sequence far{{1, 2}, {4}};  // block 4 of a 4-block pool
  EXPECT_FALSE(backend->step(makeStep({&far}, {2}, 16), &logits).ok());
  EXPECT_EQ(0, std::memcmp(before.data(), backend->kvPool(), before.size() * sizeof(float)));
}

TEST(CpuBackendTest, AnFp8QProjRunsAndCountsItsPackedBytes) {
  LlamaProgramOptions o;
  o.fp8_first_q_proj = true;
  Artifact a = openLlama(o);
  Artifact dense = openLlama(LlamaProgramOptions{});
  auto backend = makeBackend(a, 8, 2);
  ASSERT_NE(backend, nullptr);
  // One byte per q_proj weight and a 4-byte scale, where f32 takes four bytes per weight.
  const uint64_t q = static_cast<uint64_t>(o.heads * o.head_dim * o.hidden);
  EXPECT_EQ(backend->matrixBytes() + 3 * q - 4, makeBackend(dense, 8, 2)->matrixBytes());
  std::mt19937 rng(6);
  Sequence s{randomTokens(5, 256, rng), {0}};
  std::vector<float> logits;
  ASSERT_TRUE(backend->step(makeStep({&s}, {5}, 16), &logits).ok());
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
}

TEST(CpuBackendTest, DocumentMaskReadsAnExtraProgramInput) {
  LlamaProgramOptions o;
  o.mask_bytecode = documentMaskBytecode();
  o.extra_input_ranks = {2};
  Artifact a = openLlama(o);
  LlamaProgramOptions causal;
  Artifact c = openLlama(causal);
  auto backend = makeBackend(a, 8, 2);
  auto reference = makeBackend(c, 8, 2);
  std::mt19937 rng(4);
  Sequence s{randomTokens(10, 256, rng), {2}};
  Sequence s2 = s;
  StepInputs step = makeStep({&s}, {10}, 16);
  std::vector<float> got, want;
  // Missing extra input: an error.
  EXPECT_FALSE(backend->step(step, &got).ok());
  // One document: the same as plain causal attention.
  std::vector<int32_t> docs(10, 0);
  const int64_t shape[2] = {1, 10};
  step.extra_inputs.push_back({RegionType::kI32, shape, 2, docs.data()});
  ASSERT_TRUE(backend->step(step, &got).ok());
  ASSERT_TRUE(reference->step(makeStep({&s2}, {10}, 16), &want).ok());
  EXPECT_EQ(got, want);
  // Two documents: the second one's rows change, the first one's do not.
  std::fill(docs.begin() + 6, docs.end(), 1);
  ASSERT_TRUE(backend->step(step, &got).ok());
  EXPECT_TRUE(std::equal(got.begin(), got.begin() + 6 * 256, want.begin()));
  EXPECT_FALSE(std::equal(got.begin() + 6 * 256, got.end(), want.begin() + 6 * 256));
}

}  // namespace
}  // namespace ingot
