//===- GgufImporter.cpp - GGUF checkpoints to an ImportedModel ------------===//
#include "compiler/import/GgufImporter.h"

#include <cmath>
#include <cstring>
#include <fstream>

#include "compiler/import/gguf/GgufFile.h"
#include "compiler/import/LlamaTensorShapes.h"
#include "compiler/import/WeightConversion.h"
#include "xxhash.h"

namespace ingot::importer {
namespace {

using gguf::GgufFile;
using gguf::GgufTensorInfo;

/// Architectures whose graph the Llama module builder expresses.
struct ArchitectureInfo {
  const char *name;
  /// llama.cpp's converter permuted Q/K rows for interleaved RoPE.
  bool permutedQk;
  bool attentionBias;
};
constexpr ArchitectureInfo kArchitectures[] = {
    {"llama", true, false},
    {"qwen2", false, true},
};

/// Renames a GGUF tensor ("blk.3.attn_q.weight") to its Hugging Face name, or "".
std::string huggingFaceName(const std::string &name) {
  static const std::pair<const char *, const char *> kGlobal[] = {
      {"token_embd.weight", "model.embed_tokens.weight"},
      {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"},
  };
  for (auto [from, to] : kGlobal)
    if (name == from)
      return to;
  static const std::pair<const char *, const char *> kLayer[] = {
      {"attn_norm.weight", "input_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_q.bias", "self_attn.q_proj.bias"},
      {"attn_k.bias", "self_attn.k_proj.bias"},
      {"attn_v.bias", "self_attn.v_proj.bias"},
      {"attn_output.weight", "self_attn.o_proj.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"},
  };
  if (name.rfind("blk.", 0) != 0)
    return "";
  size_t dot = name.find('.', 4);
  if (dot == std::string::npos)
    return "";
  std::string layer = name.substr(4, dot - 4);
  if (layer.empty() || layer.find_first_not_of("0123456789") != std::string::npos)
    return "";
  std::string rest = name.substr(dot + 1);
  for (auto [from, to] : kLayer)
    if (rest == from)
      return "model.layers." + layer + "." + to;
  return "";
}

/// Reads a required integer key; the message names the key.
template <typename T>
Status requireInt(const GgufFile &file, const std::string &key, T &out) {
  StatusOr<int64_t> v = file.getI64(key);
  if (!v.ok())
    return v.status();
  if (*v <= 0)
    return invalidArgument(file.path() + ": key '" + key + "' must be positive");
  out = static_cast<T>(*v);
  return okStatus();
}

Status readConfig(const GgufFile &file, const std::string &arch, ModelConfig &c) {
  auto key = [&](const char *suffix) { return arch + "." + suffix; };
  c.architecture = arch;
  if (StatusOr<std::string> name = file.getString("general.name"); name.ok())
    c.name = *name;
  INGOT_RETURN_IF_ERROR(requireInt(file, key("block_count"), c.numLayers));
  INGOT_RETURN_IF_ERROR(requireInt(file, key("embedding_length"), c.hiddenSize));
  INGOT_RETURN_IF_ERROR(requireInt(file, key("feed_forward_length"), c.intermediateSize));
  INGOT_RETURN_IF_ERROR(requireInt(file, key("attention.head_count"), c.numHeads));
  INGOT_RETURN_IF_ERROR(requireInt(file, key("context_length"), c.maxContext));
  c.numKvHeads = c.numHeads;
  if (file.has(key("attention.head_count_kv")))
    INGOT_RETURN_IF_ERROR(requireInt(file, key("attention.head_count_kv"), c.numKvHeads));
  if (c.hiddenSize % c.numHeads != 0)
    return invalidArgument(file.path() + ": embedding_length " +
                           std::to_string(c.hiddenSize) + " is not a multiple of head_count " +
                           std::to_string(c.numHeads));
  c.headDim = static_cast<int32_t>(c.hiddenSize / c.numHeads);
  if (file.has(key("attention.key_length")))
    INGOT_RETURN_IF_ERROR(requireInt(file, key("attention.key_length"), c.headDim));
  if (StatusOr<float> eps = file.getF32(key("attention.layer_norm_rms_epsilon")); eps.ok())
    c.rmsNormEps = *eps;
  else
    return eps.status();
  if (StatusOr<float> theta = file.getF32(key("rope.freq_base")); theta.ok())
    c.rope.theta = *theta;
  if (file.has(key("rope.dimension_count"))) {
    int32_t rotary = 0;
    INGOT_RETURN_IF_ERROR(requireInt(file, key("rope.dimension_count"), rotary));
    if (rotary != c.headDim)
      return invalidArgument(file.path() + ": partial rotary embeddings (rope.dimension_count " +
                             std::to_string(rotary) + " of head_dim " +
                             std::to_string(c.headDim) + ") are not supported yet");
  }
  if (StatusOr<std::string> scaling = file.getString(key("rope.scaling.type")); scaling.ok()) {
    if (*scaling == "linear") {
      c.rope.scaling = schema::RopeScalingKind::Linear;
      if (StatusOr<float> f = file.getF32(key("rope.scaling.factor")); f.ok())
        c.rope.factor = *f;
    } else if (*scaling != "none") {
      return invalidArgument(file.path() + ": rope scaling '" + *scaling +
                             "' is not supported yet");
    }
  }
  return okStatus();
}

schema::TokenAttr tokenAttr(int64_t ggufType) {
  switch (ggufType) {
  case 2:
    return schema::TokenAttr::Unknown;
  case 3:
    return schema::TokenAttr::Control;
  case 4:
    return schema::TokenAttr::UserDefined;
  case 6:
    return schema::TokenAttr::Byte;
  default: // 1 normal, 5 unused
    return schema::TokenAttr::Normal;
  }
}

Status readTokenizer(const GgufFile &file, ImportedModel &model) {
  if (!file.has("tokenizer.ggml.model"))
    return okStatus(); // a checkpoint without a tokenizer still compiles
  Tokenizer &t = model.tokenizer;
  StatusOr<std::string> kind = file.getString("tokenizer.ggml.model");
  if (!kind.ok())
    return kind.status();
  if (*kind == "gpt2")
    t.kind = schema::TokenizerKind::ByteLevelBpe;
  else if (*kind == "llama")
    t.kind = schema::TokenizerKind::SentencePieceBpe;
  else
    return invalidArgument(file.path() + ": tokenizer model '" + *kind +
                           "' is not supported (byte-level BPE 'gpt2' and SentencePiece "
                           "'llama' are)");
  if (StatusOr<std::string> pre = file.getString("tokenizer.ggml.pre"); pre.ok())
    t.preTokenizer = *pre;
  StatusOr<std::vector<std::string>> tokens = file.getStringArray("tokenizer.ggml.tokens");
  if (!tokens.ok())
    return tokens.status();
  t.tokens = std::move(tokens).value();
  if (file.has("tokenizer.ggml.scores")) {
    StatusOr<std::vector<float>> scores = file.getFloatArray("tokenizer.ggml.scores");
    if (!scores.ok())
      return scores.status();
    t.scores = std::move(scores).value();
  }
  if (file.has("tokenizer.ggml.token_type")) {
    StatusOr<std::vector<int64_t>> types = file.getIntArray("tokenizer.ggml.token_type");
    if (!types.ok())
      return types.status();
    for (int64_t type : *types)
      t.tokenAttrs.push_back(tokenAttr(type));
  }
  if (file.has("tokenizer.ggml.merges")) {
    StatusOr<std::vector<std::string>> merges = file.getStringArray("tokenizer.ggml.merges");
    if (!merges.ok())
      return merges.status();
    t.merges = std::move(merges).value();
  }
  auto optionalId = [&](const char *key, int64_t &out) {
    if (StatusOr<int64_t> v = file.getI64(key); v.ok())
      out = *v;
  };
  optionalId("tokenizer.ggml.bos_token_id", t.bosTokenId);
  optionalId("tokenizer.ggml.eos_token_id", t.eosTokenId);
  optionalId("tokenizer.ggml.padding_token_id", t.padTokenId);
  optionalId("tokenizer.ggml.unknown_token_id", t.unkTokenId);
  if (StatusOr<bool> v = file.getBool("tokenizer.ggml.add_bos_token"); v.ok())
    t.addBos = *v;
  if (StatusOr<bool> v = file.getBool("tokenizer.ggml.add_eos_token"); v.ok())
    t.addEos = *v;
  if (StatusOr<bool> v = file.getBool("tokenizer.ggml.add_space_prefix"); v.ok())
    t.addSpacePrefix = *v;
  if (StatusOr<std::string> v = file.getString("tokenizer.chat_template"); v.ok())
    t.chatTemplate = *v;
  int64_t vocab = static_cast<int64_t>(t.tokens.size());
  for (int64_t id : {t.bosTokenId, t.eosTokenId, t.padTokenId, t.unkTokenId})
    if (id >= vocab)
      return invalidArgument(file.path() + ": special token id " + std::to_string(id) +
                             " is outside the vocabulary of " + std::to_string(vocab));
  if (!t.scores.empty() && static_cast<int64_t>(t.scores.size()) != vocab)
    return invalidArgument(file.path() + ": " + std::to_string(t.scores.size()) +
                           " token scores for " + std::to_string(vocab) + " tokens");
  if (!t.tokenAttrs.empty() && static_cast<int64_t>(t.tokenAttrs.size()) != vocab)
    return invalidArgument(file.path() + ": " + std::to_string(t.tokenAttrs.size()) +
                           " token types for " + std::to_string(vocab) + " tokens");
  model.hasTokenizer = true;
  model.config.bosTokenId = t.bosTokenId;
  if (t.eosTokenId >= 0)
    model.config.eosTokenIds.push_back(t.eosTokenId);
  return okStatus();
}

/// xxh64 of the whole file, streamed (xxh64 runs at memory speed: ~0.1 s per GB).
StatusOr<uint64_t> hashFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return ioError(path + ": cannot open for hashing");
  XXH64_state_t *state = XXH64_createState();
  XXH64_reset(state, 0);
  std::vector<char> chunk(1 << 20);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    XXH64_update(state, chunk.data(), static_cast<size_t>(in.gcount()));
  }
  uint64_t hash = XXH64_digest(state);
  XXH64_freeState(state);
  return hash;
}

} // namespace

StatusOr<schema::DType> parseWeightDtype(const std::string &name) {
  if (name == "f32")
    return schema::DType::F32;
  if (name == "bf16")
    return schema::DType::BF16;
  if (name == "f16")
    return schema::DType::F16;
  return invalidArgument("unknown weight dtype '" + name + "' (choose f32, bf16 or f16)");
}

StatusOr<ImportedModel> importGguf(const std::string &path, const GgufImportOptions &options) {
  StatusOr<GgufFile> opened = GgufFile::open(path);
  if (!opened.ok())
    return opened.status();
  auto file = std::make_shared<GgufFile>(std::move(opened).value());

  StatusOr<std::string> archName = file->getString("general.architecture");
  if (!archName.ok())
    return archName.status();
  const ArchitectureInfo *arch = nullptr;
  for (const ArchitectureInfo &a : kArchitectures)
    if (*archName == a.name)
      arch = &a;
  if (!arch)
    return invalidArgument(path + ": architecture '" + *archName +
                           "' is not supported (supported: llama, qwen2; Llama 2/3, SmolLM, "
                           "Mistral and Qwen2 checkpoints use these)");

  ImportedModel model;
  model.source = path;
  model.features.attentionBias = arch->attentionBias;
  ModelConfig &config = model.config;
  INGOT_RETURN_IF_ERROR(readConfig(*file, *archName, config));
  INGOT_RETURN_IF_ERROR(readTokenizer(*file, model));

  const GgufTensorInfo *embed = file->findTensor("token_embd.weight");
  if (!embed)
    return invalidArgument(path + ": no tensor 'token_embd.weight'");
  config.vocabSize = embed->shape().front();
  if (model.hasTokenizer && static_cast<int64_t>(model.tokenizer.tokens.size()) != config.vocabSize)
    return invalidArgument(path + ": tokenizer has " +
                           std::to_string(model.tokenizer.tokens.size()) +
                           " tokens but token_embd.weight has " +
                           std::to_string(config.vocabSize) + " rows");
  config.tieWordEmbeddings = file->findTensor("output.weight") == nullptr;
  config.computeDtype = schema::DType::F32;
  config.kvDtype = schema::DType::F32;

  for (const GgufTensorInfo &info : file->tensors()) {
    std::string hfName = huggingFaceName(info.name);
    if (hfName.empty()) {
      if (info.name == "rope_freqs.weight")
        return invalidArgument(path + ": tensor 'rope_freqs.weight' (Llama 3 long-context "
                                      "RoPE factors) is not supported yet");
      return invalidArgument(path + ": unexpected tensor '" + info.name + "' for architecture '" +
                             *archName + "'");
    }
    std::vector<int64_t> shape = info.shape();
    std::vector<int64_t> expected = expectedLlamaShape(hfName, config);
    if (!expected.empty() && shape != expected)
      return invalidArgument(path + ": tensor '" + info.name + "' has shape " + shapeText(shape) +
                             ", expected " + shapeText(expected) + " from the config");
    if (!gguf::canDequantize(info.type))
      return invalidArgument(path + ": tensor '" + info.name + "' has type " +
                             gguf::ggmlTypeName(info.type) + ", which cannot be imported yet");

    // Q and K rows go back to Hugging Face order; heads differ between Q and K (GQA).
    int32_t permuteHeads = 0;
    if (arch->permutedQk && hfName.find("q_proj.weight") != std::string::npos)
      permuteHeads = config.numHeads;
    if (arch->permutedQk && hfName.find("k_proj.weight") != std::string::npos)
      permuteHeads = config.numKvHeads;

    // Norm weights and biases stay f32: they are tiny and precision-sensitive.
    schema::DType dtype = shape.size() == 1 ? schema::DType::F32 : options.weightDtype;
    ImportedTensor tensor;
    tensor.name = hfName;
    tensor.shape = shape;
    tensor.dtype = dtype;
    const GgufTensorInfo *source = &info;
    tensor.readF32 = [file, source, permuteHeads](std::vector<float> &values) -> Status {
      values.resize(source->numElements);
      INGOT_RETURN_IF_ERROR(file->dequantizeTensor(*source, values.data()));
      file->releaseTensorPages(*source);
      if (permuteHeads > 0)
        INGOT_RETURN_IF_ERROR(unpermuteRopeRows(values, source->shape(), permuteHeads));
      return okStatus();
    };
    tensor.produce = [readF32 = tensor.readF32, dtype](const TensorByteSink &sink) -> Status {
      std::vector<float> values;
      INGOT_RETURN_IF_ERROR(readF32(values));
      return writeConverted(values, dtype, sink);
    };
    // Q4_0 / Q4_1 matrices also hand out their blocks for the exact int4 import; a row
    // is a whole number of blocks, so Q/K rows are un-permuted as block rows.
    if ((info.type == gguf::GgmlType::Q4_0 || info.type == gguf::GgmlType::Q4_1) &&
        shape.size() == 2) {
      tensor.sourceQuant =
          info.type == gguf::GgmlType::Q4_0 ? SourceQuant::GgufQ4_0 : SourceQuant::GgufQ4_1;
      tensor.readBlocks = [file, source, permuteHeads](std::vector<uint8_t> &blocks) -> Status {
        const uint8_t *data = file->tensorData(*source);
        blocks.assign(data, data + source->numBytes);
        file->releaseTensorPages(*source);
        if (permuteHeads > 0) {
          int64_t rows = source->shape()[0];
          INGOT_RETURN_IF_ERROR(unpermuteRopeRowBytes(
              blocks.data(), rows, static_cast<int64_t>(source->numBytes) / rows, permuteHeads));
        }
        return okStatus();
      };
    }
    model.add(std::move(tensor));
  }

  StatusOr<uint64_t> hash = hashFile(path);
  if (!hash.ok())
    return hash.status();
  model.sourceXxh64 = *hash;
  return model;
}

} // namespace ingot::importer
