//===- LlamaTensorShapes.h - expected shapes of Llama-family tensors -*- C++ -*-===//
//
// Every importer checks each tensor against the shape its config implies, so a checkpoint
// whose tensors disagree with its config fails at import with a message naming both.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/artifact/artifact_contents.h"

namespace ingot::importer {

/// The shape `name` (a Hugging Face tensor name) must have under `config`, or an empty
/// vector for a name this table does not know.
std::vector<int64_t> expectedLlamaShape(const std::string &name, const ModelConfig &config);

/// The tensor names that follow "model.layers.N." in every decoder layer of a Hugging Face
/// Llama-family checkpoint, in graph order; with `attentionBias` (Qwen2) the q/k/v biases too.
const std::vector<std::string> &llamaLayerTensorNames(bool attentionBias);

/// Every tensor a Hugging Face checkpoint of `config` holds, in graph order (embedding,
/// layers, final norm, then lm_head unless the embedding is tied): what a config-only import
/// declares, each with the shape expectedLlamaShape() gives it.
std::vector<std::string> llamaTensorNames(const ModelConfig &config, bool attentionBias);

/// "[576,1536]".
std::string shapeText(const std::vector<int64_t> &shape);

} // namespace ingot::importer
