// AVX2 + FMA + F16C kernels (8 f32 lanes), compiled for that target only, chosen at run time.
#include "runtime/backend/cpu/kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include "runtime/backend/cpu/half_float.h"

// Only internal-linkage code below (see kernels_avx512.cc for why).
// GCC takes target pragmas; clang applies the target attribute to every function here.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace ingot {
namespace {

constexpr int kLanes = 8;
/// 2 tokens x 4 weight rows = 8 accumulators + 4 weight vectors + 1 x in 16 ymm registers.
constexpr int kTileTokens = 2;
constexpr int kTileRows = 4;
constexpr int64_t kTokenChunk = 64;
/// Bytes per prefetch (a cache line).
constexpr int64_t kPrefetchBytes = 64;

template <WeightType W>
inline __m256 loadW(const void* w, int64_t i) {
  if constexpr (W == WeightType::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(w) + i);
  } else if constexpr (W == WeightType::kBF16) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(
        static_cast<const uint16_t*>(w) + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  } else {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(
        static_cast<const uint16_t*>(w) + i));
    return _mm256_cvtph_ps(h);
  }
}

/// The last K % 8 elements, zero-padded through a small buffer.
template <WeightType W>
inline __m256 loadWTail(const void* w, int64_t i, int64_t count) {
  alignas(32) float tmp[kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t j = 0; j < count; ++j) {
    if constexpr (W == WeightType::kF32) {
      tmp[j] = static_cast<const float*>(w)[i + j];
    } else if constexpr (W == WeightType::kBF16) {
      tmp[j] = bf16ToF32(static_cast<const uint16_t*>(w)[i + j]);
    } else {
      tmp[j] = f16ToF32(static_cast<const uint16_t*>(w)[i + j]);
    }
  }
  return _mm256_load_ps(tmp);
}

inline __m256 loadXTail(const float* x, int64_t count) {
  alignas(32) float tmp[kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t j = 0; j < count; ++j) tmp[j] = x[j];
  return _mm256_load_ps(tmp);
}

inline float reduce(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

inline int64_t elementBytes(WeightType w) { return w == WeightType::kF32 ? 4 : 2; }

template <WeightType W, int MT, int NR>
inline void tile(const LinearArgs& a, int64_t t, int64_t n) {
  const int64_t K = a.K;
  const char* wbase = static_cast<const char*>(a.w);
  const int64_t rowBytes = K * elementBytes(W);
  const void* wr[NR];
  for (int r = 0; r < NR; ++r) wr[r] = wbase + (n + r) * rowBytes;
  const float* xr[MT];
  for (int i = 0; i < MT; ++i) xr[i] = a.x + (t + i) * a.x_stride;

  __m256 acc[MT][NR];
  for (int i = 0; i < MT; ++i)
    for (int r = 0; r < NR; ++r) acc[i][r] = _mm256_setzero_ps();
  int64_t k = 0;
  // Decode streams the weights once: prefetch the next row tile at the same column, one
  // tile ahead, so the short row streams never stall on DRAM latency.
  const char* ahead[NR];
  for (int r = 0; r < NR; ++r) ahead[r] = static_cast<const char*>(wr[r]) + NR * rowBytes;
  for (; k + kLanes <= K; k += kLanes) {
    if ((k * elementBytes(W)) % kPrefetchBytes == 0)
      for (int r = 0; r < NR; ++r)
        _mm_prefetch(ahead[r] + k * elementBytes(W), _MM_HINT_T0);
    __m256 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = loadW<W>(wr[r], k);
    for (int i = 0; i < MT; ++i) {
      const __m256 xv = _mm256_loadu_ps(xr[i] + k);
      for (int r = 0; r < NR; ++r) acc[i][r] = _mm256_fmadd_ps(xv, wv[r], acc[i][r]);
    }
  }
  if (k < K) {
    __m256 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = loadWTail<W>(wr[r], k, K - k);
    for (int i = 0; i < MT; ++i) {
      const __m256 xv = loadXTail(xr[i] + k, K - k);
      for (int r = 0; r < NR; ++r) acc[i][r] = _mm256_fmadd_ps(xv, wv[r], acc[i][r]);
    }
  }
  for (int i = 0; i < MT; ++i) {
    float* y = a.y + (t + i) * a.y_stride;
    for (int r = 0; r < NR; ++r) {
      const float s = reduce(acc[i][r]);
      y[n + r] = a.bias ? s + a.bias[n + r] : s;
    }
  }
}

template <WeightType W, int NR>
inline void rowsForTokens(const LinearArgs& a, int64_t t0, int64_t t1, int64_t n) {
  int64_t t = t0;
  for (; t + kTileTokens <= t1; t += kTileTokens) tile<W, kTileTokens, NR>(a, t, n);
  if (t < t1) tile<W, 1, NR>(a, t, n);
}

template <WeightType W>
void linearAvx2(const LinearArgs& a, int64_t n0, int64_t n1) {
  for (int64_t t0 = 0; t0 < a.T; t0 += kTokenChunk) {
    const int64_t t1 = a.T < t0 + kTokenChunk ? a.T : t0 + kTokenChunk;
    int64_t n = n0;
    for (; n + kTileRows <= n1; n += kTileRows) rowsForTokens<W, kTileRows>(a, t0, t1, n);
    for (; n < n1; ++n) rowsForTokens<W, 1>(a, t0, t1, n);
  }
}

float dotAvx2(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  float s = reduce(acc);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

void axpyAvx2(float alpha, const float* x, float* y, int64_t n) {
  const __m256 av = _mm256_set1_ps(alpha);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += alpha * x[i];
}

void qkAvx2(const float* q, int64_t q_stride, int64_t rows, const float* k, int64_t k_stride,
            int64_t n, int64_t D, float scale, float* s, int64_t s_stride) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i)
      s[r * s_stride + i] = scale * dotAvx2(q + r * q_stride, k + i * k_stride, D);
}

void pvAvx2(const float* p, int64_t p_stride, int64_t rows, const float* v, int64_t v_stride,
            int64_t n, int64_t D, const float* alpha, float* o, int64_t o_stride) {
  for (int64_t r = 0; r < rows; ++r) {
    float* orow = o + r * o_stride;
    for (int64_t d = 0; d < D; ++d) orow[d] *= alpha[r];
    for (int64_t i = 0; i < n; ++i) axpyAvx2(p[r * p_stride + i], v + i * v_stride, orow, D);
  }
}

}  // namespace
}  // namespace ingot

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace ingot {

const CpuKernels& avx2Kernels() {
  static const CpuKernels kernels = [] {
    CpuKernels k;
    k.level = SimdLevel::kAvx2;
    k.linear[static_cast<int>(WeightType::kF32)] = linearAvx2<WeightType::kF32>;
    k.linear[static_cast<int>(WeightType::kF16)] = linearAvx2<WeightType::kF16>;
    k.linear[static_cast<int>(WeightType::kBF16)] = linearAvx2<WeightType::kBF16>;
    k.dot = dotAvx2;
    k.axpy = axpyAvx2;
    k.qk = qkAvx2;
    k.exp_shifted = expShifted;
    k.pv = pvAvx2;
    return k;
  }();
  return kernels;
}

}  // namespace ingot

#else  // not x86-64 GCC/Clang

namespace ingot {
const CpuKernels& avx2Kernels() { return scalarKernels(); }
}  // namespace ingot

#endif
