// Row-wise CPU ops: straightforward loops (cheap next to the matrix products).
#include "runtime/backend/cpu/cpu_ops.h"

#include <cmath>
#include <cstring>

#include "runtime/backend/cpu/half_float.h"

namespace ingot {

namespace {

/// y[:] = row `row` of the [*, dim] table as f32.
void embedRow(const void* table, WeightType type, int64_t row, int64_t dim, float* y) {
  const int64_t offset = row * dim;
  switch (type) {
    case WeightType::kF32:
      std::memcpy(y, static_cast<const float*>(table) + offset, dim * sizeof(float));
      break;
    case WeightType::kBF16:
      for (int64_t d = 0; d < dim; ++d)
        y[d] = bf16ToF32(static_cast<const uint16_t*>(table)[offset + d]);
      break;
    case WeightType::kF16:
      for (int64_t d = 0; d < dim; ++d)
        y[d] = f16ToF32(static_cast<const uint16_t*>(table)[offset + d]);
      break;
  }
}

}  // namespace

void embeddingRows(const int32_t* tokens, const void* table, WeightType type, int64_t dim,
                   float* out, int64_t t0, int64_t t1) {
  for (int64_t t = t0; t < t1; ++t) embedRow(table, type, tokens[t], dim, out + t * dim);
}

void embeddingShardRows(const int32_t* tokens, const void* table, WeightType type,
                        int64_t vocab_start, int64_t num_rows, int64_t dim, float* out,
                        int64_t t0, int64_t t1) {
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t row = static_cast<int64_t>(tokens[t]) - vocab_start;
    if (row < 0 || row >= num_rows) {
      std::memset(out + t * dim, 0, static_cast<size_t>(dim) * sizeof(float));
      continue;
    }
    embedRow(table, type, row, dim, out + t * dim);
  }
}

void rmsNormRows(const float* x, const float* w, int64_t dim, float eps, float* out, int64_t t0,
                 int64_t t1) {
  for (int64_t t = t0; t < t1; ++t) {
    const float* xr = x + t * dim;
    float* y = out + t * dim;
    double sum = 0.0;
    for (int64_t d = 0; d < dim; ++d) sum += static_cast<double>(xr[d]) * xr[d];
    const float inv = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(dim) + eps));
    for (int64_t d = 0; d < dim; ++d) y[d] = w[d] * (xr[d] * inv);
  }
}

void layerNormRows(const float* x, const float* w, const float* b, int64_t dim, float eps,
                   float* out, int64_t t0, int64_t t1) {
  for (int64_t t = t0; t < t1; ++t) {
    const float* xr = x + t * dim;
    float* y = out + t * dim;
    double sum = 0.0;
    for (int64_t d = 0; d < dim; ++d) sum += xr[d];
    const double mean = sum / static_cast<double>(dim);
    double var = 0.0;
    for (int64_t d = 0; d < dim; ++d) var += (xr[d] - mean) * (xr[d] - mean);
    const float inv = static_cast<float>(1.0 / std::sqrt(var / static_cast<double>(dim) + eps));
    const float m = static_cast<float>(mean);
    for (int64_t d = 0; d < dim; ++d) y[d] = (xr[d] - m) * inv * w[d] + (b ? b[d] : 0.f);
  }
}

std::vector<float> ropeInverseFrequencies(double theta, int64_t rotary_dim,
                                          const RopeScalingParams& scaling) {
  const int64_t half = rotary_dim / 2;
  std::vector<float> inv(half);
  for (int64_t i = 0; i < half; ++i)
    inv[i] = static_cast<float>(1.0 / std::pow(theta, static_cast<double>(2 * i) / rotary_dim));
  if (scaling.kind == RopeScaling::kLinear && scaling.factor > 0) {
    for (float& f : inv) f = static_cast<float>(f / scaling.factor);
  } else if (scaling.kind == RopeScaling::kLlama3) {
    for (float& f : inv) f = f / llama3RopeFactor(f, scaling);
  }
  return inv;
}

float llama3RopeFactor(float freq, const RopeScalingParams& s) {
  // Every operation in f32, in the converter's order (its scalars cast to f32 as torch casts
  // a Python number meeting an f32 tensor).
  const float old = static_cast<float>(s.original_max_position);
  const float low = static_cast<float>(s.low_freq_factor);
  const float factor = static_cast<float>(s.factor);
  const float lowWavelen = static_cast<float>(static_cast<double>(s.original_max_position) /
                                              s.low_freq_factor);
  const float highWavelen = static_cast<float>(static_cast<double>(s.original_max_position) /
                                               s.high_freq_factor);
  const float wavelen = static_cast<float>(2.0 * M_PI) / freq;
  if (wavelen < highWavelen) return 1.0f;
  if (wavelen > lowWavelen) return factor;
  const float smooth =
      (old / wavelen - low) / static_cast<float>(s.high_freq_factor - s.low_freq_factor);
  return 1.0f / ((1.0f - smooth) / factor + smooth);
}

void ropeRows(const float* x, const int32_t* positions, const std::vector<float>& inv_freq,
              int64_t num_heads, int64_t head_dim, float* out, int64_t t0, int64_t t1) {
  const int64_t half = static_cast<int64_t>(inv_freq.size());
  const int64_t width = num_heads * head_dim;
  std::vector<float> cosv(half), sinv(half);
  for (int64_t t = t0; t < t1; ++t) {
    const float pos = static_cast<float>(positions[t]);
    for (int64_t i = 0; i < half; ++i) {
      const float angle = pos * inv_freq[i];  // f32 product, as Hugging Face computes it
      cosv[i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      sinv[i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
    const float* xr = x + t * width;
    float* y = out + t * width;
    for (int64_t h = 0; h < num_heads; ++h) {
      const float* xh = xr + h * head_dim;
      float* yh = y + h * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float a = xh[i], b = xh[i + half];
        yh[i] = a * cosv[i] - b * sinv[i];
        yh[i + half] = b * cosv[i] + a * sinv[i];
      }
      for (int64_t d = 2 * half; d < head_dim; ++d) yh[d] = xh[d];
    }
  }
}

void siluMulRange(const float* gate, const float* up, float* out, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void geluMulRange(const float* gate, const float* up, float* out, int64_t begin, int64_t end) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = begin; i < end; ++i) {
    const float g = gate[i];
    const float inner = kSqrt2OverPi * (g + 0.044715f * g * g * g);
    out[i] = 0.5f * g * (1.0f + std::tanh(inner)) * up[i];
  }
}

void addRange(const float* a, const float* b, float* out, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) out[i] = a[i] + b[i];
}

void scaleRange(const float* in, float factor, float* out, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) out[i] = in[i] * factor;
}

}  // namespace ingot
