//===- LlamaTensorShapes.cpp - expected shapes of Llama-family tensors ----===//
#include "compiler/import/LlamaTensorShapes.h"

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

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

} // namespace ingot::importer
