// Llama-shaped serving-step artifacts built with ArtifactWriter (no MLIR): for tests and benchmarks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/base/status.h"
#include "schemas/artifact_generated.h"

namespace ingot::testing {

/// A decoder-only Llama: embedding, per layer rms_norm -> q/k/v linear -> rope -> kv_write
/// -> attention -> o linear -> add, rms_norm -> gate/up linear -> silu_mul -> down -> add;
/// final rms_norm and logits. Buffers, steps, params and tensor names mirror what
/// `ingot compile` writes for examples/models/tiny_llama.mlir.
struct LlamaProgramOptions {
  int64_t vocab = 256;
  int64_t hidden = 64;
  int64_t intermediate = 128;
  int32_t layers = 2;
  int32_t heads = 4;
  int32_t kv_heads = 2;
  int32_t head_dim = 16;
  int32_t block_size = 16;
  int64_t max_context = 512;
  double rope_theta = 10000.0;
  float rms_eps = 1e-5f;
  bool tie_embeddings = true;
  /// q/k/v biases (Qwen2 style).
  bool qkv_bias = false;
  /// Element type of every weight: F32, F16 or BF16.
  schema::DType weight_dtype = schema::DType::F32;
  /// Dummy weights: no blob, the backend fills weights from `seed`. Otherwise the blob
  /// holds seeded random values (uniform, scaled by 1/sqrt(fan-in); norms near 1).
  bool dummy_weights = false;
  uint64_t seed = 1;
  /// Attention variant regions; empty mask = no masking. Default: causal.
  std::vector<uint8_t> mask_bytecode;
  std::vector<uint8_t> score_bytecode;
  bool causal = true;
  /// Layer 0's q_proj as an FP8 (f8E4M3FN) weight with a per-tensor scale, as a quantized
  /// compile would write it (for "not supported yet" tests; bytes are arbitrary).
  bool fp8_first_q_proj = false;
  /// Extra attention operands, added as program inputs 8, 9, ... (i32 tensors of the
  /// given rank, all dims dynamic).
  std::vector<int> extra_input_ranks;
};

/// Writes the artifact into memory.
StatusOr<std::vector<uint8_t>> buildLlamaArtifact(const LlamaProgramOptions& options);

}  // namespace ingot::testing
