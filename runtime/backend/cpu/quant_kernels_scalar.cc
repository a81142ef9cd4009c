// Portable quantized-linear kernels: the fallback without AVX2, and a second opinion in tests.
#include <cstring>

#include "runtime/backend/cpu/half_float.h"
#include "runtime/backend/cpu/quant_formats.h"
#include "runtime/backend/cpu/quant_linear.h"

namespace ingot {
namespace {

/// Code -> value tables, built once from the exact decoders.
struct DecodeTables {
  float e2m1[16];
  float e4m3[256];
  float e8m0[256];
  DecodeTables() {
    for (int i = 0; i < 16; ++i) e2m1[i] = e2m1ToF32(static_cast<uint8_t>(i));
    for (int i = 0; i < 256; ++i) {
      e4m3[i] = e4m3fnToF32(static_cast<uint8_t>(i));
      e8m0[i] = e8m0ToF32(static_cast<uint8_t>(i));
    }
  }
};

const DecodeTables& tables() {
  static const DecodeTables t;
  return t;
}

inline float groupValue(const void* p, GroupScaleType type, int64_t i) {
  switch (type) {
    case GroupScaleType::kF16: return f16ToF32(static_cast<const uint16_t*>(p)[i]);
    case GroupScaleType::kBF16: return bf16ToF32(static_cast<const uint16_t*>(p)[i]);
    case GroupScaleType::kF32: return static_cast<const float*>(p)[i];
  }
  return 0.0f;
}

inline uint8_t nibble(const uint8_t* row, int64_t k) {
  return (k & 1) ? (row[k >> 1] >> 4) : (row[k >> 1] & 15);
}

bool isInt4(const QuantMatrix& w) {
  return w.format == QuantFormat::kInt4Min || w.format == QuantFormat::kInt4Zero;
}

/// Natural order: x, then (int4) the per-group sums of x.
int64_t preparedFloatsScalar(const QuantMatrix& w) { return w.K + (isInt4(w) ? w.groups() : 0); }

void prepareScalar(const QuantMatrix& w, const float* x, float* out) {
  std::memcpy(out, x, w.K * sizeof(float));
  if (!isInt4(w)) return;
  for (int64_t g = 0; g < w.groups(); ++g) {
    float s = 0.0f;
    for (int64_t k = g * w.block; k < (g + 1) * w.block; ++k) s += x[k];
    out[w.K + g] = s;
  }
}

/// One output: sum over blocks of scale * (sum of code values times x), then the int4
/// offset term, times the row's scale.
float rowDot(const QuantMatrix& w, int64_t n, const float* x) {
  const DecodeTables& tb = tables();
  const int64_t K = w.K;
  const uint8_t* row = w.codes + n * w.rowBytes();
  if (w.format == QuantFormat::kFp8) {
    float acc = 0.0f;
    for (int64_t k = 0; k < K; ++k) acc += tb.e4m3[row[k]] * x[k];
    return acc * ((w.channel_scales ? w.channel_scales[n] : 1.0f) * w.global_scale);
  }
  const int64_t G = w.block, groups = w.groups();
  float acc = 0.0f;
  for (int64_t g = 0; g < groups; ++g) {
    float p = 0.0f;
    if (isInt4(w)) {
      for (int64_t k = g * G; k < (g + 1) * G; ++k) p += static_cast<float>(nibble(row, k)) * x[k];
    } else {
      for (int64_t k = g * G; k < (g + 1) * G; ++k) p += tb.e2m1[nibble(row, k)] * x[k];
    }
    const int64_t i = n * groups + g;
    const uint8_t* scaleBytes = static_cast<const uint8_t*>(w.scales);
    switch (w.format) {
      case QuantFormat::kInt4Min:
        acc += groupValue(w.scales, w.scale_type, i) * p +
               groupValue(w.zeros, w.scale_type, i) * x[K + g];
        break;
      case QuantFormat::kInt4Zero:
        acc += groupValue(w.scales, w.scale_type, i) *
               (p - groupValue(w.zeros, w.scale_type, i) * x[K + g]);
        break;
      case QuantFormat::kNvfp4: acc += tb.e4m3[scaleBytes[i]] * p; break;
      case QuantFormat::kMxfp4: acc += tb.e8m0[scaleBytes[i]] * p; break;
      case QuantFormat::kFp8: break;
    }
  }
  return acc * w.global_scale;
}

void linearScalar(const QuantLinearArgs& a, int64_t n0, int64_t n1) {
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t t = 0; t < a.T; ++t) {
      const float v = rowDot(*a.w, n, a.xq + t * a.xq_stride);
      a.y[t * a.y_stride + n] = a.bias ? v + a.bias[n] : v;
    }
}

}  // namespace

const QuantKernels& scalarQuantKernels() {
  static const QuantKernels kernels = [] {
    QuantKernels k;
    k.level = SimdLevel::kScalar;
    k.prepared_floats = preparedFloatsScalar;
    k.prepare = prepareScalar;
    k.linear = linearScalar;
    return k;
  }();
  return kernels;
}

}  // namespace ingot
