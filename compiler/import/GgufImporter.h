//===- GgufImporter.h - GGUF checkpoints to an ImportedModel ------*- C++ -*-===//
//
// Reads a GGUF file (llama.cpp's format) of a Llama-family model: config and tokenizer
// from its metadata, tensors renamed to Hugging Face names, dequantized and converted to
// the requested dtype one tensor at a time while the artifact is written. llama.cpp's
// converter permutes the Q/K rows of Llama-architecture models for its interleaved RoPE;
// those rows are put back in Hugging Face (rotate-half) order here. Qwen2 is stored
// unpermuted and is left alone.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

#include "compiler/import/ImportedModel.h"
#include "core/base/status.h"

namespace ingot::importer {

struct GgufImportOptions {
  /// Element type of every weight in the artifact (f32, bf16 or f16).
  schema::DType weightDtype = schema::DType::BF16;
};

/// "f32" | "bf16" | "f16" -> DType, else a message listing the choices.
StatusOr<schema::DType> parseWeightDtype(const std::string &name);

/// Opens and validates `path`; the returned model's tensor producers keep the file mapped.
StatusOr<ImportedModel> importGguf(const std::string &path, const GgufImportOptions &options);

} // namespace ingot::importer
