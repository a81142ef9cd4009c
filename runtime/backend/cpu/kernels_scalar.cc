// Portable scalar kernels: the fallback on CPUs without AVX2, and a second opinion in tests.
#include <cmath>
#include <cstring>
#include <limits>

#include "runtime/backend/cpu/half_float.h"
#include "runtime/backend/cpu/kernels.h"

namespace ingot {
namespace {

template <WeightType W>
inline float weightAt(const void* w, int64_t i) {
  if constexpr (W == WeightType::kF32) {
    return static_cast<const float*>(w)[i];
  } else if constexpr (W == WeightType::kBF16) {
    return bf16ToF32(static_cast<const uint16_t*>(w)[i]);
  } else {
    return f16ToF32(static_cast<const uint16_t*>(w)[i]);
  }
}

template <WeightType W>
void linearScalar(const LinearArgs& a, int64_t n0, int64_t n1) {
  for (int64_t t = 0; t < a.T; ++t) {
    const float* x = a.x + t * a.x_stride;
    float* y = a.y + t * a.y_stride;
    for (int64_t n = n0; n < n1; ++n) {
      float acc = 0.f;
      const int64_t base = n * a.K;
      for (int64_t k = 0; k < a.K; ++k) acc += x[k] * weightAt<W>(a.w, base + k);
      y[n] = a.bias ? acc + a.bias[n] : acc;
    }
  }
}

float dotScalar(const float* a, const float* b, int64_t n) {
  float acc = 0.f;
  for (int64_t i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

void axpyScalar(float alpha, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void qkScalar(const float* q, int64_t q_stride, int64_t rows, const float* k, int64_t k_stride,
              int64_t n, int64_t D, float scale, float* s, int64_t s_stride) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i)
      s[r * s_stride + i] = scale * dotScalar(q + r * q_stride, k + i * k_stride, D);
}

void pvScalar(const float* p, int64_t p_stride, int64_t rows, const float* v, int64_t v_stride,
              int64_t n, int64_t D, const float* alpha, float* o, int64_t o_stride) {
  for (int64_t r = 0; r < rows; ++r) {
    float* orow = o + r * o_stride;
    for (int64_t d = 0; d < D; ++d) orow[d] *= alpha[r];
    for (int64_t i = 0; i < n; ++i) axpyScalar(p[r * p_stride + i], v + i * v_stride, orow, D);
  }
}

float expShiftedScalar(float* s, int64_t n, float shift) {
  float sum = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    s[i] = s[i] == -std::numeric_limits<float>::infinity() ? 0.f : std::exp(s[i] - shift);
    sum += s[i];
  }
  return sum;
}

CpuKernels makeScalar() {
  CpuKernels k;
  k.level = SimdLevel::kScalar;
  k.linear[static_cast<int>(WeightType::kF32)] = linearScalar<WeightType::kF32>;
  k.linear[static_cast<int>(WeightType::kF16)] = linearScalar<WeightType::kF16>;
  k.linear[static_cast<int>(WeightType::kBF16)] = linearScalar<WeightType::kBF16>;
  k.dot = dotScalar;
  k.axpy = axpyScalar;
  k.qk = qkScalar;
  k.exp_shifted = expShiftedScalar;
  k.pv = pvScalar;
  return k;
}

}  // namespace

float expShifted(float* s, int64_t n, float shift) { return expShiftedScalar(s, n, shift); }

const CpuKernels& scalarKernels() {
  static const CpuKernels kernels = makeScalar();
  return kernels;
}

const CpuKernels& cpuKernels(SimdLevel level) {
  switch (level) {
    case SimdLevel::kAvx512: return avx512Kernels();
    case SimdLevel::kAvx512Bf16: return avx512Bf16Kernels();
    case SimdLevel::kAvx2: return avx2Kernels();
    case SimdLevel::kScalar: break;
  }
  return scalarKernels();
}

}  // namespace ingot
