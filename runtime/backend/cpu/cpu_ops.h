// Row-wise CPU implementations of the small ops: embedding, norms, rope, activations, KV writes.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/backend/cpu/kernels.h"

namespace ingot {

/// out[t, :] = table[tokens[t], :] as f32, for t in [t0, t1). `table` is [V, dim].
void embeddingRows(const int32_t* tokens, const void* table, WeightType type, int64_t dim,
                   float* out, int64_t t0, int64_t t1);

/// The vocab-parallel embedding: `table` holds tokens [vocab_start, vocab_start + num_rows);
/// out[t, :] = their row, or zeros for a token outside the shard (another rank has it and
/// the all_reduce that follows adds it), for t in [t0, t1).
void embeddingShardRows(const int32_t* tokens, const void* table, WeightType type,
                        int64_t vocab_start, int64_t num_rows, int64_t dim, float* out,
                        int64_t t0, int64_t t1);

/// out[t, :] = x[t, :] / sqrt(mean(x[t, :]^2) + eps) * w, as in Hugging Face LlamaRMSNorm.
void rmsNormRows(const float* x, const float* w, int64_t dim, float eps, float* out, int64_t t0,
                 int64_t t1);

/// out[t, :] = (x - mean) / sqrt(var + eps) * w + b (biased variance), as torch LayerNorm.
void layerNormRows(const float* x, const float* w, const float* b, int64_t dim, float eps,
                   float* out, int64_t t0, int64_t t1);

/// RoPE scaling kinds, numbered as the dialect's RopeScalingKind (the step param
/// `rope_scaling`).
enum class RopeScaling : int { kNone = 0, kLinear = 1, kLlama3 = 2, kYarn = 3 };

struct RopeScalingParams {
  RopeScaling kind = RopeScaling::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position = 0;
};

/// The rotary_dim / 2 inverse frequencies theta^(-2i / rotary_dim), rounded to f32 like
/// Hugging Face's inv_freq buffer, rescaled for linear and llama3 scaling (yarn is not
/// handled here). llama3 divides each by llama3RopeFactor: the factor a Llama 3 GGUF stores
/// in rope_freqs.weight, divided out as the GGUF route divides its factors, so a
/// checkpoint's directory and its GGUF give bit-identical frequencies.
std::vector<float> ropeInverseFrequencies(double theta, int64_t rotary_dim,
                                          const RopeScalingParams& scaling);

/// Llama 3 RoPE scaling as one divisor per frequency, computed in f32 as llama.cpp's
/// convert_hf_to_gguf.py writes rope_freqs.weight: 1 for wavelengths under
/// original / high_freq_factor, `factor` over original / low_freq_factor, and between them
/// 1 / ((1 - smooth) / factor + smooth), smooth = (original / wavelen - low) / (high - low).
/// Mathematically Hugging Face's _compute_llama3_parameters; rounded differently (within an
/// ulp or two of it).
float llama3RopeFactor(float freq, const RopeScalingParams& scaling);

/// Rotate-half RoPE on x[t] = [num_heads, head_dim]: for i < rotary_dim / 2 the pair
/// (x[i], x[i + rotary_dim / 2]) of each head rotates by positions[t] * inv_freq[i]
/// (angle computed in f32 as Hugging Face does); dims past rotary_dim pass through.
void ropeRows(const float* x, const int32_t* positions, const std::vector<float>& inv_freq,
              int64_t num_heads, int64_t head_dim, float* out, int64_t t0, int64_t t1);

/// out[i] = silu(gate[i]) * up[i] over a flat range.
void siluMulRange(const float* gate, const float* up, float* out, int64_t begin, int64_t end);
/// out[i] = gelu(gate[i]) * up[i], GELU in its tanh form (gelu_pytorch_tanh).
void geluMulRange(const float* gate, const float* up, float* out, int64_t begin, int64_t end);
/// out[i] = a[i] + b[i].
void addRange(const float* a, const float* b, float* out, int64_t begin, int64_t end);
/// out[i] = in[i] * factor; out may be in.
void scaleRange(const float* in, float factor, float* out, int64_t begin, int64_t end);

}  // namespace ingot
