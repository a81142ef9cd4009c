//===- HfCheckpoint.h - a Hugging Face model directory, validated ---*- C++ -*-===//
//
// Reads what a Hugging Face checkpoint directory says about a Llama-family model:
// config.json (llama, mistral, qwen2), generation_config.json (extra eos ids), the
// tokenizer (HfTokenizer.h), and the weights: model.safetensors, or the shards that
// model.safetensors.index.json names (every indexed tensor must be in its shard), and the
// packed int4 layers of GPTQ / AWQ checkpoints (PackedInt4Linear.h). The
// shards stay memory-mapped; tensor bytes are read later, one tensor at a time.
// Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/import/ImportedModel.h"
#include "compiler/import/hf/PackedInt4Linear.h"
#include "compiler/import/hf/SafetensorsFile.h"
#include "core/base/status.h"

namespace ingot::importer::hf {

/// One weight of the checkpoint and where its bytes are.
struct HfTensorRef {
  std::shared_ptr<const SafetensorsFile> shard;
  const SafetensorsTensor *tensor = nullptr;
};

struct HfCheckpoint {
  std::string directory;
  ModelConfig config;
  GraphFeatures features;
  bool hasTokenizer = false;
  Tokenizer tokenizer;
  /// The model's weights under Hugging Face names, in shard then offset order. Tensors the
  /// graph does not use (rotary inv_freq buffers, a tied lm_head copy) are left out.
  std::vector<HfTensorRef> tensors;
  /// GPTQ / AWQ checkpoints (config.json's quantization_config): the layers stored packed
  /// (qweight, qzeros, scales, g_idx) instead of as `<prefix>.weight`, validated, in name
  /// order. A layer is either here or in `tensors`, never both.
  bool packed = false;
  PackedQuantConfig packedConfig;
  std::vector<PackedLinear> packedLinears;
};

/// Parses config.json's text. `where` prefixes error messages (the file's path).
Status parseHfConfig(const std::string &text, const std::string &where, ModelConfig &config,
                     GraphFeatures &features);

/// Reads what a model directory says besides its weights: the config at `configPath`
/// (`directory`/config.json for a checkpoint), then generation_config.json and the tokenizer
/// (tokenizer.json / tokenizer.model) in `directory` where present. Fills `ckpt`'s directory,
/// config (named after `directory`), features and tokenizer, and `configText` with the
/// config's text; leaves its tensors empty.
Status readHfModelFiles(const std::string &directory, const std::string &configPath,
                        HfCheckpoint &ckpt, std::string &configText);

/// Opens and validates the directory: config, tokenizer, shards, tensor names and shapes.
StatusOr<HfCheckpoint> readHfCheckpoint(const std::string &directory);

} // namespace ingot::importer::hf
