// AVX-512 kernels (16 f32 lanes), compiled for that target only and chosen at run time.
#include "runtime/backend/cpu/kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

// Everything below is compiled for AVX-512. Only internal-linkage code lives in this
// region (no std templates are instantiated), so no AVX-512 copy of a shared inline
// function can leak into code that runs on older CPUs.
// GCC takes target pragmas; clang applies the target attribute to every function here.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")
#endif

namespace ingot {
namespace {

constexpr int kLanes = 16;
/// Tokens per micro-tile x weight rows per micro-tile: 4 x 4 = 16 accumulators, plus 4
/// weight vectors and one x vector, in 32 zmm registers.
constexpr int kTileTokens = 4;
constexpr int kTileRows = 4;
/// Tokens whose x rows stay in L2 while weight rows stream past (64 x K f32).
constexpr int64_t kTokenChunk = 64;
/// Bytes per prefetch (a cache line).
constexpr int64_t kPrefetchBytes = 64;

template <WeightType W>
inline __m512 loadW(const void* w, int64_t i) {
  if constexpr (W == WeightType::kF32) {
    return _mm512_loadu_ps(static_cast<const float*>(w) + i);
  } else if constexpr (W == WeightType::kBF16) {
    __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
        static_cast<const uint16_t*>(w) + i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else {
    __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
        static_cast<const uint16_t*>(w) + i));
    return _mm512_cvtph_ps(h);
  }
}

template <WeightType W>
inline __m512 loadWMasked(const void* w, int64_t i, __mmask16 m) {
  if constexpr (W == WeightType::kF32) {
    return _mm512_maskz_loadu_ps(m, static_cast<const float*>(w) + i);
  } else if constexpr (W == WeightType::kBF16) {
    __m256i h = _mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(w) + i);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else {
    __m256i h = _mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(w) + i);
    return _mm512_cvtph_ps(h);
  }
}

inline int64_t elementBytes(WeightType w) { return w == WeightType::kF32 ? 4 : 2; }

/// MT tokens x NR weight rows starting at token t and row n: one accumulator per output,
/// K in steps of 16 then one masked step, then a fixed horizontal reduction.
template <WeightType W, int MT, int NR>
inline void tile(const LinearArgs& a, int64_t t, int64_t n) {
  const int64_t K = a.K;
  const char* wbase = static_cast<const char*>(a.w);
  const int64_t rowBytes = K * elementBytes(W);
  const void* wr[NR];
  for (int r = 0; r < NR; ++r) wr[r] = wbase + (n + r) * rowBytes;
  const float* xr[MT];
  for (int i = 0; i < MT; ++i) xr[i] = a.x + (t + i) * a.x_stride;

  __m512 acc[MT][NR];
  for (int i = 0; i < MT; ++i)
    for (int r = 0; r < NR; ++r) acc[i][r] = _mm512_setzero_ps();
  int64_t k = 0;
  // Decode streams the weights once: prefetch the next row tile at the same column, one
  // tile ahead, so the short row streams never stall on DRAM latency.
  const char* ahead[NR];
  for (int r = 0; r < NR; ++r) ahead[r] = static_cast<const char*>(wr[r]) + NR * rowBytes;
  for (; k + kLanes <= K; k += kLanes) {
    if ((k * elementBytes(W)) % kPrefetchBytes == 0)
      for (int r = 0; r < NR; ++r)
        _mm_prefetch(ahead[r] + k * elementBytes(W), _MM_HINT_T0);
    __m512 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = loadW<W>(wr[r], k);
    for (int i = 0; i < MT; ++i) {
      const __m512 xv = _mm512_loadu_ps(xr[i] + k);
      for (int r = 0; r < NR; ++r) acc[i][r] = _mm512_fmadd_ps(xv, wv[r], acc[i][r]);
    }
  }
  if (k < K) {
    const __mmask16 m = static_cast<__mmask16>((1u << (K - k)) - 1u);
    __m512 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = loadWMasked<W>(wr[r], k, m);
    for (int i = 0; i < MT; ++i) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, xr[i] + k);
      for (int r = 0; r < NR; ++r) acc[i][r] = _mm512_fmadd_ps(xv, wv[r], acc[i][r]);
    }
  }
  for (int i = 0; i < MT; ++i) {
    float* y = a.y + (t + i) * a.y_stride;
    for (int r = 0; r < NR; ++r) {
      const float s = _mm512_reduce_add_ps(acc[i][r]);
      y[n + r] = a.bias ? s + a.bias[n + r] : s;
    }
  }
}

template <WeightType W, int NR>
inline void rowsForTokens(const LinearArgs& a, int64_t t0, int64_t t1, int64_t n) {
  int64_t t = t0;
  for (; t + kTileTokens <= t1; t += kTileTokens) tile<W, kTileTokens, NR>(a, t, n);
  switch (t1 - t) {
    case 3: tile<W, 3, NR>(a, t, n); break;
    case 2: tile<W, 2, NR>(a, t, n); break;
    case 1: tile<W, 1, NR>(a, t, n); break;
    default: break;
  }
}

template <WeightType W>
void linearAvx512(const LinearArgs& a, int64_t n0, int64_t n1) {
  for (int64_t t0 = 0; t0 < a.T; t0 += kTokenChunk) {
    const int64_t t1 = a.T < t0 + kTokenChunk ? a.T : t0 + kTokenChunk;
    int64_t n = n0;
    for (; n + kTileRows <= n1; n += kTileRows) rowsForTokens<W, kTileRows>(a, t0, t1, n);
    for (; n < n1; ++n) rowsForTokens<W, 1>(a, t0, t1, n);
  }
}

float dotAvx512(const float* a, const float* b, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

void axpyAvx512(float alpha, const float* x, float* y, int64_t n) {
  const __m512 av = _mm512_set1_ps(alpha);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(av, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(y + i, m,
                          _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, x + i),
                                          _mm512_maskz_loadu_ps(m, y + i)));
  }
}

/// Keys scored together against one query row, for independent FMA chains.
constexpr int kQkKeys = 4;

inline __mmask16 tailMask(int64_t count) {
  return static_cast<__mmask16>((1u << count) - 1u);
}

void qkAvx512(const float* q, int64_t q_stride, int64_t rows, const float* k, int64_t k_stride,
              int64_t n, int64_t D, float scale, float* s, int64_t s_stride) {
  const int64_t full = D / kLanes * kLanes;
  const __mmask16 m = tailMask(D - full);
  for (int64_t r = 0; r < rows; ++r) {
    const float* qr = q + r * q_stride;
    float* sr = s + r * s_stride;
    int64_t i = 0;
    for (; i + kQkKeys <= n; i += kQkKeys) {
      const float* kr[kQkKeys];
      __m512 acc[kQkKeys];
      for (int j = 0; j < kQkKeys; ++j) {
        kr[j] = k + (i + j) * k_stride;
        acc[j] = _mm512_setzero_ps();
      }
      int64_t d = 0;
      for (; d < full; d += kLanes) {
        const __m512 qv = _mm512_loadu_ps(qr + d);
        for (int j = 0; j < kQkKeys; ++j)
          acc[j] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(kr[j] + d), acc[j]);
      }
      if (d < D) {
        const __m512 qv = _mm512_maskz_loadu_ps(m, qr + d);
        for (int j = 0; j < kQkKeys; ++j)
          acc[j] = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, kr[j] + d), acc[j]);
      }
      for (int j = 0; j < kQkKeys; ++j) sr[i + j] = scale * _mm512_reduce_add_ps(acc[j]);
    }
    // The same per-key reduction as above, one key at a time.
    for (; i < n; ++i) {
      const float* kr = k + i * k_stride;
      __m512 acc = _mm512_setzero_ps();
      int64_t d = 0;
      for (; d < full; d += kLanes)
        acc = _mm512_fmadd_ps(_mm512_loadu_ps(qr + d), _mm512_loadu_ps(kr + d), acc);
      if (d < D)
        acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, qr + d), _mm512_maskz_loadu_ps(m, kr + d),
                              acc);
      sr[i] = scale * _mm512_reduce_add_ps(acc);
    }
  }
}

/// Output rows x 16-float column chunks held in registers by one pv tile.
constexpr int kPvRows = 4;
constexpr int kPvChunks = 4;

/// R rows x C chunks of o starting at column d; the last chunk is masked by `last`.
template <int R, int C>
inline void pvTile(const float* p, int64_t p_stride, const float* v, int64_t v_stride, int64_t n,
                   int64_t d, __mmask16 last, const float* alpha, float* o, int64_t o_stride) {
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r) {
    const __m512 a = _mm512_set1_ps(alpha[r]);
    for (int c = 0; c < C; ++c) {
      const __mmask16 m = c == C - 1 ? last : static_cast<__mmask16>(0xffff);
      acc[r][c] = _mm512_mul_ps(a, _mm512_maskz_loadu_ps(m, o + r * o_stride + d + c * kLanes));
    }
  }
  // A do-while (n >= 1): with a loop that may not run, GCC 12 keeps acc in memory and
  // stores every accumulator on every iteration.
  int64_t i = 0;
  do {
    const float* vr = v + i * v_stride + d;
    __m512 vv[C];
    for (int c = 0; c < C; ++c) {
      const __mmask16 m = c == C - 1 ? last : static_cast<__mmask16>(0xffff);
      vv[c] = _mm512_maskz_loadu_ps(m, vr + c * kLanes);
    }
    for (int r = 0; r < R; ++r) {
      const __m512 pb = _mm512_set1_ps(p[r * p_stride + i]);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(pb, vv[c], acc[r][c]);
    }
  } while (++i < n);
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      const __mmask16 m = c == C - 1 ? last : static_cast<__mmask16>(0xffff);
      _mm512_mask_storeu_ps(o + r * o_stride + d + c * kLanes, m, acc[r][c]);
    }
}

template <int R>
inline void pvRows(const float* p, int64_t p_stride, const float* v, int64_t v_stride, int64_t n,
                   int64_t D, const float* alpha, float* o, int64_t o_stride) {
  for (int64_t d = 0; d < D; d += kPvChunks * kLanes) {
    const int64_t width = D - d < kPvChunks * kLanes ? D - d : kPvChunks * kLanes;
    const int chunks = static_cast<int>((width + kLanes - 1) / kLanes);
    const int64_t rem = width - (chunks - 1) * kLanes;
    const __mmask16 last = rem == kLanes ? static_cast<__mmask16>(0xffff) : tailMask(rem);
    switch (chunks) {
      case 4: pvTile<R, 4>(p, p_stride, v, v_stride, n, d, last, alpha, o, o_stride); break;
      case 3: pvTile<R, 3>(p, p_stride, v, v_stride, n, d, last, alpha, o, o_stride); break;
      case 2: pvTile<R, 2>(p, p_stride, v, v_stride, n, d, last, alpha, o, o_stride); break;
      default: pvTile<R, 1>(p, p_stride, v, v_stride, n, d, last, alpha, o, o_stride); break;
    }
  }
}

void pvAvx512(const float* p, int64_t p_stride, int64_t rows, const float* v, int64_t v_stride,
              int64_t n, int64_t D, const float* alpha, float* o, int64_t o_stride) {
  if (n <= 0) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t d = 0; d < D; ++d) o[r * o_stride + d] *= alpha[r];
    return;
  }
  int64_t r = 0;
  for (; r + kPvRows <= rows; r += kPvRows)
    pvRows<kPvRows>(p + r * p_stride, p_stride, v, v_stride, n, D, alpha + r, o + r * o_stride,
                    o_stride);
  const float* pr = p + r * p_stride;
  float* orow = o + r * o_stride;
  switch (rows - r) {
    case 3: pvRows<3>(pr, p_stride, v, v_stride, n, D, alpha + r, orow, o_stride); break;
    case 2: pvRows<2>(pr, p_stride, v, v_stride, n, D, alpha + r, orow, o_stride); break;
    case 1: pvRows<1>(pr, p_stride, v, v_stride, n, D, alpha + r, orow, o_stride); break;
    default: break;
  }
}

/// exp(x) as 2^m * e^r with m = round(x / ln 2), |r| <= ln 2 / 2, e^r by its degree-6
/// Taylor polynomial (truncation error below 2^-23 there) and 2^m applied by scalef, which
/// underflows to 0 for very negative x.
inline __m512 expAvx512(__m512 x) {
  const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
  const __m512 ln2Hi = _mm512_set1_ps(0.693359375f);
  const __m512 ln2Lo = _mm512_set1_ps(-2.12194440e-4f);
  x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));  // below the smallest subnormal
  x = _mm512_min_ps(x, _mm512_set1_ps(88.7228f));
  const __m512 m = _mm512_roundscale_ps(_mm512_mul_ps(x, log2e),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(m, ln2Hi, x);
  r = _mm512_fnmadd_ps(m, ln2Lo, r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, m);
}

float expShiftedAvx512(float* s, int64_t n, float shift) {
  const __m512 sh = _mm512_set1_ps(shift);
  const __m512 negInf = _mm512_set1_ps(-__builtin_inff());
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += kLanes) {
    const __mmask16 m = n - i >= kLanes ? static_cast<__mmask16>(0xffff) : tailMask(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, s + i);
    const __mmask16 shown = _mm512_mask_cmp_ps_mask(m, v, negInf, _CMP_NEQ_OQ);
    const __m512 e = _mm512_maskz_mov_ps(shown, expAvx512(_mm512_sub_ps(v, sh)));
    _mm512_mask_storeu_ps(s + i, m, e);
    sum = _mm512_add_ps(sum, e);
  }
  return _mm512_reduce_add_ps(sum);
}

}  // namespace
}  // namespace ingot

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace ingot {

const CpuKernels& avx512Kernels() {
  static const CpuKernels kernels = [] {
    CpuKernels k;
    k.level = SimdLevel::kAvx512;
    k.linear[static_cast<int>(WeightType::kF32)] = linearAvx512<WeightType::kF32>;
    k.linear[static_cast<int>(WeightType::kF16)] = linearAvx512<WeightType::kF16>;
    k.linear[static_cast<int>(WeightType::kBF16)] = linearAvx512<WeightType::kBF16>;
    k.dot = dotAvx512;
    k.axpy = axpyAvx512;
    k.qk = qkAvx512;
    k.exp_shifted = expShiftedAvx512;
    k.pv = pvAvx512;
    return k;
  }();
  return kernels;
}

}  // namespace ingot

#else  // not x86-64 GCC/Clang

namespace ingot {
const CpuKernels& avx512Kernels() { return scalarKernels(); }
}  // namespace ingot

#endif
