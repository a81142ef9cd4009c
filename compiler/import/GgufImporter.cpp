//===- GgufImporter.cpp - GGUF checkpoints to an ImportedModel ------------===//
#include "compiler/import/GgufImporter.h"

#include <algorithm>
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
  bool qkNorm;
  /// Gemma 2/3: the attention and MLP outputs are normalized before their residual adds,
  /// GGUF's ffn_norm is the MLP's own input norm.
  bool sandwichNorms;
  /// Phi-3: attn_qkv holds q, k, v and ffn_up holds gate then up (split at import).
  bool fusedProjections;
  /// The architecture's own keys and assumed values, after the config and tokenizer are
  /// read (null: none).
  Status (*readFeatures)(const GgufFile &file, ImportedModel &model);
};
Status readGemma3(const GgufFile &file, ImportedModel &model);
Status readPhi3Window(const GgufFile &file, ImportedModel &model);
constexpr ArchitectureInfo kArchitectures[] = {
    {"llama", true, false, false, false, false, nullptr},
    {"qwen2", false, true, false, false, false, nullptr},
    {"qwen3", false, false, true, false, false, nullptr},
    {"gemma3", false, false, true, true, false, readGemma3},
    {"phi3", false, false, false, false, true, readPhi3Window},
};

/// Renames a GGUF tensor ("blk.3.attn_q.weight") to its Hugging Face name, or "".
std::string huggingFaceName(const std::string &name, const ArchitectureInfo &arch) {
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
      {"attn_q_norm.weight", "self_attn.q_norm.weight"},
      {"attn_k_norm.weight", "self_attn.k_norm.weight"},
      {"attn_output.weight", "self_attn.o_proj.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"},
  };
  // The norm after attention: the MLP's input norm (Llama) or, with sandwich norms, the
  // attention output's norm, the MLP then having norms of its own.
  static const std::pair<const char *, const char *> kPlainNorms[] = {
      {"ffn_norm.weight", "post_attention_layernorm.weight"},
  };
  static const std::pair<const char *, const char *> kSandwichNorms[] = {
      {"post_attention_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
      {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
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
  auto lookup = [&](const auto &table) -> std::string {
    for (auto [from, to] : table)
      if (rest == from)
        return "model.layers." + layer + "." + to;
    return "";
  };
  static const std::pair<const char *, const char *> kFused[] = {
      {"attn_qkv.weight", "self_attn.qkv_proj.weight"},
      {"ffn_up.weight", "mlp.gate_up_proj.weight"},
  };
  if (arch.fusedProjections)
    if (std::string fused = lookup(kFused); !fused.empty())
      return fused;
  std::string found = lookup(kLayer);
  if (found.empty())
    found = arch.sandwichNorms ? lookup(kSandwichNorms) : lookup(kPlainNorms);
  return found;
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
  // A chat model's end of turn / end of message also ends generation (as HF's
  // generation_config eos ids do).
  for (const char *key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (StatusOr<int64_t> id = file.getI64(key);
        id.ok() && *id >= 0 && *id < vocab &&
        std::find(model.config.eosTokenIds.begin(), model.config.eosTokenIds.end(), *id) ==
            model.config.eosTokenIds.end())
      model.config.eosTokenIds.push_back(*id);
  return okStatus();
}

/// Gemma 3's chat template as published with its instruction-tuned checkpoints
/// (tokenizer_config.json), for GGUF files that carry none.
constexpr const char *kGemma3ChatTemplate =
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}\n"
    "    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}\n"
    "    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    "    {%- set first_user_prefix = \"\" -%}\n"
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{ raise_exception(\"Conversation roles must alternate "
    "user/assistant/user/assistant/...\") }}\n"
    "    {%- endif -%}\n"
    "    {%- if (message['role'] == 'assistant') -%}\n"
    "        {%- set role = \"model\" -%}\n"
    "    {%- else -%}\n"
    "        {%- set role = message['role'] -%}\n"
    "    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n"
    "        {{ message['content'] | trim }}\n"
    "    {%- elif message['content'] is iterable -%}\n"
    "        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'image' -%}\n"
    "                {{ '<start_of_image>' }}\n"
    "            {%- elif item['type'] == 'text' -%}\n"
    "                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n"
    "        {%- endfor -%}\n"
    "    {%- else -%}\n"
    "        {{ raise_exception(\"Invalid content type\") }}\n"
    "    {%- endif -%}\n"
    "    {{ '<end_of_turn>\n' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{'<start_of_turn>model\n'}}\n"
    "{%- endif -%}\n";

/// Gemma 3's graph facts. GGUF files hold the window and the global RoPE base; the rest
/// is Gemma 3's published configuration (Gemma3TextConfig), recorded as assumed. Norm
/// weights need no shift: llama.cpp's converter stored them as (1 + w) already.
Status readGemma3(const GgufFile &file, ImportedModel &model) {
  const ModelConfig &c = model.config;
  GraphFeatures &f = model.features;
  f.activation = MlpActivation::GeluTanh;
  f.embeddingScale = std::sqrt(static_cast<float>(c.hiddenSize));
  for (const char *key : {"gemma3.final_logit_softcapping", "gemma3.attn_logit_softcapping"})
    if (file.has(key))
      return invalidArgument(file.path() + ": key '" + key +
                             "' (logit soft-capping) is not supported for gemma3");
  INGOT_RETURN_IF_ERROR(requireInt(file, "gemma3.attention.sliding_window", f.slidingWindow));
  // Every sixth layer is global (sliding_window_pattern 6), the others local.
  constexpr int32_t kPattern = 6;
  f.localLayers.assign(c.numLayers, true);
  std::string globals;
  for (int32_t layer = kPattern - 1; layer < c.numLayers; layer += kPattern) {
    f.localLayers[layer] = false;
    globals += (globals.empty() ? "" : ",") + std::to_string(layer);
  }
  f.assumed.push_back("layer pattern: layers " + (globals.empty() ? "(none)" : globals) +
                      " global, the others sliding-window (sliding_window_pattern = 6)");
  f.localRopeTheta = 10000.0;
  f.assumed.push_back("rope_local_base_freq = 10000 (the local layers' RoPE base)");
  // query_pre_attn_scalar is the head dimension, but for the 27B model (hidden / heads).
  const bool is27b = c.hiddenSize == 5376 && c.numHeads == 32;
  const double scalar = is27b ? double(c.hiddenSize) / c.numHeads : double(c.headDim);
  f.attentionScale = static_cast<float>(1.0 / std::sqrt(scalar));
  f.assumed.push_back("query_pre_attn_scalar = " + std::to_string(int64_t(scalar)) +
                      (is27b ? " (hidden_size / num_heads, the 27B model's)" : " (head_dim)"));
  Tokenizer &t = model.tokenizer;
  if (model.hasTokenizer && t.chatTemplate.empty()) {
    t.chatTemplate = kGemma3ChatTemplate;
    f.assumed.push_back("chat template: Gemma 3's published template");
  }
  // Instruction-tuned Gemma ends a turn with <end_of_turn> (generation_config.json).
  for (size_t id = 0; id < t.tokens.size(); ++id)
    if (t.tokens[id] == "<end_of_turn>" &&
        std::find(model.config.eosTokenIds.begin(), model.config.eosTokenIds.end(),
                  int64_t(id)) == model.config.eosTokenIds.end()) {
      model.config.eosTokenIds.push_back(int64_t(id));
      f.assumed.push_back("eos_token_ids += " + std::to_string(id) +
                          " (<end_of_turn>, from generation_config)");
    }
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

/// The tensor `info` under its canonical name: dequantized on demand (Q/K rows put back in
/// Hugging Face order for `permuteHeads` heads), Q4_0 / Q4_1 matrices also as raw blocks.
ImportedTensor ggufTensor(const std::shared_ptr<GgufFile> &file, const GgufTensorInfo &info,
                          const std::string &hfName, int32_t permuteHeads, schema::DType dtype) {
  const std::vector<int64_t> shape = info.shape();
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
  return tensor;
}

/// Phi-3 mini 4k: every layer attends within phi3.attention.sliding_window (0: Phi-4, none).
Status readPhi3Window(const GgufFile &file, ImportedModel &model) {
  if (!file.has("phi3.attention.sliding_window"))
    return okStatus();
  StatusOr<int64_t> window = file.getI64("phi3.attention.sliding_window");
  if (!window.ok())
    return window.status();
  if (*window > 0) {
    model.features.slidingWindow = static_cast<int32_t>(*window);
    model.features.localLayers.assign(model.config.numLayers, true);
  }
  return okStatus();
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
                           "' is not supported (supported: llama, qwen2, qwen3, gemma3, phi3; "
                           "Llama 2/3, SmolLM, Mistral, Qwen2/3, Gemma 3 and Phi-3 checkpoints "
                           "use these)");

  ImportedModel model;
  model.source = path;
  model.features.attentionBias = arch->attentionBias;
  model.features.qkNorm = arch->qkNorm;
  model.features.sandwichNorms = arch->sandwichNorms;
  model.features.fusedProjections = arch->fusedProjections;
  ModelConfig &config = model.config;
  INGOT_RETURN_IF_ERROR(readConfig(*file, *archName, config));
  INGOT_RETURN_IF_ERROR(readTokenizer(*file, model));
  if (arch->readFeatures)
    INGOT_RETURN_IF_ERROR(arch->readFeatures(*file, model));

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
    std::string hfName = huggingFaceName(info.name, *arch);
    if (info.name == kRopeFactorsTensor) // Llama 3's RoPE frequency factors
      hfName = kRopeFactorsTensor;
    if (info.name == "rope_factors_long.weight" || info.name == "rope_factors_short.weight")
      return invalidArgument(path + ": tensor '" + info.name + "' (longrope, Phi-3's 128k-context "
                                    "RoPE scaling) is not supported");
    if (hfName.empty())
      return invalidArgument(path + ": unexpected tensor '" + info.name + "' for architecture '" +
                             *archName + "'");
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
    ImportedTensor tensor = ggufTensor(file, info, hfName, permuteHeads, dtype);
    StatusOr<std::vector<ImportedTensor>> parts = splitFused(tensor, config);
    if (!parts.ok())
      return parts.status();
    for (ImportedTensor &part : *parts)
      model.add(std::move(part));
  }

  StatusOr<uint64_t> hash = hashFile(path);
  if (!hash.ok())
    return hash.status();
  model.sourceXxh64 = *hash;
  return model;
}

} // namespace ingot::importer
