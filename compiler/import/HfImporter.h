//===- HfImporter.h - Hugging Face directories to an ImportedModel --*- C++ -*-===//
//
// Reads a Hugging Face checkpoint directory (config.json, sharded safetensors,
// tokenizer.json, ...) of a Llama-family model (llama, mistral, qwen2) into the same
// ImportedModel the GGUF importer produces. Hugging Face order is already the rotate-half
// RoPE layout the dialect uses, so no rows move; tensors are converted to the requested
// dtype one at a time, straight from the memory-mapped shards.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

#include "compiler/import/ImportedModel.h"
#include "core/base/status.h"

namespace ingot::importer {

struct HfImportOptions {
  /// Element type of every matrix in the artifact (f32, bf16 or f16); norms and biases
  /// stay f32, as in the GGUF importer.
  schema::DType weightDtype = schema::DType::BF16;
};

/// Opens and validates `dir`; the returned model's tensor producers keep the shards mapped.
StatusOr<ImportedModel> importHuggingFace(const std::string &dir, const HfImportOptions &options);

} // namespace ingot::importer
