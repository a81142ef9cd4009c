// AVX-512 BF16 kernels: bf16 weights times bf16-rounded activations through vdpbf16ps,
// twice the multiply rate of f32 FMAs; compiled for that target only, chosen at run time.
#include "runtime/backend/cpu/kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

// Only internal-linkage code below (see kernels_avx512.cc for why).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,f16c")
#endif

namespace ingot {
namespace {

/// bf16 elements per zmm register (vdpbf16ps multiplies 16 pairs).
constexpr int kPairs = 32;
/// Same register budget as the f32 tile: 16 accumulators, 4 weight and 1 x register.
constexpr int kTileTokens = 4;
constexpr int kTileRows = 4;
/// Tokens whose bf16 x rows stay in L2 while weight rows stream past.
constexpr int64_t kTokenChunk = 64;

inline __m512bh loadBf16(const uint16_t* p) {
  return reinterpret_cast<__m512bh>(_mm512_loadu_si512(p));
}
inline __m512bh loadBf16Masked(const uint16_t* p, __mmask32 m) {
  return reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(m, p));
}

/// MT tokens x NR weight rows: each y[t, n] sums 16 lanes of pair products over K in
/// steps of 32, then a masked step, then a fixed horizontal reduction (order set by K).
template <int MT, int NR>
inline void tile(const LinearArgs& a, int64_t t, int64_t n) {
  const int64_t K = a.K;
  const uint16_t* w = static_cast<const uint16_t*>(a.w);
  const uint16_t* wr[NR];
  for (int r = 0; r < NR; ++r) wr[r] = w + (n + r) * K;
  const uint16_t* xr[MT];
  for (int i = 0; i < MT; ++i) xr[i] = a.x_bf16 + (t + i) * a.x_stride;
  __m512 acc[MT][NR];
  for (int i = 0; i < MT; ++i)
    for (int r = 0; r < NR; ++r) acc[i][r] = _mm512_setzero_ps();
  const char* ahead[NR];
  for (int r = 0; r < NR; ++r) ahead[r] = reinterpret_cast<const char*>(wr[r] + NR * K);
  int64_t k = 0;
  for (; k + kPairs <= K; k += kPairs) {
    // One cache line (32 bf16) of each next row per step.
    for (int r = 0; r < NR; ++r) _mm_prefetch(ahead[r] + k * 2, _MM_HINT_T0);
    __m512bh wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = loadBf16(wr[r] + k);
    for (int i = 0; i < MT; ++i) {
      const __m512bh xv = loadBf16(xr[i] + k);
      for (int r = 0; r < NR; ++r) acc[i][r] = _mm512_dpbf16_ps(acc[i][r], xv, wv[r]);
    }
  }
  if (k < K) {
    const __mmask32 m = static_cast<__mmask32>((1ull << (K - k)) - 1ull);
    __m512bh wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = loadBf16Masked(wr[r] + k, m);
    for (int i = 0; i < MT; ++i) {
      const __m512bh xv = loadBf16Masked(xr[i] + k, m);
      for (int r = 0; r < NR; ++r) acc[i][r] = _mm512_dpbf16_ps(acc[i][r], xv, wv[r]);
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

template <int NR>
inline void rowsForTokens(const LinearArgs& a, int64_t t0, int64_t t1, int64_t n) {
  int64_t t = t0;
  for (; t + kTileTokens <= t1; t += kTileTokens) tile<kTileTokens, NR>(a, t, n);
  switch (t1 - t) {
    case 3: tile<3, NR>(a, t, n); break;
    case 2: tile<2, NR>(a, t, n); break;
    case 1: tile<1, NR>(a, t, n); break;
    default: break;
  }
}

void linearBf16Dot(const LinearArgs& a, int64_t n0, int64_t n1) {
  for (int64_t t0 = 0; t0 < a.T; t0 += kTokenChunk) {
    const int64_t t1 = a.T < t0 + kTokenChunk ? a.T : t0 + kTokenChunk;
    int64_t n = n0;
    for (; n + kTileRows <= n1; n += kTileRows) rowsForTokens<kTileRows>(a, t0, t1, n);
    for (; n < n1; ++n) rowsForTokens<1>(a, t0, t1, n);
  }
}

/// Round to nearest even, as vcvtneps2bf16 does (denormals flush to zero).
void roundToBf16(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_loadu_ps(x + i))));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm256_mask_storeu_epi16(
        out + i, m,
        reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i))));
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

const CpuKernels& avx512Bf16Kernels() {
  static const CpuKernels kernels = [] {
    CpuKernels k = avx512Kernels();
    k.level = SimdLevel::kAvx512Bf16;
    k.linear[static_cast<int>(WeightType::kBF16)] = linearBf16Dot;
    k.bf16_activations = true;
    k.round_to_bf16 = roundToBf16;
    return k;
  }();
  return kernels;
}

}  // namespace ingot

#else  // not x86-64 GCC/Clang

namespace ingot {
const CpuKernels& avx512Bf16Kernels() { return scalarKernels(); }
}  // namespace ingot

#endif
