// CpuBackend with quantized linear weights: each format in a one-linear program against a
// float64 reference, quantized Llamas against their dequantized f32 twins, batch invariance,
// matrixBytes, dummy quantized weights, and malformed schemes refused at create().
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>

#include "core/artifact/artifact_writer.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/half_float.h"
#include "runtime/backend/cpu/quant_formats.h"
#include "runtime/backend/cpu/cpu_backend_quant_test_util.h"
#include "testing/llama_program.h"

namespace ingot {
namespace {

using schema::DType;
using schema::QuantKind;
using schema::ZeroKind;
using quant_test::FormatCase;
using quant_test::kFormats;
using quant_test::makeBackend;
using quant_test::oneRequest;
using quant_test::relativeError;
using quant_test::supportedLevels;

// ---- A one-linear program: embedding -> linear (the weight under test) -> logits. ----

/// A quantized [N, K] weight as tensors, plus its values from the format's definition.
struct QuantTensors {
  QuantKind kind = QuantKind::None;
  uint32_t block = 0;
  ZeroKind zero_kind = ZeroKind::None;
  DType code_dtype = DType::Invalid;
  std::vector<int64_t> shape;
  std::vector<uint8_t> codes;
  DType scale_dtype = DType::Invalid;
  std::vector<int64_t> scale_shape;
  std::vector<uint8_t> scale_bytes;
  /// Zero/min (int4) or the global scale (nvfp4); absent when `has_second` is false.
  bool has_second = false;
  DType second_dtype = DType::Invalid;
  std::vector<int64_t> second_shape;
  std::vector<uint8_t> second_bytes;
  std::vector<double> w;  // [N, K]
};

std::vector<uint8_t> floatBytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

/// Group values (int4 scales, zeros/mins) stored as `dtype`; returns what they read back as.
std::vector<uint8_t> groupBytes(std::vector<float>& v, DType dtype) {
  if (dtype == DType::F32) return floatBytes(v);
  std::vector<uint8_t> b(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = dtype == DType::BF16 ? f32ToBf16(v[i]) : f32ToF16(v[i]);
    v[i] = dtype == DType::BF16 ? bf16ToF32(h) : f16ToF32(h);
    std::memcpy(&b[2 * i], &h, 2);
  }
  return b;
}

/// Random well-formed tensors of one format. int4 takes the group, zero kind and scale dtype.
QuantTensors randomQuant(QuantKind kind, int64_t N, int64_t K, std::mt19937& rng,
                         uint32_t group = 32, ZeroKind zk = ZeroKind::Min,
                         DType scaleDtype = DType::F16) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  QuantTensors q;
  q.kind = kind;
  q.shape = {N, K};
  const bool int4 = kind == QuantKind::Int4Group;
  const bool fp4 = kind == QuantKind::Nvfp4 || kind == QuantKind::Mxfp4;
  q.block = int4 ? group : kind == QuantKind::Nvfp4 ? 16 : kind == QuantKind::Mxfp4 ? 32 : 0;
  // Blocks that do not divide K (for the malformed cases) get a last, partial group.
  const int64_t block = q.block ? q.block : K, groups = (K + block - 1) / block;
  q.zero_kind = int4 ? zk : ZeroKind::None;
  q.code_dtype = int4 ? DType::U4 : fp4 ? DType::F4E2M1FN : DType::F8E4M3FN;
  std::vector<uint8_t> codes(N * K);
  for (uint8_t& c : codes) {
    c = static_cast<uint8_t>(rng() & (int4 || fp4 ? 15 : 255));
    if (!(int4 || fp4) && (c & 0x7f) == 0x7f) c = 0x7e;
  }
  q.codes.assign(int4 || fp4 ? N * K / 2 : N * K, 0);
  for (int64_t i = 0; i < N * K; ++i) {
    if (int4 || fp4) q.codes[i / 2] |= static_cast<uint8_t>((i & 1) ? codes[i] << 4 : codes[i]);
    else q.codes[i] = codes[i];
  }
  std::vector<double> scale(N * groups), second(N * groups);
  double global = 1.0;
  switch (kind) {
    case QuantKind::Int4Group: {
      std::vector<float> s(N * groups), z(N * groups);
      for (float& v : s) v = 0.02f * (unit(rng) - 0.3f);
      for (float& v : z) v = zk == ZeroKind::Min ? -0.1f * unit(rng) : 16.0f * unit(rng);
      q.scale_dtype = q.second_dtype = scaleDtype;
      q.scale_shape = q.second_shape = {N, groups};
      q.scale_bytes = groupBytes(s, scaleDtype);
      q.second_bytes = groupBytes(z, scaleDtype);
      q.has_second = true;
      std::copy(s.begin(), s.end(), scale.begin());
      std::copy(z.begin(), z.end(), second.begin());
      break;
    }
    case QuantKind::PerChannel:
    case QuantKind::PerTensor: {
      std::vector<float> s(kind == QuantKind::PerChannel ? N : 1);
      for (float& v : s) v = 1e-3f * (0.5f + unit(rng));
      q.scale_dtype = DType::F32;
      q.scale_shape = {static_cast<int64_t>(s.size())};
      q.scale_bytes = floatBytes(s);
      for (int64_t n = 0; n < N; ++n) scale[n] = s[kind == QuantKind::PerChannel ? n : 0];
      break;
    }
    case QuantKind::Nvfp4:
    case QuantKind::Mxfp4: {
      q.scale_dtype = kind == QuantKind::Nvfp4 ? DType::F8E4M3FN : DType::F8E8M0FNU;
      q.scale_shape = {N, groups};
      q.scale_bytes.resize(N * groups);
      for (int64_t i = 0; i < N * groups; ++i) {
        const uint8_t b = kind == QuantKind::Nvfp4 ? static_cast<uint8_t>(0x28 + rng() % 32)
                                                   : static_cast<uint8_t>(118 + rng() % 8);
        q.scale_bytes[i] = b;
        scale[i] = kind == QuantKind::Nvfp4 ? e4m3fnToF32(b) : e8m0ToF32(b);
      }
      if (kind == QuantKind::Nvfp4) {
        const float g = 0.01f * (1.0f + unit(rng));
        global = g;
        q.has_second = true;
        q.second_dtype = DType::F32;
        q.second_shape = {1};
        q.second_bytes = floatBytes({g});
      }
      break;
    }
    default:
      break;
  }
  q.w.resize(N * K);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const uint8_t c = codes[n * K + k];
      const int64_t g = kind == QuantKind::PerChannel || kind == QuantKind::PerTensor
                            ? n : n * groups + k / block;
      double w = 0;
      if (int4) {
        w = zk == ZeroKind::Min ? scale[g] * c + second[g] : scale[g] * (c - second[g]);
      } else if (fp4) {
        w = static_cast<double>(e2m1ToF32(c)) * scale[g] * global;
      } else {
        w = static_cast<double>(e4m3fnToF32(c)) * scale[g];
      }
      q.w[n * K + k] = w;
    }
  return q;
}

constexpr int64_t kTinyVocab = 16;
constexpr int kTinyBlock = 16;
const char* const kWeightName = "proj.weight";

struct TinyModel {
  QuantTensors weight;
  bool bias = false;
  bool quantized_embedding = false;
  uint64_t seed = 1;
  /// Dense values for the reference: embedding [V, K], bias [N], table [V, N].
  std::vector<float> embed, bias_values, table;
};

/// Writes the one-linear program; fills the model's dense values.
Artifact buildTiny(TinyModel& m) {
  const int64_t N = m.weight.shape[0], K = m.weight.shape[1], V = kTinyVocab;
  std::mt19937 rng(m.seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  m.embed.resize(V * K);
  m.bias_values.resize(N);
  m.table.resize(V * N);
  for (std::vector<float>* v : {&m.embed, &m.bias_values, &m.table})
    for (float& x : *v) x = unit(rng);
  ArtifactWriter writer;
  ModelConfig config;
  config.architecture = "llama";
  config.name = "one-linear";
  config.vocabSize = V;
  config.hiddenSize = K;
  config.intermediateSize = K;
  config.numLayers = 1;
  config.numHeads = 1;
  config.numKvHeads = 1;
  config.headDim = 8;
  config.maxContext = 64;
  config.kvBlockSize = kTinyBlock;
  writer.setModelConfig(config);

  std::vector<int32_t> weights;
  int32_t embed;
  if (m.quantized_embedding) {
    QuantScheme q{QuantKind::Int4Group, 32, ZeroKind::Min, 1, 2};
    embed = writer.addTensor({"embed.weight", DType::U4, {V, K}, q, -1},
                             std::vector<uint8_t>(V * K / 2, 0x11));
    writer.addTensor({"embed.scale", DType::F16, {V, K / 32}, {}, -1},
                     std::vector<uint8_t>(V * K / 32 * 2, 0));
    writer.addTensor({"embed.zero", DType::F16, {V, K / 32}, {}, -1},
                     std::vector<uint8_t>(V * K / 32 * 2, 0));
  } else {
    embed = writer.addTensor({"embed.weight", DType::F32, {V, K}, {}, -1}, floatBytes(m.embed));
  }
  const QuantTensors& q = m.weight;
  QuantScheme scheme;
  scheme.kind = q.kind;
  scheme.blockSize = q.block;
  scheme.zeroKind = q.zero_kind;
  const int32_t base = static_cast<int32_t>(writer.numTensors());
  scheme.scaleTensor = base + 1;
  if (q.has_second)
    (q.kind == QuantKind::Nvfp4 ? scheme.globalScaleTensor : scheme.zeroTensor) = base + 2;
  weights.push_back(writer.addTensor({kWeightName, q.code_dtype, q.shape, scheme, -1}, q.codes));
  const int32_t s = writer.addTensor({"proj.scale", q.scale_dtype, q.scale_shape, {}, -1},
                                     q.scale_bytes);
  int32_t second = -1;
  if (q.has_second)
    second = writer.addTensor({"proj.second", q.second_dtype, q.second_shape, {}, -1},
                              q.second_bytes);
  if (m.bias)
    weights.push_back(
        writer.addTensor({"proj.bias", DType::F32, {N}, {}, -1}, floatBytes(m.bias_values)));
  weights.push_back(s);
  if (second >= 0) weights.push_back(second);
  const int32_t table =
      writer.addTensor({"head.weight", DType::F32, {V, N}, {}, -1}, floatBytes(m.table));

  Program p;
  p.name = "step";
  const char* inputs[] = {"tokens", "positions", "kv_cache", "block_tables",
                          "seq_lens", "query_start", "slot_mapping", "logit_rows"};
  for (int i = 0; i < 8; ++i) {
    Buffer b{inputs[i], schema::BufferKind::Input, DType::I32, {-1}};
    if (i == 2)
      b = {inputs[i], schema::BufferKind::KvCache, DType::F32, {-1, 1, 2, kTinyBlock, 1, 8}};
    if (i == 3) b.shape = {-1, -1};
    p.buffers.push_back(b);
  }
  p.buffers.push_back({"h", schema::BufferKind::Activation, DType::F32, {-1, K}});
  p.buffers.push_back({"y", schema::BufferKind::Activation, DType::F32, {-1, N}});
  p.buffers.push_back({"logits", schema::BufferKind::Output, DType::F32, {-1, V}});
  ProgramStep e, l, o;
  e.op = schema::OpKind::Embedding;
  e.inputs = {0};
  e.outputs = {8};
  e.weights = {embed};
  l.op = schema::OpKind::Linear;
  l.inputs = {8};
  l.outputs = {9};
  l.weights = weights;
  o.op = schema::OpKind::Logits;
  o.inputs = {9, 7};
  o.outputs = {10};
  o.weights = {table};
  p.steps = {e, l, o};
  writer.addProgram(std::move(p));
  StatusOr<std::vector<uint8_t>> bytes = writer.writeToBuffer();
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  StatusOr<Artifact> a = Artifact::openFromMemory(*bytes);
  EXPECT_TRUE(a.ok()) << a.status().message();
  return std::move(*a);
}

/// Logits [T, V] of the one-linear model in float64.
std::vector<double> tinyReference(const TinyModel& m, const std::vector<int32_t>& tokens) {
  const int64_t N = m.weight.shape[0], K = m.weight.shape[1], V = kTinyVocab;
  std::vector<double> out;
  for (int32_t tok : tokens) {
    std::vector<double> y(N);
    for (int64_t n = 0; n < N; ++n) {
      double acc = m.bias ? m.bias_values[n] : 0.0;
      for (int64_t k = 0; k < K; ++k) acc += m.weight.w[n * K + k] * m.embed[tok * K + k];
      y[n] = acc;
    }
    for (int64_t v = 0; v < V; ++v) {
      double acc = 0;
      for (int64_t n = 0; n < N; ++n) acc += m.table[v * N + n] * y[n];
      out.push_back(acc);
    }
  }
  return out;
}

TEST(CpuBackendQuantTest, EachFormatInALinearStepMatchesFloat64AndCountsItsBytes) {
  std::mt19937 rng(41);
  const int64_t N = 24, K = 384;
  for (const FormatCase& f : kFormats) {
    for (bool bias : {false, true}) {
      SCOPED_TRACE(std::string(f.name) + (bias ? " with bias" : ""));
      TinyModel m;
      m.weight = randomQuant(f.kind, N, K, rng, f.group, f.zero_kind, f.scale_dtype);
      m.bias = bias;
      m.seed = rng();
      Artifact a = buildTiny(m);
      std::vector<int32_t> tokens = {3, 0, 15, 7, 7, 1, 12};
      const std::vector<double> want = tinyReference(m, tokens);
      // Codes, scales and (int4) zeros are what a token reads, plus the f32 head.
      uint64_t quantBytes = m.weight.codes.size() + m.weight.scale_bytes.size();
      if (f.kind == QuantKind::Int4Group) quantBytes += m.weight.second_bytes.size();
      if (f.kind == QuantKind::Nvfp4) quantBytes += 4;
      for (SimdLevel level : supportedLevels()) {
        SCOPED_TRACE(simdLevelName(level));
        auto backend = makeBackend(a, level);
        ASSERT_NE(backend, nullptr);
        EXPECT_EQ(backend->matrixBytes(), quantBytes + kTinyVocab * N * 4);
        std::vector<float> all;
        Status st = backend->step(oneRequest(tokens, 0, kTinyBlock), &all);
        ASSERT_TRUE(st.ok()) << st.message();
        EXPECT_LT(relativeError(all, want), 1e-5);
        // Each token alone gives bitwise its row of the batch.
        for (size_t t = 0; t < tokens.size(); ++t) {
          std::vector<float> one;
          ASSERT_TRUE(backend->step(oneRequest({tokens[t]}, 0, kTinyBlock), &one).ok());
          ASSERT_EQ(0, std::memcmp(one.data(), all.data() + t * kTinyVocab,
                                   kTinyVocab * sizeof(float)))
              << "token " << t;
        }
      }
    }
  }
}

/// create() must fail with a message naming `needle` (the tensor) and containing `why`.
void expectRefused(TinyModel m, const std::string& needle, const std::string& why) {
  Artifact a = buildTiny(m);
  StatusOr<std::unique_ptr<CpuBackend>> b = CpuBackend::create(a, {});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find(needle), std::string::npos) << b.status().message();
  EXPECT_NE(b.status().message().find(why), std::string::npos) << b.status().message();
}

TEST(CpuBackendQuantTest, MalformedSchemesAreRefusedAtCreateNamingTheTensor) {
  std::mt19937 rng(43);
  const int64_t N = 8, K = 128;
  auto model = [&](QuantKind kind, std::function<void(QuantTensors&)> edit) {
    TinyModel m;
    m.weight = randomQuant(kind, N, K, rng);
    edit(m.weight);
    return m;
  };
  // Scale shapes and dtypes.
  expectRefused(model(QuantKind::Int4Group,
                      [](QuantTensors& q) {
                        q.scale_shape = {8, 3};
                        q.scale_bytes.resize(8 * 3 * 2);
                      }),
                "proj.scale", "has shape [8, 3], expected [8, 4]");
  expectRefused(model(QuantKind::Int4Group, [](QuantTensors& q) { q.second_shape = {4, 8}; }),
                "proj.second", "expected [8, 4]");
  expectRefused(model(QuantKind::Int4Group,
                      [](QuantTensors& q) {
                        q.scale_dtype = DType::F8E4M3FN;
                        q.scale_bytes.resize(q.scale_bytes.size() / 2);
                      }),
                "proj.scale", "must be f16, bf16 or f32");
  expectRefused(model(QuantKind::Int4Group,
                      [](QuantTensors& q) {
                        q.second_dtype = DType::F32;
                        q.second_bytes.resize(q.second_bytes.size() * 2);
                      }),
                "proj.second", "must be f16");
  expectRefused(model(QuantKind::Mxfp4,
                      [](QuantTensors& q) { q.scale_dtype = DType::F8E4M3FN; }),
                "proj.scale", "must be f8E8M0FNU");
  expectRefused(model(QuantKind::Nvfp4,
                      [](QuantTensors& q) {
                        q.scale_shape = {8, 4};
                        q.scale_bytes.resize(8 * 4);
                      }),
                "proj.scale", "expected [8, 8]");
  expectRefused(model(QuantKind::PerChannel,
                      [](QuantTensors& q) {
                        q.scale_shape = {1};
                        q.scale_bytes.resize(4);
                      }),
                "proj.scale", "expected [8]");
  expectRefused(model(QuantKind::Nvfp4, [](QuantTensors& q) { q.has_second = false; }),
                kWeightName, "no global scale tensor");
  expectRefused(model(QuantKind::Nvfp4,
                      [](QuantTensors& q) {
                        q.second_shape = {2};
                        q.second_bytes.resize(8);
                      }),
                "proj.second", "expected [] or [1]");
  // K not a multiple of the block: 128 + 16 columns for a group of 32, 40 for nvfp4's 16.
  for (auto [kind, k] : {std::pair{QuantKind::Int4Group, int64_t{144}},
                         std::pair{QuantKind::Mxfp4, int64_t{144}},
                         std::pair{QuantKind::Nvfp4, int64_t{40}}}) {
    TinyModel m;
    m.weight = randomQuant(kind, N, k, rng);  // the last scale column covers a partial block
    expectRefused(m, kWeightName, "is not a multiple of the");
  }
  // Wrong code dtypes and schemes the kernels do not run.
  expectRefused(model(QuantKind::Nvfp4, [](QuantTensors& q) { q.code_dtype = DType::U4; }),
                kWeightName, "must be f4E2M1FN");
  expectRefused(model(QuantKind::Int4Group, [](QuantTensors& q) { q.code_dtype = DType::I4; }),
                kWeightName, "signed i4");
  expectRefused(model(QuantKind::Int4Group, [](QuantTensors& q) { q.zero_kind = ZeroKind::None; }),
                kWeightName, "zero_kind");
  expectRefused(model(QuantKind::Int4Group, [](QuantTensors& q) { q.block = 24; }),
                kWeightName, "group size 24");
  expectRefused(model(QuantKind::Mxfp4, [](QuantTensors& q) { q.block = 16; }), kWeightName,
                "blocks are 32 elements");
}

TEST(CpuBackendQuantTest, QuantizedEmbeddingsAreRefusedWithAClearMessage) {
  std::mt19937 rng(47);
  TinyModel m;
  m.weight = randomQuant(QuantKind::Nvfp4, 8, 64, rng);
  m.quantized_embedding = true;
  Artifact a = buildTiny(m);
  StatusOr<std::unique_ptr<CpuBackend>> b = CpuBackend::create(a, {});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(b.status().message().find("'embed.weight' is quantized"), std::string::npos)
      << b.status().message();
}
}  // namespace
}  // namespace ingot
