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

#include "compiler/import/ImportedModel.h"
#include "core/artifact/artifact_contents.h"

namespace ingot::importer {

/// The shape `name` (a Hugging Face tensor name) must have under `config`, or an empty
/// vector for a name this table does not know.
std::vector<int64_t> expectedLlamaShape(const std::string &name, const ModelConfig &config);

/// The tensor names that follow "model.layers.N." in every decoder layer of a Hugging Face
/// Llama-family checkpoint, in graph order, with the tensors `features` add: the q/k/v
/// biases (Qwen2), the q/k norms (Qwen3, Gemma 3), the MLP's own norms (Gemma 3).
std::vector<std::string> llamaLayerTensorNames(const GraphFeatures &features);

/// Every tensor a Hugging Face checkpoint of `config` holds, in graph order (embedding,
/// layers, final norm, then lm_head unless the embedding is tied): what a config-only import
/// declares, each with the shape expectedLlamaShape() gives it.
std::vector<std::string> llamaTensorNames(const ModelConfig &config,
                                          const GraphFeatures &features);

/// Whether `name` ends with `suffix` ("model.layers.0.self_attn.q_norm.weight", "norm.weight").
bool hasSuffix(const std::string &name, const std::string &suffix);

/// "[576,1536]".
std::string shapeText(const std::vector<int64_t> &shape);

} // namespace ingot::importer
