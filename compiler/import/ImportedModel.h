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

/// The canonical name of a Llama 3 GGUF's RoPE frequency factors ([head_dim / 2] f32, each
/// dividing one frequency); Hugging Face checkpoints give rope_scaling instead.
inline constexpr const char *kRopeFactorsTensor = "rope_freqs.weight";

/// The gated MLP's activation of its gate.
enum class MlpActivation { Silu, GeluTanh };

/// Architecture-level facts that change the graph, beyond the numbers in ModelConfig.
struct GraphFeatures {
  /// q/k/v projections carry a bias (Qwen2).
  bool attentionBias = false;
  /// Queries and keys are RMS-normalized per head before RoPE (Qwen3, Gemma 3):
  /// self_attn.q_norm / k_norm, [head_dim] each.
  bool qkNorm = false;
  /// Each branch's output is normalized before its residual add, and the MLP has its own
  /// input norm (Gemma 2/3): post_attention_layernorm then acts on the attention output,
  /// pre_feedforward_layernorm and post_feedforward_layernorm wrap the MLP.
  bool sandwichNorms = false;
  MlpActivation activation = MlpActivation::Silu;
  /// Added to every *norm.weight at import: Hugging Face Gemma stores w for a norm that
  /// multiplies by (1 + w); llama.cpp's GGUF converter stored 1 + w already.
  float normWeightShift = 0.0f;
  /// Embeddings multiplied by this before the first layer (Gemma: sqrt(hidden)); 0: none.
  float embeddingScale = 0.0f;
  /// Softmax scale of the attention scores; 0: 1 / sqrt(head_dim). Gemma 3 uses
  /// query_pre_attn_scalar^-1/2.
  float attentionScale = 0.0f;
  /// Local layers attend to the last `slidingWindow` keys (their own included); 0: no
  /// local layers. `localLayers[i]` says whether layer i is one, with `localRopeTheta` its
  /// RoPE base (0: the global base).
  int32_t slidingWindow = 0;
  std::vector<bool> localLayers;
  double localRopeTheta = 0.0;
  /// Phi-3: q/k/v stored as one self_attn.qkv_proj and gate/up as one mlp.gate_up_proj
  /// (gate rows first); the importers split them into the Llama names (splitFusedRows).
  bool fusedProjections = false;
  /// Values the checkpoint does not hold, taken from the architecture's published
  /// configuration ("key = value (why)"); the artifact's provenance keeps them.
  std::vector<std::string> assumed;
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
