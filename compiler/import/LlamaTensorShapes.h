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

#include "compiler/artifact/ArtifactContents.h"

namespace ingot::importer {

/// The shape `name` (a Hugging Face tensor name) must have under `config`, or an empty
/// vector for a name this table does not know.
std::vector<int64_t> expectedLlamaShape(const std::string &name, const ModelConfig &config);

/// "[576,1536]".
std::string shapeText(const std::vector<int64_t> &shape);

} // namespace ingot::importer
