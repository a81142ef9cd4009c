//===- HfConfigModel.h - a model from its Hugging Face config.json alone -*- C++ -*-===//
//
// `ingot compile --dummy-weights config.json` benchmarks a model at its real size with
// nothing to ship: the config says every tensor the checkpoint would hold (the names of
// llamaTensorNames(), the shapes of expectedLlamaShape()), the artifact declares them, and
// the runtime fills them with seeded random values. The input is a config file (any name),
// or a directory with config.json and no safetensors weights; generation_config.json and a
// tokenizer (tokenizer.json / tokenizer.model) beside it are read as for a checkpoint, and
// without one the artifact has no tokenizer. A quantization_config (GPTQ / AWQ) describes
// how a checkpoint stores weights there are none of: it is ignored (use --quant instead).
// Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <optional>
#include <string>

#include "compiler/import/ImportedModel.h"
#include "core/base/status.h"

namespace ingot::importer::hf {

/// True when `path` is a config-only input: a regular file holding a JSON object, or a
/// directory with a config.json but neither model.safetensors nor
/// model.safetensors.index.json (a checkpoint directory is not config-only).
bool isConfigOnlyInput(const std::string &path);

/// The weight dtype a config asks for through `torch_dtype` (transformers >= 5: `dtype`):
/// f32, bf16 or f16; nullopt when it names none. An unsupported value (float8_*, int8, ...)
/// is an error naming it, so the caller can say to pass --dtype.
StatusOr<std::optional<schema::DType>> configWeightDtype(const std::string &configText,
                                                         const std::string &where);

struct ConfigModelOptions {
  /// Element type of every matrix (norms and biases stay f32, as in importHuggingFace);
  /// unset: the config's torch_dtype, else bf16.
  std::optional<schema::DType> weightDtype;
};

/// The model `path` (see isConfigOnlyInput) describes, with every tensor's name, shape and
/// dtype but no bytes: a tensor's producers fail with a message naming it, so only an
/// artifact without weights (--dummy-weights) or with generated ones can be made from it.
/// Named after the config file's stem, or its directory for config.json.
StatusOr<ImportedModel> importConfigOnly(const std::string &path,
                                         const ConfigModelOptions &options);

} // namespace ingot::importer::hf
