// Llama-shaped serving-step artifacts built with ArtifactWriter (no MLIR): for tests and benchmarks.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/artifact/artifact_reader.h"
#include "core/artifact/launch_grid.h"
#include "core/base/status.h"
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
  /// Not 1: a scale step by this after the embedding (Gemma's scaled embeddings).
  float embedding_scale = 1.0f;
  bool tie_embeddings = true;
  /// q/k/v biases (Qwen2 style).
  bool qkv_bias = false;
  /// A per-head rms_norm of q and of k before rope (Qwen3 / Gemma 3 style): weights of
  /// head_dim elements, each normalizing every head_dim-wide group of its row.
  bool qk_norm = false;
  /// Element type of every weight: F32, F16 or BF16.
  schema::DType weight_dtype = schema::DType::F32;
  /// The kv_cache buffer's dtype (F8E4M3FN: an artifact compiled with an fp8 KV cache).
  schema::DType kv_dtype = schema::DType::F32;
  /// Dummy weights: no blob, the backend fills weights from `seed`. Otherwise the blob
  /// holds seeded random values (uniform, scaled by 1/sqrt(fan-in); norms near 1).
  bool dummy_weights = false;
  uint64_t seed = 1;
  /// Attention variant regions; empty mask = no masking. Default: causal.
  std::vector<uint8_t> mask_bytecode;
  std::vector<uint8_t> score_bytecode;
  bool causal = true;
  /// Layer 0's q_proj as an FP8 (f8E4M3FN) weight with a per-tensor scale, as a quantized
  /// compile would write it (every code 1.0, scale 1).
  bool fp8_first_q_proj = false;
  /// Extra attention operands, added as program inputs 8, 9, ... (i32 tensors of the
  /// given rank, all dims dynamic).
  std::vector<int> extra_input_ranks;
  /// Names of the extra inputs (default "extra0", "extra1", ...); the engine recognizes
  /// "tree_start" and "tree_bits".
  std::vector<std::string> extra_input_names;
  /// > 0: also programs[1], the early-exit draft of this many layers (self-speculation).
  int32_t draft_layers = 0;
  /// Every q/k/v/o and gate/up/down weight quantized with this scheme, as a quantized
  /// compile writes it: the codes, then "<name>.scale" and "<name>.zero" (Int4Group) or
  /// "<name>.global_scale" (Nvfp4), listed after the matrix and bias among the step's
  /// weights. Blob values: random codes with scales that keep the weights about as large
  /// as the dense ones. Embeddings, norms, biases and the head keep weight_dtype.
  schema::QuantKind linear_quant = schema::QuantKind::None;
  /// Int4Group: the group size, the offset kind and the scale/zero dtype (F16, BF16, F32).
  uint32_t quant_group = 32;
  schema::ZeroKind quant_zero_kind = schema::ZeroKind::Min;
  schema::DType quant_scale_dtype = schema::DType::F16;
  /// With linear_quant: write those weights as f32 holding their dequantized values (the
  /// same random draws, so every other tensor is the same too): the quantized model's
  /// dense twin.
  bool dequantized_linears = false;
  /// The ops `ingot compile` fuses (ingot-fuse-elementwise) as one step each: a residual add
  /// and the rms_norm right after it (add_rms_norm), a layer's two ropes and its kv_write
  /// (rope_kv_write), an MLP's gate and up linears and their silu_mul (gated_linear);
  /// false: the unfused ops.
  bool fuse_elementwise = false;
  /// > 1: shard the model over this many tensor-parallel ranks as `ingot compile --tp`
  /// does (docs/tensor-parallel.md): one program per rank, sharded tensors per rank. The
  /// full weights are drawn exactly as for tp = 1, so both artifacts hold the same model.
  /// f32 weights with a blob only, without biases, quantization, drafts or extra inputs
  /// (fake_cuda_kernels works with it).
  int32_t tp = 1;
  /// Kernels for the fake libcuda (testing/cuda/fake_libcuda.h): every f32 fused
  /// kernel (with an fp8 kv_dtype also the fp8 KV write, and fp8 decode kernels) and a
  /// decode and combine kernel, each a text "cubin" for sm_90 naming its
  /// entry point, linked as a compiled artifact's are. For CPU tests of the CUDA backend.
  bool fake_cuda_kernels = false;
  /// With fake_cuda_kernels: also the quantized prefill GEMMs (ingot_quant_gemm_*); false
  /// gives an artifact like those compiled before the GEMMs existed (GEMVs only).
  bool fake_quant_gemm_kernels = true;
  /// With fake_cuda_kernels: also the W8A8 quantizing producers (ingot_fp8_rms_norm_quant,
  /// ingot_fp8_silu_mul_quant); false gives an artifact compiled before them.
  bool fake_fp8_producer_kernels = false;
  /// With fake_cuda_kernels and an embedding_scale: also the scale kernel (false: an
  /// artifact whose scale step has no kernel).
  bool fake_scale_kernel = true;
  /// With fake_cuda_kernels: the entry-point parameter sizes recorded for these kernels
  /// (KernelDef.param_bytes, which every launch is checked against); the others record none.
  std::map<std::string, std::vector<uint32_t>> fake_kernel_param_bytes;
  /// With fake_cuda_kernels: each kernel's grid rule written as the compiler writes it
  /// (core/artifact/launch_grid.h); false leaves KernelDef.grid out, as format 1.4 did.
  bool fake_kernel_grids = true;
  /// With fake_kernel_grids: these kernels' grid rules instead of their families'.
  std::map<std::string, GridRule> fake_kernel_grid_overrides;
  /// The fused gated_linear steps' activation param (0 silu, 1 gelu; other values test
  /// refusals).
  int64_t gated_activation = 0;
  /// With fake_cuda_kernels and gated_activation 1: also the gelu_mul kernel (false: an
  /// artifact whose GELU-gated steps have no kernel).
  bool fake_gelu_kernel = true;
};

/// A tiny Llama (the default options but `vocab`, `max_context` and `seed`) built once per
/// test binary and opened from memory, alive until exit: the fixture engine, runner and
/// eval tests share. A builder error aborts (only a broken builder makes one).
const Artifact& sharedLlamaArtifact(int64_t vocab, int64_t max_context, uint64_t seed);

/// Writes the artifact into memory (sharded when options.tp > 1).
StatusOr<std::vector<uint8_t>> buildLlamaArtifact(const LlamaProgramOptions& options);
/// The tp > 1 case of buildLlamaArtifact (llama_program_tp.cc).
StatusOr<std::vector<uint8_t>> buildShardedLlamaArtifact(const LlamaProgramOptions& options);

}  // namespace ingot::testing
