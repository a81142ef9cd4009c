//===- LlamaTensorShapes.cpp - expected shapes of Llama-family tensors ----===//
#include "compiler/import/LlamaTensorShapes.h"


namespace ingot::importer {

std::vector<int64_t> expectedLlamaShape(const std::string &name, const ModelConfig &c) {
  const int64_t q = int64_t(c.numHeads) * c.headDim, kv = int64_t(c.numKvHeads) * c.headDim;
  auto ends = [&](const char *suffix) { return hasSuffix(name, suffix); };
  if (name == "model.embed_tokens.weight" || name == "lm_head.weight")
    return {c.vocabSize, c.hiddenSize};
  if (name == kRopeFactorsTensor)
    return {c.headDim / 2};
  if (ends("q_norm.weight") || ends("k_norm.weight"))
    return {c.headDim};
  if (ends("norm.weight") || ends("layernorm.weight"))
    return {c.hiddenSize};
  if (ends("qkv_proj.weight")) // Phi-3's fused q, k, v
    return {q + 2 * kv, c.hiddenSize};
  if (ends("gate_up_proj.weight")) // Phi-3's fused gate, up
    return {2 * c.intermediateSize, c.hiddenSize};
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

std::vector<std::string> llamaLayerTensorNames(const GraphFeatures &features) {
  std::vector<std::string> names = {"input_layernorm.weight"};
  for (const char *proj : {"q_proj", "k_proj", "v_proj"}) {
    names.push_back(std::string("self_attn.") + proj + ".weight");
    // Each bias right after its weight, as Qwen2 checkpoints list them.
    if (features.attentionBias)
      names.push_back(std::string("self_attn.") + proj + ".bias");
  }
  if (features.qkNorm) {
    names.push_back("self_attn.q_norm.weight");
    names.push_back("self_attn.k_norm.weight");
  }
  names.push_back("self_attn.o_proj.weight");
  names.push_back("post_attention_layernorm.weight");
  if (features.sandwichNorms) {
    names.push_back("pre_feedforward_layernorm.weight");
    names.push_back("post_feedforward_layernorm.weight");
  }
  for (const char *proj : {"mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"})
    names.push_back(proj);
  return names;
}

std::vector<std::string> llamaTensorNames(const ModelConfig &config,
                                          const GraphFeatures &features) {
  std::vector<std::string> names = {"model.embed_tokens.weight"};
  const std::vector<std::string> layer = llamaLayerTensorNames(features);
  for (int32_t i = 0; i < config.numLayers; ++i)
    for (const std::string &tensor : layer)
      names.push_back("model.layers." + std::to_string(i) + "." + tensor);
  names.push_back("model.norm.weight");
  if (!config.tieWordEmbeddings)
    names.push_back("lm_head.weight");
  return names;
}

bool hasSuffix(const std::string &name, const std::string &suffix) {
  return name.size() >= suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

} // namespace ingot::importer
