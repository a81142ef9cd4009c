// buildLlamaArtifact: the tiny Llama step program, written directly with ArtifactWriter.
#include "testing/llama_program.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>
#include <cstring>
#include <random>

#include "core/artifact/artifact_writer.h"
#include "runtime/backend/cpu/half_float.h"
#include "runtime/backend/cpu/quant_formats.h"
#include "core/artifact/draft_program.h"
#include "core/region/region_examples.h"
#include "testing/llama_model_config.h"

namespace ingot::testing {

ModelConfig llamaModelConfig(const LlamaProgramOptions& o) {
  ModelConfig config;
  config.architecture = "llama";
  config.name = "test-llama";
  config.vocabSize = o.vocab;
  config.hiddenSize = o.hidden;
  config.intermediateSize = o.intermediate;
  config.numLayers = o.layers;
  config.numHeads = o.heads;
  config.numKvHeads = o.kv_heads;
  config.headDim = o.head_dim;
  config.maxContext = o.max_context;
  config.rmsNormEps = o.rms_eps;
  config.rope.theta = o.rope_theta;
  config.tieWordEmbeddings = o.tie_embeddings;
  config.kvBlockSize = o.block_size;
  return config;
}
namespace {

using schema::BufferKind;
using schema::DType;
using schema::OpKind;

uint16_t toBf16(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  b += 0x7fffu + ((b >> 16) & 1u);
  return static_cast<uint16_t>(b >> 16);
}

uint16_t toF16(float f) {  // normal range only (weights here are small, not tiny)
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax < 0x38800000u) return sign;  // flush below 2^-14
  uint32_t r = ax - 0x38000000u;
  r += 0xfffu + ((r >> 13) & 1u);
  return sign | static_cast<uint16_t>(r >> 13);
}

/// A quantized [n, k] linear weight's layout and its drawn codes and scale values.
struct QuantDraws {
  schema::QuantKind kind;
  bool int4, fp4, perChannel;
  int64_t n, k, block, groups, numScales;
  float global;                     // the Nvfp4 global scale (1 otherwise)
  std::vector<uint8_t> codes;       // one per byte, packed when written
  std::vector<float> scales, offsets;
  std::vector<uint8_t> scaleCodes;  // fp4 scales as stored
};

class Builder {
 public:
  explicit Builder(const LlamaProgramOptions& o) : o_(o), rng_(o.seed) {}

  StatusOr<std::vector<uint8_t>> build();

 private:
  int32_t weight(const std::string& name, std::vector<int64_t> shape, bool norm) {
    TensorSpec spec{name, o_.weight_dtype, shape, {}, -1};
    if (o_.dummy_weights) return writer_.addTensor(std::move(spec));
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    const float amp = norm ? 0.1f : 1.0f / std::sqrt(static_cast<float>(shape.back()));
    std::uniform_real_distribution<float> dist(-amp, amp);
    const int bytes = o_.weight_dtype == DType::F32 ? 4 : 2;
    std::vector<uint8_t> data(n * bytes);
    for (int64_t i = 0; i < n; ++i) {
      const float v = (norm ? 1.0f : 0.0f) + dist(rng_);
      if (bytes == 4) {
        std::memcpy(&data[i * 4], &v, 4);
      } else {
        const uint16_t h = o_.weight_dtype == DType::BF16 ? toBf16(v) : toF16(v);
        std::memcpy(&data[i * 2], &h, 2);
      }
    }
    return writer_.addTensor(std::move(spec), std::move(data));
  }
  /// The program's input buffers (addInputBuffers below).
  std::vector<int32_t> addInputBuffers();
  /// A quantized [n, k] linear weight (o_.linear_quant) and its scale tensors; returns the
  /// tensor indices, the matrix first.
  std::vector<int32_t> quantizedWeight(const std::string& name, int64_t n, int64_t k);
  /// Draws quantizedWeight's codes and scale values (no draws for dummy weights).
  QuantDraws drawQuantized(int64_t n, int64_t k);
  /// Adds the dequantized twin of a drawn weight: one f32 [n, k] tensor.
  std::vector<int32_t> addDequantized(const std::string& name, const QuantDraws& draws);
  /// Adds a drawn weight's packed codes and its scale tensors, the codes first.
  std::vector<int32_t> addQuantized(const std::string& name, QuantDraws& draws);
  int32_t buffer(const std::string& name, int64_t width) {
    program_.buffers.push_back({name + "." + std::to_string(next_++), BufferKind::Activation,
                                DType::F32, {-1, width}});
    return static_cast<int32_t>(program_.buffers.size() - 1);
  }
  void fuseElementwise() {
    fuseResidualNorms();
    fuseRopeKvWrites();
    fuseGatedLinears();
  }

  bool fp8Weight(const ProgramStep& linear) const {
    return linear.op == OpKind::Linear && !linear.weights.empty() &&
           writer_.contents().tensors[linear.weights[0]].dtype == DType::F8E4M3FN;
  }

  /// Each MLP's gate and up linears and their silu_mul, fused into gated_linear (weights:
  /// gate, up, the gate's scales, the up's scales; param activation 0), as
  /// ingot-fuse-elementwise does: not where the gate, up or down weights are fp8.
  void fuseGatedLinears() {
    std::vector<ProgramStep>& steps = program_.steps;
    for (size_t i = 2; i + 1 < steps.size(); ++i) {
      const ProgramStep &gate = steps[i - 2], &up = steps[i - 1], &act = steps[i];
      if (gate.op != OpKind::Linear || up.op != OpKind::Linear || act.op != OpKind::SiluMul ||
          act.inputs != std::vector<int32_t>{gate.outputs[0], up.outputs[0]} ||
          gate.inputs != up.inputs || fp8Weight(gate) || fp8Weight(up) || fp8Weight(steps[i + 1]))
        continue;
      ProgramStep fused;
      fused.op = OpKind::GatedLinear;
      fused.inputs = gate.inputs;
      fused.outputs = act.outputs;
      fused.weights = {gate.weights[0], up.weights[0]};
      fused.weights.insert(fused.weights.end(), gate.weights.begin() + 1, gate.weights.end());
      fused.weights.insert(fused.weights.end(), up.weights.begin() + 1, up.weights.end());
      fused.params = {{"activation", o_.gated_activation, 0}};
      steps[i] = std::move(fused);
      steps.erase(steps.begin() + static_cast<std::ptrdiff_t>(i - 2),
                  steps.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }

  /// The rms_norm, add_rms_norm (by its normalized rows) or silu_mul making an fp8 linear's
  /// input rows gets the fp8_rows param (its CUDA step also writes them as fp8 codes), as
  /// ingot-select-kernels marks them.
  void markFp8Producers() {
    std::vector<ProgramStep>& steps = program_.steps;
    const std::vector<TensorSpec>& tensors = writer_.contents().tensors;
    for (const ProgramStep& linear : steps) {
      if (linear.op != OpKind::Linear || linear.weights.empty() ||
          tensors[linear.weights[0]].dtype != DType::F8E4M3FN)
        continue;
      for (ProgramStep& p : steps) {
        const size_t rows = p.op == OpKind::AddRmsNorm ? 1 : 0;
        const bool producer = p.op == OpKind::RmsNorm || p.op == OpKind::SiluMul ||
                              p.op == OpKind::AddRmsNorm;
        const bool marked = std::any_of(p.params.begin(), p.params.end(),
                                        [](const Param& q) { return q.name == "fp8_rows"; });
        if (producer && !marked && p.outputs.size() > rows && p.outputs[rows] == linear.inputs[0])
          p.params.push_back({"fp8_rows", 1, 0});
      }
    }
  }

  /// Each add whose sum the next step rms-normalizes, fused with it into add_rms_norm
  /// (outputs: the sum, the normalized rows), as ingot-fuse-elementwise does.
  void fuseResidualNorms() {
    std::vector<ProgramStep>& steps = program_.steps;
    for (size_t i = 1; i < steps.size(); ++i) {
      const ProgramStep& add = steps[i - 1];
      const ProgramStep& norm = steps[i];
      if (add.op != OpKind::Add || norm.op != OpKind::RmsNorm || norm.inputs[0] != add.outputs[0])
        continue;
      ProgramStep fused = norm;
      fused.op = OpKind::AddRmsNorm;
      fused.inputs = {add.inputs[1], add.inputs[0]};
      fused.outputs = {add.outputs[0], norm.outputs[0]};
      steps[i] = std::move(fused);
      steps.erase(steps.begin() + static_cast<std::ptrdiff_t>(i - 1));
    }
  }

  /// Each layer's rope (queries), rope (keys) and kv_write, fused into rope_kv_write
  /// (outputs: rotated queries, rotated keys, the pool), as ingot-fuse-elementwise does.
  void fuseRopeKvWrites() {
    std::vector<ProgramStep>& steps = program_.steps;
    for (size_t i = 2; i < steps.size(); ++i) {
      const ProgramStep &rq = steps[i - 2], &rk = steps[i - 1], &w = steps[i];
      if (rq.op != OpKind::Rope || rk.op != OpKind::Rope || w.op != OpKind::KvWrite ||
          w.inputs[1] != rk.outputs[0])
        continue;
      ProgramStep fused;
      fused.op = OpKind::RopeKvWrite;
      fused.inputs = {rq.inputs[0], rk.inputs[0], w.inputs[2], rq.inputs[1], w.inputs[0],
                      w.inputs[3]};
      fused.outputs = {rq.outputs[0], rk.outputs[0], w.outputs[0]};
      fused.params = rq.params;
      for (const Param& p : rk.params)
        if (p.name == "num_heads") fused.params.push_back({"num_kv_heads", p.i, 0});
      fused.params.insert(fused.params.end(), w.params.begin(), w.params.end());
      steps[i] = std::move(fused);
      steps.erase(steps.begin() + static_cast<std::ptrdiff_t>(i - 2),
                  steps.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }

  int32_t step(OpKind op, std::vector<int32_t> in, int64_t width, std::vector<int32_t> weights,
               std::vector<Param> params, const char* name) {
    const int32_t out = buffer(name, width);
    ProgramStep s;
    s.op = op;
    s.inputs = std::move(in);
    s.outputs = {out};
    s.weights = std::move(weights);
    s.params = std::move(params);
    program_.steps.push_back(std::move(s));
    return out;
  }

  const LlamaProgramOptions& o_;
  std::mt19937_64 rng_;
  ArtifactWriter writer_;
  Program program_;
  int next_ = 0;
};

std::vector<int32_t> Builder::quantizedWeight(const std::string& name, int64_t n, int64_t k) {
  QuantDraws draws = drawQuantized(n, k);
  if (o_.dequantized_linears) return addDequantized(name, draws);
  return addQuantized(name, draws);
}

QuantDraws Builder::drawQuantized(int64_t n, int64_t k) {
  using schema::QuantKind;
  const QuantKind kind = o_.linear_quant;
  const bool int4 = kind == QuantKind::Int4Group;
  const bool fp4 = kind == QuantKind::Nvfp4 || kind == QuantKind::Mxfp4;
  const bool perChannel = kind == QuantKind::PerChannel;
  const int64_t block = int4 ? o_.quant_group : kind == QuantKind::Nvfp4 ? 16 : fp4 ? 32 : k;
  const int64_t groups = k / block;
  const float amp = 1.0f / std::sqrt(static_cast<float>(k));
  const float jitter = 0.75f;  // scales vary in [0.75, 1.25] of nominal
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);

  // Dummy weights: the tensors without bytes (no draws; the backend fills them).
  const int64_t numScales = perChannel ? n : kind == QuantKind::PerTensor ? 1 : n * groups;
  const bool dummyOnly = o_.dummy_weights;
  // Codes, then per-block (or per-channel) scale and offset values, all drawn first.
  std::vector<uint8_t> codes(dummyOnly ? 0 : n * k);  // one per byte, packed when written
  for (uint8_t& c : codes) {
    const float u = unit(rng_);
    c = int4  ? static_cast<uint8_t>(std::min(15.0f, 16.0f * u))
        : fp4 ? f32ToE2m1(6.0f * (2.0f * u - 1.0f))
              : f32ToE4m3fn(448.0f * (2.0f * u - 1.0f));
  }
  const int64_t drawn = dummyOnly ? 0 : numScales;
  std::vector<float> scales(drawn), offsets(int4 ? drawn : 0);
  std::vector<uint8_t> scaleCodes(fp4 ? drawn : 0);
  const int mxBase = 127 + static_cast<int>(std::lround(std::log2(amp / 6.0f)));
  const float global = kind == QuantKind::Nvfp4 ? amp / 6.0f : 1.0f;
  // int4 scale and offset values as stored (rounded to quant_scale_dtype).
  auto stored = [&](float v) {
    const DType t = o_.quant_scale_dtype;
    return t == DType::F32 ? v : t == DType::BF16 ? bf16ToF32(toBf16(v)) : f16ToF32(toF16(v));
  };
  for (int64_t i = 0; i < drawn; ++i) {
    const float u = unit(rng_);
    switch (kind) {
      case QuantKind::Int4Group: {
        scales[i] = stored(2.0f / 15.0f * amp * (jitter + 0.5f * u));
        const float v = unit(rng_);
        offsets[i] = stored(o_.quant_zero_kind == schema::ZeroKind::Min
                                ? -amp * (jitter + 0.5f * v) : 7.0f + v);
        break;
      }
      case QuantKind::Nvfp4:
        scaleCodes[i] = f32ToE4m3fn(jitter + 0.5f * u);
        scales[i] = e4m3fnToF32(scaleCodes[i]);
        break;
      case QuantKind::Mxfp4:
        scaleCodes[i] = static_cast<uint8_t>(mxBase - (u < 0.3f ? 1 : 0));
        scales[i] = e8m0ToF32(scaleCodes[i]);
        break;
      default:
        scales[i] = amp / 448.0f * (jitter + 0.5f * u);
        break;
    }
  }
  return {kind, int4, fp4, perChannel, n, k, block, groups, numScales, global, std::move(codes),
          std::move(scales), std::move(offsets), std::move(scaleCodes)};
}

std::vector<int32_t> Builder::addDequantized(const std::string& name, const QuantDraws& draws) {
  using schema::QuantKind;
  const QuantKind kind = draws.kind;
  const bool int4 = draws.int4, fp4 = draws.fp4, perChannel = draws.perChannel;
  const int64_t n = draws.n, k = draws.k, groups = draws.groups, block = draws.block;
  const float global = draws.global;
  const std::vector<uint8_t>& codes = draws.codes;
  const std::vector<float>& scales = draws.scales;
  const std::vector<float>& offsets = draws.offsets;
  if (o_.dummy_weights) return {writer_.addTensor({name, DType::F32, {n, k}, {}, -1})};
  std::vector<uint8_t> data(n * k * 4);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const uint8_t q = codes[r * k + c];
      const int64_t g = perChannel                      ? r
                        : kind == QuantKind::PerTensor ? 0
                                                       : r * groups + c / block;
      double w;
      if (int4) {
        w = o_.quant_zero_kind == schema::ZeroKind::Min
                ? static_cast<double>(scales[g]) * q + offsets[g]
                : static_cast<double>(scales[g]) * (q - static_cast<double>(offsets[g]));
      } else if (fp4) {
        w = static_cast<double>(e2m1ToF32(q)) * scales[g] * global;
      } else {
        w = static_cast<double>(e4m3fnToF32(q)) * scales[g];
      }
      const float f = static_cast<float>(w);
      std::memcpy(&data[(r * k + c) * 4], &f, 4);
    }
  return {writer_.addTensor({name, DType::F32, {n, k}, {}, -1}, std::move(data))};
}

std::vector<int32_t> Builder::addQuantized(const std::string& name, QuantDraws& draws) {
  using schema::QuantKind;
  const QuantKind kind = draws.kind;
  const bool int4 = draws.int4, fp4 = draws.fp4;
  const int64_t n = draws.n, k = draws.k, block = draws.block, groups = draws.groups;
  const int64_t numScales = draws.numScales;
  const float global = draws.global;
  const std::vector<uint8_t>& codes = draws.codes;
  const std::vector<float>& scales = draws.scales;
  const std::vector<float>& offsets = draws.offsets;
  std::vector<uint8_t>& scaleCodes = draws.scaleCodes;  // moved into its tensor
  auto add = [&](TensorSpec spec, std::vector<uint8_t> bytes) {
    return o_.dummy_weights ? writer_.addTensor(std::move(spec))
                            : writer_.addTensor(std::move(spec), std::move(bytes));
  };
  auto f32Bytes = [](const std::vector<float>& v) {
    std::vector<uint8_t> b(v.size() * 4);
    if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  auto groupBytes = [&](const std::vector<float>& v) {
    const DType t = o_.quant_scale_dtype;
    if (t == DType::F32) return f32Bytes(v);
    std::vector<uint8_t> b(v.size() * 2);
    for (size_t i = 0; i < v.size(); ++i) {
      const uint16_t h = t == DType::BF16 ? toBf16(v[i]) : toF16(v[i]);
      std::memcpy(&b[2 * i], &h, 2);
    }
    return b;
  };
  const int32_t self = static_cast<int32_t>(writer_.numTensors());
  QuantScheme scheme;
  scheme.kind = kind;
  scheme.blockSize = int4 || fp4 ? static_cast<uint32_t>(block) : 0;
  scheme.zeroKind = int4 ? o_.quant_zero_kind : schema::ZeroKind::None;
  scheme.scaleTensor = self + 1;
  if (int4) scheme.zeroTensor = self + 2;
  if (kind == QuantKind::Nvfp4) scheme.globalScaleTensor = self + 2;
  std::vector<uint8_t> packed(int4 || fp4 ? (n * k + 1) / 2 : n * k, 0);
  for (int64_t i = 0; i < static_cast<int64_t>(codes.size()); ++i) {
    if (int4 || fp4) packed[i / 2] |= static_cast<uint8_t>((i & 1) ? codes[i] << 4 : codes[i]);
    else packed[i] = codes[i];
  }
  const DType codeType = int4 ? DType::U4 : fp4 ? DType::F4E2M1FN : DType::F8E4M3FN;
  std::vector<int32_t> out = {add({name, codeType, {n, k}, scheme, -1}, std::move(packed))};
  if (int4) {
    out.push_back(add({name + ".scale", o_.quant_scale_dtype, {n, groups}, {}, -1},
                      groupBytes(scales)));
    out.push_back(add({name + ".zero", o_.quant_scale_dtype, {n, groups}, {}, -1},
                      groupBytes(offsets)));
  } else if (fp4) {
    const DType st = kind == QuantKind::Nvfp4 ? DType::F8E4M3FN : DType::F8E8M0FNU;
    out.push_back(add({name + ".scale", st, {n, groups}, {}, -1}, std::move(scaleCodes)));
    if (kind == QuantKind::Nvfp4)
      out.push_back(add({name + ".global_scale", DType::F32, {1}, {}, -1}, f32Bytes({global})));
  } else {
    out.push_back(add({name + ".scale", DType::F32, {numScales}, {}, -1}, f32Bytes(scales)));
  }
  return out;
}

/// The eight step inputs, then the extra attention inputs; returns the extras' buffers.
std::vector<int32_t> Builder::addInputBuffers() {
  const char* inputs[] = {"tokens", "positions", "kv_cache", "block_tables",
                          "seq_lens", "query_start", "slot_mapping", "logit_rows"};
  for (int i = 0; i < 8; ++i) {
    Buffer b{inputs[i], BufferKind::Input, DType::I32, {-1}};
    if (i == 2) b = {inputs[i], BufferKind::KvCache, o_.kv_dtype,
                     {-1, o_.layers, 2, o_.block_size, o_.kv_heads, o_.head_dim}};
    if (i == 3) b.shape = {-1, -1};
    program_.buffers.push_back(b);
  }
  std::vector<int32_t> extras;
  for (size_t i = 0; i < o_.extra_input_ranks.size(); ++i) {
    const std::string name = i < o_.extra_input_names.size() ? o_.extra_input_names[i]
                                                              : "extra" + std::to_string(i);
    program_.buffers.push_back({name, BufferKind::Input, DType::I32,
                                std::vector<int64_t>(o_.extra_input_ranks[i], -1)});
    extras.push_back(static_cast<int32_t>(program_.buffers.size() - 1));
  }
  return extras;
}

StatusOr<std::vector<uint8_t>> Builder::build() {
  const int64_t D = o_.hidden, Dh = o_.head_dim, H = o_.heads, Hk = o_.kv_heads;
  writer_.setModelConfig(llamaModelConfig(o_));
  if (o_.dummy_weights) writer_.setDummyWeights(o_.seed);

  program_.name = "step";
  const std::vector<int32_t> extras = addInputBuffers();

  AttentionVariant variant;
  variant.name = "variant0";
  variant.maskBytecode = o_.mask_bytecode;
  if (variant.maskBytecode.empty() && o_.causal) variant.maskBytecode = causalMaskBytecode();
  variant.scoreBytecode = o_.score_bytecode;
  int32_t variantIndex = -1;
  if (!variant.maskBytecode.empty() || !variant.scoreBytecode.empty())
    variantIndex = writer_.addAttentionVariant(variant);

  const int32_t embed = weight("model.embed_tokens.weight", {o_.vocab, D}, false);
  int32_t h = step(OpKind::Embedding, {0}, D, {embed}, {}, "embedding");
  if (o_.embedding_scale != 1.0f)
    h = step(OpKind::Scale, {h}, D, {}, {{"factor", 0, o_.embedding_scale}}, "embedding_scale");
  const std::vector<Param> eps = {{"epsilon", 0, o_.rms_eps}};
  for (int32_t l = 0; l < o_.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const std::vector<Param> layer = {{"layer", l, 0}};
    auto linear = [&](int32_t x, const std::string& name, int64_t n, int64_t k, bool bias) {
      if (o_.linear_quant != schema::QuantKind::None) {
        std::vector<int32_t> q = quantizedWeight(p + name + ".weight", n, k);
        std::vector<int32_t> w = {q[0]};
        if (bias) w.push_back(weight(p + name + ".bias", {n}, true));
        w.insert(w.end(), q.begin() + 1, q.end());
        return step(OpKind::Linear, {x}, n, w, {}, "linear");
      }
      std::vector<int32_t> w = {weight(p + name + ".weight", {n, k}, false)};
      if (bias) w.push_back(weight(p + name + ".bias", {n}, true));
      return step(OpKind::Linear, {x}, n, w, {}, "linear");
    };
    const int32_t x = step(OpKind::RmsNorm, {h}, D, {weight(p + "input_layernorm.weight", {D}, true)},
                           eps, "rms_norm");
    int32_t q;
    if (o_.fp8_first_q_proj && l == 0) {
      const int32_t scale = static_cast<int32_t>(writer_.numTensors()) + 1;  // added next
      TensorSpec spec{p + "self_attn.q_proj.weight", DType::F8E4M3FN, {H * Dh, D},
                      {schema::QuantKind::PerTensor, 0, schema::ZeroKind::None, scale}, -1};
      const int32_t w = o_.dummy_weights ? writer_.addTensor(std::move(spec))
                                         : writer_.addTensor(std::move(spec),
                                                             std::vector<uint8_t>(H * Dh * D, 0x38));
      TensorSpec sspec{p + "self_attn.q_proj.scale", DType::F32, {1}, {}, -1};
      const float one = 1.0f;
      std::vector<uint8_t> sb(4);
      std::memcpy(sb.data(), &one, 4);
      const int32_t s = o_.dummy_weights ? writer_.addTensor(std::move(sspec))
                                         : writer_.addTensor(std::move(sspec), std::move(sb));
      q = step(OpKind::Linear, {x}, H * Dh, {w, s}, {}, "linear");
    } else {
      q = linear(x, "self_attn.q_proj", H * Dh, D, o_.qkv_bias);
    }
    int32_t k = linear(x, "self_attn.k_proj", Hk * Dh, D, o_.qkv_bias);
    const int32_t v = linear(x, "self_attn.v_proj", Hk * Dh, D, o_.qkv_bias);
    if (o_.qk_norm) {
      q = step(OpKind::RmsNorm, {q}, H * Dh, {weight(p + "self_attn.q_norm.weight", {Dh}, true)},
               eps, "rms_norm");
      k = step(OpKind::RmsNorm, {k}, Hk * Dh,
               {weight(p + "self_attn.k_norm.weight", {Dh}, true)}, eps, "rms_norm");
    }
    auto rope = [&](int32_t in, int64_t heads) {
      return step(OpKind::Rope, {in, 1}, heads * Dh, {},
                  {{"head_dim", Dh, 0}, {"num_heads", heads, 0}, {"theta", 0, o_.rope_theta}},
                  "rope");
    };
    const int32_t qr = rope(q, H), kr = rope(k, Hk);
    ProgramStep kvw;
    kvw.op = OpKind::KvWrite;
    kvw.inputs = {2, kr, v, 6};
    kvw.outputs = {2};
    kvw.params = layer;
    program_.steps.push_back(kvw);
    std::vector<int32_t> attnIn = {qr, 2, 3, 4, 5};
    attnIn.insert(attnIn.end(), extras.begin(), extras.end());
    const int32_t attn =
        step(OpKind::Attention, attnIn, H * Dh, {},
             {{"head_dim", Dh, 0}, {"layer", l, 0}, {"num_heads", H, 0},
              {"num_kv_heads", Hk, 0}, {"scale", 0, 1.0 / std::sqrt(static_cast<double>(Dh))}},
             "attention");
    program_.steps.back().attentionVariant = variantIndex;
    const int32_t o = linear(attn, "self_attn.o_proj", D, H * Dh, false);
    const int32_t h1 = step(OpKind::Add, {h, o}, D, {}, {}, "add");
    const int32_t y = step(OpKind::RmsNorm, {h1}, D,
                           {weight(p + "post_attention_layernorm.weight", {D}, true)}, eps,
                           "rms_norm");
    const int32_t gate = linear(y, "mlp.gate_proj", o_.intermediate, D, false);
    const int32_t up = linear(y, "mlp.up_proj", o_.intermediate, D, false);
    const int32_t act = step(OpKind::SiluMul, {gate, up}, o_.intermediate, {}, {}, "silu_mul");
    const int32_t down = linear(act, "mlp.down_proj", D, o_.intermediate, false);
    h = step(OpKind::Add, {h1, down}, D, {}, {}, "add");
  }
  const int32_t hn = step(OpKind::RmsNorm, {h}, D, {weight("model.norm.weight", {D}, true)}, eps,
                          "rms_norm");
  const int32_t table = o_.tie_embeddings ? embed : weight("lm_head.weight", {o_.vocab, D}, false);
  const int32_t logits = step(OpKind::Logits, {hn, 7}, o_.vocab, {table}, {}, "logits");
  program_.buffers[logits].kind = BufferKind::Output;
  if (o_.fuse_elementwise) fuseElementwise();
  markFp8Producers();
  StatusOr<Program> draft = Program{};
  if (o_.draft_layers > 0) draft = earlyExitDraftProgram(program_, o_.draft_layers);
  if (!draft.ok()) return draft.status();
  writer_.addProgram(std::move(program_));
  if (o_.draft_layers > 0) writer_.addProgram(std::move(*draft));
  if (o_.fake_cuda_kernels) addFakeCudaKernels(writer_, o_);
  return writer_.writeToBuffer();
}


}  // namespace

StatusOr<std::vector<uint8_t>> buildLlamaArtifact(const LlamaProgramOptions& options) {
  if (options.tp > 1) return buildShardedLlamaArtifact(options);
  Builder builder(options);
  return builder.build();
}

const Artifact& sharedLlamaArtifact(int64_t vocab, int64_t max_context, uint64_t seed) {
  struct Built {
    std::vector<uint8_t> bytes;
    std::unique_ptr<Artifact> artifact;
  };
  static std::mutex mutex;
  static std::map<std::tuple<int64_t, int64_t, uint64_t>, std::unique_ptr<Built>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<Built>& entry = cache[{vocab, max_context, seed}];
  if (!entry) {
    LlamaProgramOptions o;
    o.vocab = vocab;
    o.max_context = max_context;
    o.seed = seed;
    StatusOr<std::vector<uint8_t>> bytes = buildLlamaArtifact(o);
    if (!bytes.ok()) {
      std::fprintf(stderr, "sharedLlamaArtifact: %s\n", bytes.status().message().c_str());
      std::abort();
    }
    auto built = std::make_unique<Built>();
    built->bytes = std::move(bytes).value();
    StatusOr<Artifact> opened = Artifact::openFromMemory(built->bytes);
    if (!opened.ok()) {
      std::fprintf(stderr, "sharedLlamaArtifact: %s\n", opened.status().message().c_str());
      std::abort();
    }
    built->artifact = std::make_unique<Artifact>(std::move(opened).value());
    entry = std::move(built);
  }
  return *entry->artifact;
}

}  // namespace ingot::testing
