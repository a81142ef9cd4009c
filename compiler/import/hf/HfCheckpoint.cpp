//===- HfCheckpoint.cpp - a Hugging Face model directory, validated -------===//
#include "compiler/import/hf/HfCheckpoint.h"

#include "compiler/import/LlamaTensorShapes.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "compiler/import/hf/HfTokenizer.h"

namespace ingot::importer::hf {
namespace {

using nlohmann::json;

/// model_type values and the architecture names the module builder knows them by.
struct Architecture {
  const char *modelType;
  const char *className;
  /// The artifact's architecture name.
  const char *family;
  /// q/k/v projections always carry a bias.
  bool qkvBias;
  /// Per-head q/k RMSNorm (Qwen3, Gemma 3).
  bool qkNorm;
};
constexpr Architecture kArchitectures[] = {
    {"llama", "LlamaForCausalLM", "llama", false, false},
    {"mistral", "MistralForCausalLM", "llama", false, false},
    {"qwen2", "Qwen2ForCausalLM", "qwen2", true, false},
    {"qwen3", "Qwen3ForCausalLM", "qwen3", false, true},
    {"gemma3_text", "Gemma3ForCausalLM", "gemma3", false, true},
    {"phi3", "Phi3ForCausalLM", "phi3", false, false},
};

Status readFile(const std::string &path, std::string &text) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return notFound(path + ": cannot read");
  std::stringstream buffer;
  buffer << in.rdbuf();
  text = buffer.str();
  return okStatus();
}

StatusOr<json> readJson(const std::string &path) {
  std::string text;
  INGOT_RETURN_IF_ERROR(readFile(path, text));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return invalidArgument(path + ": not a JSON object");
  return j;
}

/// A required positive integer; the message names the key.
template <typename T>
Status requirePositive(const json &c, const char *key, const std::string &where, T &out) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null())
    return invalidArgument(where + ": missing key '" + key + "'");
  if (!it->is_number_integer() || it->get<int64_t>() <= 0)
    return invalidArgument(where + ": key '" + key + "' must be a positive integer");
  out = static_cast<T>(it->get<int64_t>());
  return okStatus();
}

/// Token ids from an int, a list of ints or null.
std::vector<int64_t> idList(const json &j) {
  std::vector<int64_t> ids;
  if (j.is_number_integer())
    ids.push_back(j.get<int64_t>());
  else if (j.is_array())
    for (const json &v : j)
      if (v.is_number_integer())
        ids.push_back(v.get<int64_t>());
  return ids;
}

double numberOr(const json &j, const char *key, double fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

Status parseRope(const json &c, const std::string &where, RopeConfig &rope) {
  // transformers >= 5 nests everything in rope_parameters; older configs use rope_theta and
  // rope_scaling at the top level.
  json params = c.value("rope_parameters", json());
  json scaling = c.value("rope_scaling", json());
  if (!params.is_object())
    params = json::object();
  rope.theta = numberOr(c, "rope_theta", numberOr(params, "rope_theta", 10000.0));
  if (!scaling.is_object())
    scaling = params;
  std::string kind = scaling.value("rope_type", scaling.value("type", std::string("default")));
  if (kind == "default") {
    rope.scaling = schema::RopeScalingKind::None;
  } else if (kind == "linear") {
    rope.scaling = schema::RopeScalingKind::Linear;
    rope.factor = numberOr(scaling, "factor", 1.0);
  } else if (kind == "llama3") {
    rope.scaling = schema::RopeScalingKind::Llama3;
    rope.factor = numberOr(scaling, "factor", 1.0);
    rope.lowFreqFactor = numberOr(scaling, "low_freq_factor", 1.0);
    rope.highFreqFactor = numberOr(scaling, "high_freq_factor", 4.0);
    rope.originalMaxPosition =
        static_cast<int64_t>(numberOr(scaling, "original_max_position_embeddings", 8192));
  } else {
    return invalidArgument(where + ": rope scaling '" + kind +
                           "' is not supported (default, linear and llama3 are" +
                           (kind == "longrope" || kind == "su"
                                ? "; longrope is Phi-3's 128k-context scaling)"
                                : ")"));
  }
  double partial =
      numberOr(c, "partial_rotary_factor", numberOr(params, "partial_rotary_factor", 1.0));
  if (partial != 1.0)
    return invalidArgument(where + ": partial rotary embeddings (partial_rotary_factor " +
                           std::to_string(partial) + ") are not supported");
  return okStatus();
}

/// Gemma 3's text model: sandwich norms stored as w (the graph multiplies by 1 + w), scaled
/// embeddings, query_pre_attn_scalar, and local (sliding-window) layers with their own
/// RoPE base, named by layer_types (or every sliding_window_pattern-th layer global).
Status parseGemma3(const json &c, const std::string &where, ModelConfig &config,
                   GraphFeatures &f) {
  for (const char *key : {"final_logit_softcapping", "attn_logit_softcapping"})
    if (auto it = c.find(key); it != c.end() && !it->is_null())
      return invalidArgument(where + ": " + key + " (logit soft-capping) is not supported");
  if (c.value("use_bidirectional_attention", false))
    return invalidArgument(where + ": use_bidirectional_attention (an encoder, EmbeddingGemma) "
                                   "is not supported");
  f.sandwichNorms = true;
  f.normWeightShift = 1.0f;
  f.embeddingScale = std::sqrt(static_cast<float>(config.hiddenSize));
  f.attentionScale =
      static_cast<float>(1.0 / std::sqrt(numberOr(c, "query_pre_attn_scalar", 256.0)));
  // transformers >= 5: rope_parameters per layer type; older: rope_theta, rope_scaling and
  // rope_local_base_freq at the top level.
  json params = c.value("rope_parameters", json());
  json global = c;
  double localTheta = numberOr(c, "rope_local_base_freq", 10000.0);
  if (params.is_object() && params.contains("full_attention")) {
    global = json{{"rope_parameters", params["full_attention"]}};
    if (params.contains("sliding_attention") && params["sliding_attention"].is_object())
      localTheta = numberOr(params["sliding_attention"], "rope_theta", localTheta);
  }
  INGOT_RETURN_IF_ERROR(parseRope(global, where, config.rope));
  f.localRopeTheta = localTheta;
  auto sw = c.find("sliding_window");
  if (sw == c.end() || !sw->is_number_integer() || sw->get<int64_t>() <= 0)
    return invalidArgument(where + ": gemma3 needs a positive integer 'sliding_window'");
  f.slidingWindow = static_cast<int32_t>(sw->get<int64_t>());
  f.localLayers.assign(config.numLayers, false);
  if (auto types = c.find("layer_types"); types != c.end() && types->is_array()) {
    if (static_cast<int64_t>(types->size()) != config.numLayers)
      return invalidArgument(where + ": layer_types has " + std::to_string(types->size()) +
                             " entries for " + std::to_string(config.numLayers) + " layers");
    for (int32_t i = 0; i < config.numLayers; ++i) {
      std::string type = (*types)[i].is_string() ? (*types)[i].get<std::string>() : "";
      if (type != "sliding_attention" && type != "full_attention")
        return invalidArgument(where + ": layer_types[" + std::to_string(i) + "] '" + type +
                               "' is neither sliding_attention nor full_attention");
      f.localLayers[i] = type == "sliding_attention";
    }
  } else {
    const int64_t pattern = static_cast<int64_t>(numberOr(c, "sliding_window_pattern", 6));
    for (int32_t i = 0; i < config.numLayers; ++i)
      f.localLayers[i] = pattern <= 0 || (i + 1) % pattern != 0;
  }
  return okStatus();
}

/// True for names the Llama graph uses (per-layer names with a valid layer index).
bool isModelTensor(const std::string &name, const ModelConfig &c, const GraphFeatures &features) {
  if (name == "model.embed_tokens.weight" || name == "model.norm.weight" ||
      name == "lm_head.weight")
    return true;
  const std::string prefix = "model.layers.";
  if (name.rfind(prefix, 0) != 0)
    return false;
  size_t dot = name.find('.', prefix.size());
  std::string layer = name.substr(prefix.size(), dot - prefix.size());
  if (dot == std::string::npos || layer.empty() ||
      layer.find_first_not_of("0123456789") != std::string::npos || layer.size() > 6 ||
      std::stoi(layer) >= c.numLayers)
    return false;
  std::string rest = name.substr(dot + 1);
  // Phi-3 stores q/k/v and gate/up fused; the importer splits them.
  if (features.fusedProjections) {
    if (rest == "self_attn.qkv_proj.weight" || rest == "mlp.gate_up_proj.weight")
      return true;
    for (const char *split : {"self_attn.q_proj.weight", "self_attn.k_proj.weight",
                              "self_attn.v_proj.weight", "mlp.gate_proj.weight",
                              "mlp.up_proj.weight"})
      if (rest == split)
        return false;
  }
  const std::vector<std::string> names = llamaLayerTensorNames(features);
  return std::find(names.begin(), names.end(), rest) != names.end();
}


/// Splits "<prefix>.qweight" (qzeros, scales, g_idx) into "<prefix>.weight" and the part.
bool packedPart(const std::string &name, std::string &linear, std::string &part) {
  for (const char *suffix : {"qweight", "qzeros", "scales", "g_idx"}) {
    const std::string tail = std::string(".") + suffix;
    if (name.size() > tail.size() &&
        name.compare(name.size() - tail.size(), tail.size(), tail) == 0) {
      linear = name.substr(0, name.size() - tail.size()) + ".weight";
      part = suffix;
      return true;
    }
  }
  return false;
}

std::string baseName(const std::string &path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/')
    p.pop_back();
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

/// Opens the shards: model.safetensors.index.json's, or the single model.safetensors.
Status openShards(const std::string &dir,
                  std::vector<std::shared_ptr<const SafetensorsFile>> &shards,
                  std::map<std::string, std::pair<int, const SafetensorsTensor *>> &byName) {
  std::string indexPath = dir + "/model.safetensors.index.json";
  std::vector<std::string> files;
  std::map<std::string, std::string> weightMap;
  if (std::ifstream(indexPath)) {
    StatusOr<json> index = readJson(indexPath);
    if (!index.ok())
      return index.status();
    auto map = index->find("weight_map");
    if (map == index->end() || !map->is_object())
      return invalidArgument(indexPath + ": no 'weight_map' object");
    for (auto it = map->begin(); it != map->end(); ++it) {
      if (!it.value().is_string())
        return invalidArgument(indexPath + ": tensor '" + it.key() + "' maps to no file name");
      std::string file = it.value().get<std::string>();
      if (file.find('/') != std::string::npos || file == ".." || file.empty())
        return invalidArgument(indexPath + ": shard name '" + file + "' is not a plain file name");
      weightMap[it.key()] = file;
      if (std::find(files.begin(), files.end(), file) == files.end())
        files.push_back(file);
    }
    std::sort(files.begin(), files.end());
  } else if (std::ifstream(dir + "/model.safetensors")) {
    files.push_back("model.safetensors");
  } else {
    return notFound(dir + ": no model.safetensors or model.safetensors.index.json");
  }
  for (const std::string &file : files) {
    StatusOr<SafetensorsFile> shard = SafetensorsFile::open(dir + "/" + file);
    if (!shard.ok())
      return shard.status();
    shards.push_back(std::make_shared<const SafetensorsFile>(std::move(shard).value()));
    int index = static_cast<int>(shards.size()) - 1;
    for (const SafetensorsTensor &t : shards.back()->tensors()) {
      if (!weightMap.empty()) {
        auto it = weightMap.find(t.name);
        if (it == weightMap.end() || it->second != file)
          continue; // the index places it elsewhere (or nowhere): not this shard's
      }
      if (!byName.emplace(t.name, std::make_pair(index, &t)).second)
        return invalidArgument(dir + "/" + file + ": tensor '" + t.name +
                               "' appears in more than one shard");
    }
  }
  for (const auto &[name, file] : weightMap)
    if (!byName.count(name))
      return invalidArgument(indexPath + ": tensor '" + name + "' is not in its shard '" + file +
                             "'");
  return okStatus();
}

} // namespace

static Status parseHfConfigUnchecked(const std::string &text, const std::string &where,
                                     ModelConfig &config, GraphFeatures &features) {
  json c = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (c.is_discarded() || !c.is_object())
    return invalidArgument(where + ": not a JSON object");
  std::string modelType = c.value("model_type", std::string());
  std::string className;
  if (auto a = c.find("architectures");
      a != c.end() && a->is_array() && !a->empty() && a->front().is_string())
    className = a->front().get<std::string>();
  const Architecture *arch = nullptr;
  for (const Architecture &a : kArchitectures)
    if (modelType == a.modelType || (modelType.empty() && className == a.className))
      arch = &a;
  if (!arch && modelType == "gemma3")
    return invalidArgument(where + ": Gemma 3 with its vision tower (model_type 'gemma3', "
                                   "Gemma3ForConditionalGeneration) is multimodal, which is "
                                   "not supported; its text model (gemma3_text) is");
  if (!arch)
    return invalidArgument(where + ": architecture '" +
                           (className.empty() ? std::string("?") : className) + "' (model_type '" +
                           modelType + "') is not supported (supported: llama, mistral, qwen2, "
                           "qwen3, gemma3_text, phi3)");
  config.architecture = arch->family;
  features.attentionBias = arch->qkvBias;
  features.qkNorm = arch->qkNorm;
  const bool gemma3 = config.architecture == "gemma3";
  const bool phi3 = config.architecture == "phi3";
  features.fusedProjections = phi3;
  if (!arch->qkvBias && c.value("attention_bias", false))
    return invalidArgument(where +
                           ": attention_bias (biases on q/k/v and o_proj) is not "
                           "supported for '" +
                           modelType + "'");
  if (c.value("mlp_bias", false))
    return invalidArgument(where + ": mlp_bias is not supported");
  // Gemma names it hidden_activation; its gelu_pytorch_tanh is the tanh approximation.
  std::string act = c.value("hidden_act", std::string("silu"));
  if (auto a = c.find("hidden_activation"); a != c.end() && a->is_string())
    act = a->get<std::string>();
  if (act == "gelu_pytorch_tanh" && gemma3)
    features.activation = MlpActivation::GeluTanh;
  else if (act != "silu")
    return invalidArgument(where + ": hidden_act '" + act + "' is not supported (silu is" +
                           (gemma3 ? ", and gelu_pytorch_tanh for gemma3)" : ")"));
  const bool qwen = modelType == "qwen2" || modelType == "qwen3";
  if (auto sw = c.find("sliding_window"); !gemma3 && !phi3 && sw != c.end() &&
                                          sw->is_number_integer() &&
                                          c.value("use_sliding_window", !qwen))
    return invalidArgument(where + ": sliding-window attention (sliding_window " +
                           std::to_string(sw->get<int64_t>()) + ") is not supported for '" +
                           modelType + "' yet");

  INGOT_RETURN_IF_ERROR(requirePositive(c, "vocab_size", where, config.vocabSize));
  INGOT_RETURN_IF_ERROR(requirePositive(c, "hidden_size", where, config.hiddenSize));
  INGOT_RETURN_IF_ERROR(requirePositive(c, "intermediate_size", where, config.intermediateSize));
  INGOT_RETURN_IF_ERROR(requirePositive(c, "num_hidden_layers", where, config.numLayers));
  INGOT_RETURN_IF_ERROR(requirePositive(c, "num_attention_heads", where, config.numHeads));
  INGOT_RETURN_IF_ERROR(requirePositive(c, "max_position_embeddings", where, config.maxContext));
  config.numKvHeads = config.numHeads;
  if (c.contains("num_key_value_heads") && !c["num_key_value_heads"].is_null())
    INGOT_RETURN_IF_ERROR(requirePositive(c, "num_key_value_heads", where, config.numKvHeads));
  if (config.numHeads % config.numKvHeads != 0)
    return invalidArgument(where + ": num_attention_heads " + std::to_string(config.numHeads) +
                           " is not a multiple of num_key_value_heads " +
                           std::to_string(config.numKvHeads));
  if (c.contains("head_dim") && !c["head_dim"].is_null()) {
    INGOT_RETURN_IF_ERROR(requirePositive(c, "head_dim", where, config.headDim));
  } else {
    if (config.hiddenSize % config.numHeads != 0)
      return invalidArgument(where + ": hidden_size " + std::to_string(config.hiddenSize) +
                             " is not a multiple of num_attention_heads " +
                             std::to_string(config.numHeads));
    config.headDim = static_cast<int32_t>(config.hiddenSize / config.numHeads);
  }
  auto eps = c.find("rms_norm_eps");
  if (eps == c.end() || !eps->is_number())
    return invalidArgument(where + ": missing key 'rms_norm_eps'");
  config.rmsNormEps = eps->get<float>();
  if (gemma3) {
    INGOT_RETURN_IF_ERROR(parseGemma3(c, where, config, features));
  } else {
    INGOT_RETURN_IF_ERROR(parseRope(c, where, config.rope));
  }
  // Phi-3 (mini 4k) attends within sliding_window keys on every layer.
  if (auto sw = c.find("sliding_window"); phi3 && sw != c.end() && sw->is_number_integer()) {
    if (sw->get<int64_t>() <= 0)
      return invalidArgument(where + ": sliding_window must be positive");
    features.slidingWindow = static_cast<int32_t>(sw->get<int64_t>());
    features.localLayers.assign(config.numLayers, true);
  }
  config.tieWordEmbeddings = c.value("tie_word_embeddings", gemma3);
  std::vector<int64_t> bos = idList(c.value("bos_token_id", json()));
  config.bosTokenId = bos.empty() ? -1 : bos.front();
  config.eosTokenIds = idList(c.value("eos_token_id", json()));
  config.computeDtype = schema::DType::F32;
  config.kvDtype = schema::DType::F32;
  return okStatus();
}

static Status readHfModelFilesUnchecked(const std::string &directory,
                                        const std::string &configPath, HfCheckpoint &ckpt,
                                        std::string &text) {
  ckpt.directory = directory;
  ModelConfig &config = ckpt.config;
  INGOT_RETURN_IF_ERROR(readFile(configPath, text));
  INGOT_RETURN_IF_ERROR(parseHfConfig(text, configPath, config, ckpt.features));
  config.name = baseName(directory);

  // generation_config.json's eos ids (a chat model's end-of-turn) join config.json's.
  std::string generationPath = directory + "/generation_config.json";
  if (std::ifstream(generationPath)) {
    StatusOr<json> generation = readJson(generationPath);
    if (!generation.ok())
      return generation.status();
    for (int64_t id : idList(generation->value("eos_token_id", json())))
      if (std::find(config.eosTokenIds.begin(), config.eosTokenIds.end(), id) ==
          config.eosTokenIds.end())
        config.eosTokenIds.push_back(id);
  }

  INGOT_RETURN_IF_ERROR(readHfTokenizer(directory, ckpt.tokenizer, ckpt.hasTokenizer));
  if (ckpt.hasTokenizer) {
    Tokenizer &t = ckpt.tokenizer;
    int64_t tokens = static_cast<int64_t>(t.tokens.size());
    if (tokens > config.vocabSize)
      return invalidArgument(directory + ": tokenizer.json has " + std::to_string(tokens) +
                             " tokens but vocab_size is " + std::to_string(config.vocabSize));
    // Embedding rows past the tokenizer (padding for alignment) become unused tokens.
    for (int64_t i = tokens; i < config.vocabSize; ++i) {
      t.tokens.push_back("[PAD" + std::to_string(i) + "]");
      t.tokenAttrs.push_back(schema::TokenAttr::Control);
      if (!t.scores.empty())
        t.scores.push_back(-1e9f);
    }
    if (t.bosTokenId < 0)
      t.bosTokenId = config.bosTokenId;
    if (t.eosTokenId < 0 && !config.eosTokenIds.empty())
      t.eosTokenId = config.eosTokenIds.front();
    if (config.bosTokenId < 0)
      config.bosTokenId = t.bosTokenId;
    if (t.eosTokenId >= 0 && std::find(config.eosTokenIds.begin(), config.eosTokenIds.end(),
                                       t.eosTokenId) == config.eosTokenIds.end())
      config.eosTokenIds.push_back(t.eosTokenId);
  }
  for (int64_t id : config.eosTokenIds)
    if (id < 0 || id >= config.vocabSize)
      return invalidArgument(directory + ": eos token id " + std::to_string(id) +
                             " is outside the vocabulary of " + std::to_string(config.vocabSize));

  return okStatus();
}

static StatusOr<HfCheckpoint> readHfCheckpointUnchecked(const std::string &directory) {
  HfCheckpoint ckpt;
  ModelConfig &config = ckpt.config;
  const std::string configPath = directory + "/config.json";
  std::string text;
  INGOT_RETURN_IF_ERROR(readHfModelFilesUnchecked(directory, configPath, ckpt, text));

  std::vector<std::shared_ptr<const SafetensorsFile>> shards;
  std::map<std::string, std::pair<int, const SafetensorsTensor *>> byName;
  INGOT_RETURN_IF_ERROR(openShards(directory, shards, byName));

  INGOT_RETURN_IF_ERROR(
      parsePackedQuantConfig(text, configPath, ckpt.packed, ckpt.packedConfig));
  std::map<std::string, PackedLinear> packed; // by weight name

  std::vector<HfTensorRef> refs;
  for (const auto &[name, where] : byName) {
    if (name.size() > 9 && name.compare(name.size() - 9, 9, ".inv_freq") == 0)
      continue; // a RoPE cache some older checkpoints saved; recomputed from the config
    if (std::string linear, part; packedPart(name, linear, part)) {
      if (linear.find("qkv_proj") != std::string::npos ||
          linear.find("gate_up_proj") != std::string::npos)
        return invalidArgument(shards[where.first]->path() + ": '" + linear +
                               "' is a fused projection (Phi-3) stored packed (GPTQ/AWQ), which "
                               "is not supported; a float checkpoint or a GGUF is");
      if (!isModelTensor(linear, config, ckpt.features) ||
          expectedLlamaShape(linear, config).size() != 2)
        return invalidArgument(shards[where.first]->path() + ": unexpected tensor '" + name +
                               "' for architecture '" + config.architecture + "'");
      if (!ckpt.packed)
        return invalidArgument(shards[where.first]->path() + ": tensor '" + name +
                               "' is a GPTQ/AWQ packed weight, but " + configPath +
                               " has no quantization_config");
      PackedLinear &layer = packed[linear];
      layer.name = linear;
      PackedLinear::Part ref{shards[where.first], where.second};
      (part == "qweight" ? layer.qweight
       : part == "qzeros" ? layer.qzeros
       : part == "scales" ? layer.scales
                          : layer.gIdx) = ref;
      continue;
    }
    if (name == "lm_head.weight" && config.tieWordEmbeddings)
      continue; // a copy of the tied embedding
    if (!isModelTensor(name, config, ckpt.features))
      return invalidArgument(shards[where.first]->path() + ": unexpected tensor '" + name +
                             "' for architecture '" + config.architecture + "'");
    const SafetensorsTensor &t = *where.second;
    std::vector<int64_t> expected = expectedLlamaShape(name, config);
    if (t.shape != expected)
      return invalidArgument(shards[where.first]->path() + ": tensor '" + name + "' has shape " +
                             shapeText(t.shape) + ", expected " + shapeText(expected) +
                             " from config.json");
    if (t.dtype == SafetensorsDtype::I32)
      return invalidArgument(shards[where.first]->path() + ": tensor '" + name +
                             "' has dtype I32, which only GPTQ/AWQ packed tensors may have");
    refs.push_back(HfTensorRef{shards[where.first], &t});
  }
  for (auto &[name, layer] : packed) {
    if (byName.count(name))
      return invalidArgument(directory + ": layer '" + name +
                             "' is stored both as a float weight and packed (qweight)");
    std::vector<int64_t> shape = expectedLlamaShape(name, config);
    layer.n = shape[0];
    layer.k = shape[1];
    layer.config = ckpt.packedConfig;
    INGOT_RETURN_IF_ERROR(validatePackedLinear(layer).withPrefix(directory));
    ckpt.packedLinears.push_back(std::move(layer));
  }
  if (!byName.count("lm_head.weight") && !packed.count("lm_head.weight") &&
      !config.tieWordEmbeddings)
    return invalidArgument(directory + ": no tensor 'lm_head.weight' and tie_word_embeddings "
                                       "is false");
  std::stable_sort(refs.begin(), refs.end(), [&](const HfTensorRef &a, const HfTensorRef &b) {
    if (a.shard != b.shard)
      return a.shard->path() < b.shard->path();
    return a.tensor->fileOffset < b.tensor->fileOffset;
  });
  ckpt.tensors = std::move(refs);
  return ckpt;
}

Status parseHfConfig(const std::string &text, const std::string &where, ModelConfig &config,
                     GraphFeatures &features) {
  // nlohmann::json throws on a value of an unexpected type: report it as a bad file.
  try {
    return parseHfConfigUnchecked(text, where, config, features);
  } catch (const nlohmann::json::exception &e) {
    return invalidArgument(where + ": " + e.what());
  }
}

Status readHfModelFiles(const std::string &directory, const std::string &configPath,
                        HfCheckpoint &ckpt, std::string &configText) {
  try {
    return readHfModelFilesUnchecked(directory, configPath, ckpt, configText);
  } catch (const nlohmann::json::exception &e) {
    return invalidArgument(configPath + ": " + e.what());
  }
}

StatusOr<HfCheckpoint> readHfCheckpoint(const std::string &directory) {
  try {
    return readHfCheckpointUnchecked(directory);
  } catch (const nlohmann::json::exception &e) {
    return invalidArgument(directory + ": " + e.what());
  }
}

} // namespace ingot::importer::hf
