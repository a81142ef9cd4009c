//===- ImportedModel.h - a checkpoint as the importers see it ----*- C++ -*-===//
//
// What every importer (GGUF, Hugging Face) produces and the module builder consumes:
// the model config, the tokenizer, and a table of tensors under canonical (Hugging Face)
// names whose bytes are produced on demand, one tensor at a time, straight from the
// memory-mapped checkpoint. Plain C++: no MLIR.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/artifact/artifact_contents.h"
#include "core/artifact/artifact_writer.h"

namespace ingot::importer {

/// Checkpoint block formats that an int4 group-wise scheme (f16 scales) holds exactly, so
/// `--quant int4` can take their blocks without a float round trip.
enum class SourceQuant {
  None,
  /// GGUF Q4_0: f16 scale d and 32 nibbles q per block; w = d * (q - 8).
  GgufQ4_0,
  /// GGUF Q4_1: f16 scale d, f16 min m and 32 nibbles q per block; w = d * q + m.
  GgufQ4_1,
  /// Hugging Face GPTQ (AutoGPTQ / GPTQModel, 4 bits): w = scale * (q - zero), an f16 scale
  /// and an integer zero per group of `sourceGroupSize` inputs; read through readInt4.
  Gptq,
  /// Hugging Face AWQ (AutoAWQ GEMM layout, 4 bits): the same arithmetic as Gptq.
  Awq,
};

/// A linear weight [N, K] in the artifact's int4 `ZeroKind::Zero` layout: `weight` two
/// nibbles per byte (element 2i low), `scale` and `zero` f16 [N, K / group] row-major.
struct Int4ZeroParts {
  std::vector<uint8_t> weight;
  std::vector<uint8_t> scale;
  std::vector<uint8_t> zero;
};

/// One tensor of the checkpoint, in the layout the ingot dialect expects: linear weights
/// [out, in] row-major, Q/K rows in Hugging Face (rotate-half RoPE) order.
struct ImportedTensor {
  /// Canonical name, e.g. "model.layers.3.self_attn.q_proj.weight".
  std::string name;
  /// Logical shape in elements.
  std::vector<int64_t> shape;
  /// Element type written to the artifact.
  schema::DType dtype = schema::DType::F32;
  /// Streams exactly the packed bytes of `shape` x `dtype`.
  TensorProducer produce;
  /// Reads the whole tensor as f32, in the same layout, before any conversion to `dtype`
  /// (dequantized exactly): what quantizing encoders start from. May be empty.
  std::function<Status(std::vector<float> &values)> readF32;
  /// How the checkpoint stores the tensor, when an int4 scheme can hold it exactly.
  SourceQuant sourceQuant = SourceQuant::None;
  /// For GgufQ4_0 / GgufQ4_1: the tensor's raw blocks, rows in the layout above ([N, K]
  /// as N rows of K / 32 blocks).
  std::function<Status(std::vector<uint8_t> &blocks)> readBlocks;
  /// For Gptq / Awq: inputs per group (K for a checkpoint's group_size -1).
  int64_t sourceGroupSize = 0;
  /// For Gptq / Awq: the checkpoint's integers and scales re-ordered into Int4ZeroParts,
  /// bit for bit. Fails (naming the tensor) when the groups are not contiguous runs of K
  /// (GPTQ act-order), which that layout cannot hold.
  std::function<Status(Int4ZeroParts &parts)> readInt4;
};

/// Architecture-level facts that change the graph, beyond the numbers in ModelConfig.
struct GraphFeatures {
  /// q/k/v projections carry a bias (Qwen2).
  bool attentionBias = false;
};

struct ImportedModel {
  ModelConfig config;
  GraphFeatures features;
  bool hasTokenizer = false;
  Tokenizer tokenizer;
  /// Handle = index into this table.
  std::vector<ImportedTensor> tensors;
  /// Where the checkpoint came from (for provenance) and its hash, 0 when not hashed.
  std::string source;
  uint64_t sourceXxh64 = 0;

  /// Index of the tensor named `name`, or -1.
  int32_t find(const std::string &name) const {
    auto it = index.find(name);
    return it == index.end() ? -1 : it->second;
  }
  void add(ImportedTensor tensor) {
    index[tensor.name] = static_cast<int32_t>(tensors.size());
    tensors.push_back(std::move(tensor));
  }

private:
  std::map<std::string, int32_t> index;
};

} // namespace ingot::importer
