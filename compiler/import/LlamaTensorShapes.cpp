//===- LlamaTensorShapes.cpp - expected shapes of Llama-family tensors ----===//
#include "compiler/import/LlamaTensorShapes.h"

#include <algorithm>
#include <cstring>

namespace ingot::importer {

std::vector<int64_t> expectedLlamaShape(const std::string &name, const ModelConfig &c) {
  const int64_t q = int64_t(c.numHeads) * c.headDim, kv = int64_t(c.numKvHeads) * c.headDim;
  auto ends = [&](const char *suffix) {
    size_t n = std::strlen(suffix);
    return name.size() >= n && name.compare(name.size() - n, n, suffix) == 0;
  };
  if (name == "model.embed_tokens.weight" || name == "lm_head.weight")
    return {c.vocabSize, c.hiddenSize};
  if (ends("norm.weight") || ends("layernorm.weight"))
    return {c.hiddenSize};
  if (ends("q_proj.weight"))
    return {q, c.hiddenSize};
  if (ends("k_proj.weight") || ends("v_proj.weight"))
    return {kv, c.hiddenSize};
  if (ends("q_proj.bias"))
    return {q};
  if (ends("k_proj.bias") || ends("v_proj.bias"))
    return {kv};
  if (ends("o_proj.weight"))
    return {c.hiddenSize, q};
  if (ends("gate_proj.weight") || ends("up_proj.weight"))
    return {c.intermediateSize, c.hiddenSize};
  if (ends("down_proj.weight"))
    return {c.hiddenSize, c.intermediateSize};
  return {};
}

const std::vector<std::string> &llamaLayerTensorNames(bool attentionBias) {
  static const std::vector<std::string> plain = {
      "input_layernorm.weight",          "self_attn.q_proj.weight", "self_attn.k_proj.weight",
      "self_attn.v_proj.weight",         "self_attn.o_proj.weight",
      "post_attention_layernorm.weight", "mlp.gate_proj.weight",    "mlp.up_proj.weight",
      "mlp.down_proj.weight"};
  static const std::vector<std::string> biased = [] {
    std::vector<std::string> names = plain;
    // Each bias right after its weight, as Qwen2 checkpoints list them.
    for (const char *proj : {"q_proj", "k_proj", "v_proj"}) {
      std::string weight = std::string("self_attn.") + proj + ".weight";
      auto at = std::find(names.begin(), names.end(), weight);
      names.insert(at + 1, std::string("self_attn.") + proj + ".bias");
    }
    return names;
  }();
  return attentionBias ? biased : plain;
}

std::vector<std::string> llamaTensorNames(const ModelConfig &config, bool attentionBias) {
  std::vector<std::string> names = {"model.embed_tokens.weight"};
  for (int32_t layer = 0; layer < config.numLayers; ++layer)
    for (const std::string &tensor : llamaLayerTensorNames(attentionBias))
      names.push_back("model.layers." + std::to_string(layer) + "." + tensor);
  names.push_back("model.norm.weight");
  if (!config.tieWordEmbeddings)
    names.push_back("lm_head.weight");
  return names;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

} // namespace ingot::importer
