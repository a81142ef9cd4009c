// buildShardedLlamaArtifact: the tiny Llama step program split over N tensor-parallel ranks.
#include <cmath>
#include <cstring>
#include <random>

#include "core/artifact/artifact_writer.h"
#include "core/region/region_examples.h"
#include "testing/llama_model_config.h"
#include "testing/llama_program.h"

namespace ingot::testing {
namespace {

using schema::BufferKind;
using schema::DType;
using schema::OpKind;

/// Items [start, start + count) of a split dimension.
struct Slice {
  int64_t start = 0;
  int64_t count = 0;
};

/// Block `index` of `total` items in `parts` contiguous blocks differing by at most one,
/// the larger first (docs/tensor-parallel.md).
Slice evenBlock(int64_t total, int64_t parts, int64_t index) {
  const int64_t base = total / parts, extra = total % parts;
  return {index * base + std::min(index, extra), base + (index < extra ? 1 : 0)};
}

/// The q heads and kv heads of rank r (docs/tensor-parallel.md, "Head assignment").
struct Heads {
  Slice q, kv;
};
Heads headsOf(int64_t H, int64_t Hkv, int64_t N, int64_t r) {
  const int64_t G = H / Hkv;
  if (Hkv >= N) {
    const Slice kv = evenBlock(Hkv, N, r);
    return {{kv.start * G, kv.count * G}, kv};
  }
  const int64_t head = r * Hkv / N;
  int64_t first = r, last = r;  // the ranks that serve this kv head
  while (first > 0 && (first - 1) * Hkv / N == head) --first;
  while (last + 1 < N && (last + 1) * Hkv / N == head) ++last;
  const Slice q = evenBlock(G, last - first + 1, r - first);
  return {{head * G + q.start, q.count}, {head, 1}};
}

/// One rank's program under construction.
struct RankProgram {
  Program p;
  int next = 0;
  int32_t buffer(const std::string& name, int64_t width, BufferKind kind = BufferKind::Activation) {
    p.buffers.push_back({name + "." + std::to_string(next++), kind, DType::F32, {-1, width}});
    return static_cast<int32_t>(p.buffers.size() - 1);
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
    p.steps.push_back(std::move(s));
    return out;
  }
  /// Appends an all-reduce of buffer x (width wide); returns its output buffer.
  int32_t allReduce(int32_t x, int64_t width) {
    return step(OpKind::AllReduce, {x}, width, {}, {}, "all_reduce");
  }
};

/// How the heads, q/kv rows, intermediate size and vocabulary split over the ranks.
struct RankSplit {
  std::vector<Heads> heads;
  std::vector<Slice> qRows, kvRows, inter, vocab;
};

/// Each rank's heads, q/kv rows, intermediate slice and vocabulary slice.
RankSplit splitOverRanks(const LlamaProgramOptions& o) {
  const int64_t N = o.tp, Dh = o.head_dim, H = o.heads, Hk = o.kv_heads;
  RankSplit split;
  std::vector<Heads>& heads = split.heads;
  for (int64_t r = 0; r < N; ++r) {
    heads.push_back(headsOf(H, Hk, N, r));
    split.qRows.push_back({heads[r].q.start * Dh, heads[r].q.count * Dh});
    split.kvRows.push_back({heads[r].kv.start * Dh, heads[r].kv.count * Dh});
    split.inter.push_back(evenBlock(o.intermediate, N, r));
    split.vocab.push_back(evenBlock(o.vocab, N, r));
  }
  return split;
}

/// A weight drawn exactly as buildLlamaArtifact draws it (same generator, same order),
/// so that the sharded and the unsharded artifact of one seed hold the same model.
class ShardedBuilder {
 public:
  explicit ShardedBuilder(const LlamaProgramOptions& o) : o_(o), rng_(o.seed) {}
  StatusOr<std::vector<uint8_t>> build();

 private:
  /// Draws a [rows, cols] (or [n]) f32 tensor.
  std::vector<float> draw(const std::vector<int64_t>& shape, bool norm) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    const float amp = norm ? 0.1f : 1.0f / std::sqrt(static_cast<float>(shape.back()));
    std::uniform_real_distribution<float> dist(-amp, amp);
    std::vector<float> v(n);
    for (float& x : v) x = (norm ? 1.0f : 0.0f) + dist(rng_);
    return v;
  }
  int32_t add(const std::string& name, std::vector<int64_t> shape, const float* data,
              int32_t rank) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<uint8_t> bytes(n * 4);
    std::memcpy(bytes.data(), data, bytes.size());
    return writer_.addTensor({name, DType::F32, std::move(shape), {}, rank}, std::move(bytes));
  }
  /// A replicated tensor.
  int32_t replicated(const std::string& name, std::vector<int64_t> shape, bool norm) {
    const std::vector<float> v = draw(shape, norm);
    return add(name, shape, v.data(), -1);
  }
  /// Per rank, rows slices[r] of a drawn [rows, cols] matrix (or [rows] vector).
  std::vector<int32_t> rowShards(const std::string& name, int64_t rows, int64_t cols,
                                 const std::vector<Slice>& slices, bool norm) {
    const std::vector<int64_t> shape = cols ? std::vector<int64_t>{rows, cols}
                                            : std::vector<int64_t>{rows};
    const std::vector<float> v = draw(shape, norm);
    const int64_t width = cols ? cols : 1;
    std::vector<int32_t> out;
    for (size_t r = 0; r < slices.size(); ++r) {
      std::vector<int64_t> local = shape;
      local[0] = slices[r].count;
      out.push_back(add(name, local, v.data() + slices[r].start * width, static_cast<int32_t>(r)));
    }
    return out;
  }
  /// Per rank, columns slices[r] of a drawn [rows, cols] matrix.
  std::vector<int32_t> colShards(const std::string& name, int64_t rows, int64_t cols,
                                 const std::vector<Slice>& slices) {
    const std::vector<float> v = draw({rows, cols}, false);
    std::vector<int32_t> out;
    for (size_t r = 0; r < slices.size(); ++r) {
      std::vector<float> part(rows * slices[r].count);
      for (int64_t i = 0; i < rows; ++i)
        std::memcpy(&part[i * slices[r].count], &v[i * cols + slices[r].start],
                    slices[r].count * sizeof(float));
      out.push_back(add(name, {rows, slices[r].count}, part.data(), static_cast<int32_t>(r)));
    }
    return out;
  }

  /// Fails unless the options are ones this builder can shard.
  Status checkShardable() const;
  /// One program per rank with the step inputs (the kv cache holds the rank's kv heads).
  std::vector<RankProgram> startRankPrograms(const std::vector<Heads>& heads) const;
  /// Adds the attention variant the options describe; returns its index, or -1 for none.
  int32_t addAttentionVariant();
  /// Draws layer l's weights and appends its steps to every rank's program.
  void addLayer(int32_t l, const RankSplit& split, int32_t variantIndex,
                const std::vector<Param>& eps, std::vector<RankProgram>& ranks,
                std::vector<int32_t>& h);

  const LlamaProgramOptions& o_;
  std::mt19937_64 rng_;
  ArtifactWriter writer_;
};

Status ShardedBuilder::checkShardable() const {
  const int64_t N = o_.tp, H = o_.heads, Hk = o_.kv_heads;
  if (o_.weight_dtype != DType::F32 || o_.dummy_weights || o_.qkv_bias ||
      o_.linear_quant != schema::QuantKind::None || o_.fp8_first_q_proj || o_.draft_layers > 0 ||
      !o_.extra_input_ranks.empty())
    return unimplemented("sharded test llama: only f32 weights with a blob, no biases, "
                         "quantization, draft programs or extra inputs");
  if (N > H || H % Hk != 0 || N > o_.intermediate)
    return invalidArgument("sharded test llama: cannot split " + std::to_string(H) + " heads / " +
                           std::to_string(Hk) + " kv heads over " + std::to_string(N) + " ranks");
  return okStatus();
}

std::vector<RankProgram> ShardedBuilder::startRankPrograms(const std::vector<Heads>& heads) const {
  const int64_t N = o_.tp, Dh = o_.head_dim;
  std::vector<RankProgram> ranks(N);
  for (int64_t r = 0; r < N; ++r) {
    Program& p = ranks[r].p;
    p.name = "step_tp" + std::to_string(r);
    p.tpRank = static_cast<int32_t>(r);
    const char* inputs[] = {"tokens", "positions", "kv_cache", "block_tables",
                            "seq_lens", "query_start", "slot_mapping", "logit_rows"};
    for (int i = 0; i < 8; ++i) {
      Buffer b{inputs[i], BufferKind::Input, DType::I32, {-1}};
      if (i == 2) b = {inputs[i], BufferKind::KvCache, o_.kv_dtype,
                       {-1, o_.layers, 2, o_.block_size, heads[r].kv.count, Dh}};
      if (i == 3) b.shape = {-1, -1};
      p.buffers.push_back(b);
    }
  }
  return ranks;
}

int32_t ShardedBuilder::addAttentionVariant() {
  AttentionVariant variant;
  variant.name = "variant0";
  variant.maskBytecode = o_.mask_bytecode;
  if (variant.maskBytecode.empty() && o_.causal) variant.maskBytecode = causalMaskBytecode();
  variant.scoreBytecode = o_.score_bytecode;
  int32_t variantIndex = -1;
  if (!variant.maskBytecode.empty() || !variant.scoreBytecode.empty())
    variantIndex = writer_.addAttentionVariant(variant);
  return variantIndex;
}

void ShardedBuilder::addLayer(int32_t l, const RankSplit& split, int32_t variantIndex,
                              const std::vector<Param>& eps, std::vector<RankProgram>& ranks,
                              std::vector<int32_t>& h) {
  const int64_t N = o_.tp, D = o_.hidden, Dh = o_.head_dim, H = o_.heads, Hk = o_.kv_heads;
  const std::vector<Heads>& heads = split.heads;
  const std::vector<Slice>& inter = split.inter;
  const std::string pre = "model.layers." + std::to_string(l) + ".";
  const int32_t inNorm = replicated(pre + "input_layernorm.weight", {D}, true);
  const auto wq = rowShards(pre + "self_attn.q_proj.weight", H * Dh, D, split.qRows, false);
  const auto wk = rowShards(pre + "self_attn.k_proj.weight", Hk * Dh, D, split.kvRows, false);
  const auto wv = rowShards(pre + "self_attn.v_proj.weight", Hk * Dh, D, split.kvRows, false);
  const auto wo = colShards(pre + "self_attn.o_proj.weight", D, H * Dh, split.qRows);
  const int32_t postNorm = replicated(pre + "post_attention_layernorm.weight", {D}, true);
  const auto wg = rowShards(pre + "mlp.gate_proj.weight", o_.intermediate, D, inter, false);
  const auto wu = rowShards(pre + "mlp.up_proj.weight", o_.intermediate, D, inter, false);
  const auto wd = colShards(pre + "mlp.down_proj.weight", D, o_.intermediate, inter);
  for (int64_t r = 0; r < N; ++r) {
    RankProgram& rp = ranks[r];
    const int64_t hq = heads[r].q.count, hk = heads[r].kv.count, I = inter[r].count;
    const int32_t x = rp.step(OpKind::RmsNorm, {h[r]}, D, {inNorm}, eps, "rms_norm");
    const int32_t q = rp.step(OpKind::Linear, {x}, hq * Dh, {wq[r]}, {}, "linear");
    const int32_t k = rp.step(OpKind::Linear, {x}, hk * Dh, {wk[r]}, {}, "linear");
    const int32_t v = rp.step(OpKind::Linear, {x}, hk * Dh, {wv[r]}, {}, "linear");
    auto rope = [&](int32_t in, int64_t n) {
      return rp.step(OpKind::Rope, {in, 1}, n * Dh, {},
                     {{"head_dim", Dh, 0}, {"num_heads", n, 0}, {"theta", 0, o_.rope_theta}},
                     "rope");
    };
    const int32_t qr = rope(q, hq), kr = rope(k, hk);
    ProgramStep kvw;
    kvw.op = OpKind::KvWrite;
    kvw.inputs = {2, kr, v, 6};
    kvw.outputs = {2};
    kvw.params = {{"layer", l, 0}};
    rp.p.steps.push_back(kvw);
    const int32_t attn =
        rp.step(OpKind::Attention, {qr, 2, 3, 4, 5}, hq * Dh, {},
                {{"head_dim", Dh, 0}, {"layer", l, 0}, {"num_heads", hq, 0},
                 {"num_kv_heads", hk, 0},
                 {"scale", 0, 1.0 / std::sqrt(static_cast<double>(Dh))}},
                "attention");
    rp.p.steps.back().attentionVariant = variantIndex;
    const int32_t o = rp.allReduce(rp.step(OpKind::Linear, {attn}, D, {wo[r]}, {}, "linear"), D);
    const int32_t h1 = rp.step(OpKind::Add, {h[r], o}, D, {}, {}, "add");
    const int32_t y = rp.step(OpKind::RmsNorm, {h1}, D, {postNorm}, eps, "rms_norm");
    const int32_t gate = rp.step(OpKind::Linear, {y}, I, {wg[r]}, {}, "linear");
    const int32_t up = rp.step(OpKind::Linear, {y}, I, {wu[r]}, {}, "linear");
    const int32_t act = rp.step(OpKind::SiluMul, {gate, up}, I, {}, {}, "silu_mul");
    const int32_t down = rp.allReduce(rp.step(OpKind::Linear, {act}, D, {wd[r]}, {}, "linear"), D);
    h[r] = rp.step(OpKind::Add, {h1, down}, D, {}, {}, "add");
  }
}

StatusOr<std::vector<uint8_t>> ShardedBuilder::build() {
  const int64_t N = o_.tp, D = o_.hidden;
  INGOT_RETURN_IF_ERROR(checkShardable());
  writer_.setModelConfig(llamaModelConfig(o_));
  writer_.setTensorParallel(static_cast<int32_t>(N));

  const RankSplit split = splitOverRanks(o_);
  const std::vector<Slice>& vocab = split.vocab;
  const bool vocabSplit = o_.vocab % N == 0;
  std::vector<RankProgram> ranks = startRankPrograms(split.heads);
  std::vector<int32_t> h(N);
  const int32_t variantIndex = addAttentionVariant();

  // Per-rank tensor indices of one weight: sharded, or the replicated one N times.
  auto same = [&](int32_t t) { return std::vector<int32_t>(N, t); };
  const std::vector<int32_t> embed =
      vocabSplit ? rowShards("model.embed_tokens.weight", o_.vocab, D, vocab, false)
                 : same(replicated("model.embed_tokens.weight", {o_.vocab, D}, false));
  for (int64_t r = 0; r < N; ++r) {
    std::vector<Param> params;
    if (vocabSplit) params.push_back({"vocab_start", vocab[r].start, 0});
    h[r] = ranks[r].step(OpKind::Embedding, {0}, D, {embed[r]}, params, "embedding");
    if (vocabSplit) h[r] = ranks[r].allReduce(h[r], D);
  }
  const std::vector<Param> eps = {{"epsilon", 0, o_.rms_eps}};
  for (int32_t l = 0; l < o_.layers; ++l) addLayer(l, split, variantIndex, eps, ranks, h);
  const int32_t finalNorm = replicated("model.norm.weight", {D}, true);
  std::vector<int32_t> head = embed;
  if (!o_.tie_embeddings)
    head = vocabSplit ? rowShards("lm_head.weight", o_.vocab, D, vocab, false)
                      : same(replicated("lm_head.weight", {o_.vocab, D}, false));
  for (int64_t r = 0; r < N; ++r) {
    RankProgram& rp = ranks[r];
    const int32_t hn = rp.step(OpKind::RmsNorm, {h[r]}, D, {finalNorm}, eps, "rms_norm");
    const int64_t width = vocabSplit ? vocab[r].count : o_.vocab;
    int32_t logits = rp.step(OpKind::Logits, {hn, 7}, width, {head[r]}, {}, "logits");
    if (vocabSplit) logits = rp.step(OpKind::AllGather, {logits}, o_.vocab, {}, {}, "all_gather");
    rp.p.buffers[logits].kind = BufferKind::Output;
    writer_.addProgram(std::move(rp.p));
  }
  if (o_.fake_cuda_kernels) addFakeCudaKernels(writer_, o_);
  return writer_.writeToBuffer();
}

}  // namespace

StatusOr<std::vector<uint8_t>> buildShardedLlamaArtifact(const LlamaProgramOptions& options) {
  ShardedBuilder builder(options);
  return builder.build();
}

}  // namespace ingot::testing
