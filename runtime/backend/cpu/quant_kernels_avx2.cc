// AVX2 + FMA + F16C quantized-linear kernels (8 f32 lanes), compiled for that target only.
#include <cstring>

#include "runtime/backend/cpu/quant_linear.h"
#include "runtime/backend/cpu/quant_linear_layout.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

// Only internal-linkage code below (see kernels_avx512.cc for why).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace ingot {
namespace {

constexpr int kLanes = 8;
/// A row chunk of 4-bit codes: 8 32-bit words of 8 codes, 32 bytes.
constexpr int64_t kChunk = 8 * kLanes;
constexpr int64_t kChunkBytes = kChunk / 2;
/// One token: 4 rows at a time; several tokens: 2 tokens x 2 rows (16 ymm registers).
constexpr int kDecodeRows = 4;
constexpr int kTileTokens = 2;
constexpr int kTileRows = 2;
constexpr int64_t kTokenChunkFloats = 128 * 1024;
/// Bytes per prefetch (a cache line).
constexpr int64_t kPrefetchBytes = 64;

inline float reduce(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

constexpr bool isInt4(QuantFormat f) {
  return f == QuantFormat::kInt4Min || f == QuantFormat::kInt4Zero;
}

/// `count` (<= 8) elements of `bytes` bytes each from p, zero-padded to 32 bytes.
struct Padded {
  alignas(32) uint8_t data[32];
  Padded(const void* p, int64_t count, int64_t bytes) {
    std::memset(data, 0, sizeof(data));
    std::memcpy(data, p, count * bytes);
  }
};

template <GroupScaleType S>
constexpr int64_t groupValueBytes() {
  return S == GroupScaleType::kF32 ? 4 : 2;
}

/// 8 elements of an int4 scale or zero/min tensor from p as f32.
template <GroupScaleType S>
inline __m256 groupValues(const void* p) {
  if constexpr (S == GroupScaleType::kF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(static_cast<const __m128i*>(p)));
  } else if constexpr (S == GroupScaleType::kBF16) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  } else {
    return _mm256_loadu_ps(static_cast<const float*>(p));
  }
}

template <GroupScaleType S>
inline __m256 loadGroupValues(const void* base, int64_t i, int64_t count) {
  const uint8_t* p = static_cast<const uint8_t*>(base) + i * groupValueBytes<S>();
  if (count >= kLanes) return groupValues<S>(p);
  const Padded padded(p, count, groupValueBytes<S>());
  return groupValues<S>(padded.data);
}

/// 8 f8E4M3FN codes (the low 8 bytes of `codes`) as f32 / 256, exactly (see
/// quant_kernels_avx512.cc); the f16 bit trick on sign-extended codes.
inline __m256 e4m3Over256(__m128i codes) {
  const __m128i h = _mm_and_si128(_mm_slli_epi16(_mm_cvtepi8_epi16(codes), 7),
                                  _mm_set1_epi16(static_cast<short>(0xBF80)));
  return _mm256_cvtph_ps(h);
}

/// 8 block scales of a fp4 format from 8 bytes at p.
template <QuantFormat F>
inline __m256 fp4Scales(const uint8_t* p) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m256i e = _mm256_cvtepu8_epi32(b);
  if constexpr (F == QuantFormat::kNvfp4) {
    const __m256 s = _mm256_mul_ps(e4m3Over256(b), _mm256_set1_ps(256.0f));
    const __m256i nan = _mm256_cmpeq_epi32(_mm256_and_si256(e, _mm256_set1_epi32(0x7f)),
                                           _mm256_set1_epi32(0x7f));
    return _mm256_blendv_ps(s, _mm256_set1_ps(__builtin_nanf("")), _mm256_castsi256_ps(nan));
  } else {
    __m256i bits = _mm256_slli_epi32(e, 23);  // 2^(e - 127) for e in 1..254
    const __m256i zero = _mm256_cmpeq_epi32(e, _mm256_setzero_si256());
    const __m256i nan = _mm256_cmpeq_epi32(e, _mm256_set1_epi32(255));
    bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x00400000), zero);  // 2^-127
    bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x7fc00000), nan);
    return _mm256_castsi256_ps(bits);
  }
}

template <QuantFormat F, GroupScaleType S>
inline __m256 loadBlockScales(const QuantMatrix& w, int64_t n, int64_t g0, int64_t count) {
  const int64_t i = n * w.groups() + g0;
  if constexpr (isInt4(F)) {
    return loadGroupValues<S>(w.scales, i, count);
  } else {
    const uint8_t* p = static_cast<const uint8_t*>(w.scales) + i;
    if (count >= kLanes) return fp4Scales<F>(p);
    const Padded padded(p, count, 1);
    return fp4Scales<F>(padded.data);
  }
}

/// Code J of every word of d as f32: the integer (int4) or the E2M1 value (fp4: magnitude by
/// `magnitudes`, sign from the code's bit 3).
template <QuantFormat F, int J>
inline __m256 decodeCodes(__m256i d, __m256 magnitudes) {
  if constexpr (!isInt4(F)) {
    __m256i v = d;
    if constexpr (J > 0) v = _mm256_srli_epi32(d, 4 * J);
    const __m256 m = _mm256_permutevar8x32_ps(magnitudes, v);  // reads the low 3 bits
    __m256i sign = d;
    if constexpr (J < 7) sign = _mm256_slli_epi32(d, 28 - 4 * J);
    sign = _mm256_and_si256(sign, _mm256_set1_epi32(static_cast<int>(0x80000000u)));
    return _mm256_or_ps(m, _mm256_castsi256_ps(sign));
  } else if constexpr (J == 7) {
    return _mm256_cvtepi32_ps(_mm256_srli_epi32(d, 28));
  } else {  // in place (see int4ActivationScale): q * 16^J
    return _mm256_cvtepi32_ps(_mm256_and_si256(d, _mm256_set1_epi32(15 << (4 * J))));
  }
}

template <QuantFormat F, int MT, int NR, int J>
inline void codeStep(const __m256i (&d)[NR], const float* const (&x)[MT], __m256 magnitudes,
                     __m256 (&p)[MT][NR]) {
  __m256 xv[MT];
  for (int i = 0; i < MT; ++i) xv[i] = _mm256_loadu_ps(x[i] + J * kLanes);
  for (int r = 0; r < NR; ++r) {
    const __m256 q = decodeCodes<F, J>(d[r], magnitudes);
    for (int i = 0; i < MT; ++i)
      p[i][r] = J == 0 ? _mm256_mul_ps(q, xv[i]) : _mm256_fmadd_ps(q, xv[i], p[i][r]);
  }
}

/// As tile4 in quant_kernels_avx512.cc, with 8 lanes: 32-byte chunks, 8 groups per batch.
template <QuantFormat F, GroupScaleType S, int MT, int NR>
inline void tile4(const QuantLinearArgs& a, int64_t t, int64_t n) {
  const QuantMatrix& w = *a.w;
  const int64_t G = w.block, groups = w.groups(), rowBytes = w.rowBytes();
  const int64_t chunks = (w.K + kChunk - 1) / kChunk;
  const int64_t sumsOffset = chunks * kChunk;
  const int64_t scaleBytes = isInt4(F) ? groupValueBytes<S>() : 1;
  const __m128i shift = _mm_cvtsi32_si128(blockShift(G));
  const __m256i laneFirst = _mm256_setr_epi32(0, 8, 16, 24, 32, 40, 48, 56);
  const __m256 magnitudes = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
  const uint8_t* row[NR];
  for (int r = 0; r < NR; ++r) row[r] = w.codes + (n + r) * rowBytes;
  const float* xr[MT];
  for (int i = 0; i < MT; ++i) xr[i] = a.xq + (t + i) * a.xq_stride;
  __m256 acc[MT][NR];
  for (int i = 0; i < MT; ++i)
    for (int r = 0; r < NR; ++r) acc[i][r] = _mm256_setzero_ps();

  int64_t c = 0;
  for (int64_t g0 = 0; g0 < groups; g0 += kLanes) {
    const int64_t count = groups - g0;
    __m256 scale[NR];
    for (int r = 0; r < NR; ++r) scale[r] = loadBlockScales<F, S>(w, n + r, g0, count);
    if ((g0 * scaleBytes) % kPrefetchBytes < kLanes * scaleBytes)
      for (int r = NR; r < 2 * NR; ++r) {
        const int64_t at = ((n + r) * groups + g0) * scaleBytes;
        _mm_prefetch(static_cast<const char*>(w.scales) + at, _MM_HINT_T0);
        if constexpr (isInt4(F)) _mm_prefetch(static_cast<const char*>(w.zeros) + at, _MM_HINT_T0);
      }
    const int64_t cEnd = (g0 + kLanes) * G / kChunk < chunks ? (g0 + kLanes) * G / kChunk : chunks;
    for (; c < cEnd; ++c) {
      const __m256i idx = _mm256_srl_epi32(
          _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(c * kChunk - g0 * G)), laneFirst),
          shift);
      const int64_t left = rowBytes - c * kChunkBytes;
      __m256i d[NR];
      if (left >= kChunkBytes) {
        for (int r = 0; r < NR; ++r)
          d[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row[r] + c * kChunkBytes));
      } else {
        const __m256i words = _mm256_set1_epi32(static_cast<int>(left / 4));
        const __m256i mask = _mm256_cmpgt_epi32(words, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        for (int r = 0; r < NR; ++r)
          d[r] = _mm256_maskload_epi32(
              reinterpret_cast<const int*>(row[r] + c * kChunkBytes), mask);
      }
      // The next row tile's codes one tile ahead (see quant_kernels_avx512.cc).
      if ((c * kChunkBytes) % kPrefetchBytes == 0)
        for (int r = 0; r < NR; ++r)
          _mm_prefetch(reinterpret_cast<const char*>(row[r] + NR * rowBytes + c * kChunkBytes),
                       _MM_HINT_T0);
      const float* xc[MT];
      for (int i = 0; i < MT; ++i) xc[i] = xr[i] + c * kChunk;
      __m256 p[MT][NR];
      codeStep<F, MT, NR, 0>(d, xc, magnitudes, p);
      codeStep<F, MT, NR, 1>(d, xc, magnitudes, p);
      codeStep<F, MT, NR, 2>(d, xc, magnitudes, p);
      codeStep<F, MT, NR, 3>(d, xc, magnitudes, p);
      codeStep<F, MT, NR, 4>(d, xc, magnitudes, p);
      codeStep<F, MT, NR, 5>(d, xc, magnitudes, p);
      codeStep<F, MT, NR, 6>(d, xc, magnitudes, p);
      codeStep<F, MT, NR, 7>(d, xc, magnitudes, p);
      for (int r = 0; r < NR; ++r) {
        const __m256 s = _mm256_permutevar8x32_ps(scale[r], idx);
        for (int i = 0; i < MT; ++i) acc[i][r] = _mm256_fmadd_ps(p[i][r], s, acc[i][r]);
      }
    }
    if constexpr (isInt4(F)) {
      for (int r = 0; r < NR; ++r) {
        const __m256 z = loadGroupValues<S>(w.zeros, (n + r) * groups + g0, count);
        const __m256 coef = F == QuantFormat::kInt4Min ? z : _mm256_mul_ps(scale[r], z);
        for (int i = 0; i < MT; ++i) {
          const __m256 sums = _mm256_loadu_ps(xr[i] + sumsOffset + g0);
          acc[i][r] = F == QuantFormat::kInt4Min ? _mm256_fmadd_ps(coef, sums, acc[i][r])
                                                 : _mm256_fnmadd_ps(coef, sums, acc[i][r]);
        }
      }
    }
  }
  for (int i = 0; i < MT; ++i) {
    float* y = a.y + (t + i) * a.y_stride;
    for (int r = 0; r < NR; ++r) {
      y[n + r] = finishOutput(reduce(acc[i][r]), w.global_scale, a.bias ? a.bias + n + r : nullptr);
    }
  }
}

template <int MT, int NR>
inline void tileFp8(const QuantLinearArgs& a, int64_t t, int64_t n) {
  const QuantMatrix& w = *a.w;
  const int64_t K = w.K;
  const uint8_t* row[NR];
  for (int r = 0; r < NR; ++r) row[r] = w.codes + (n + r) * K;
  const float* xr[MT];
  for (int i = 0; i < MT; ++i) xr[i] = a.xq + (t + i) * a.xq_stride;
  __m256 acc[MT][NR];
  for (int i = 0; i < MT; ++i)
    for (int r = 0; r < NR; ++r) acc[i][r] = _mm256_setzero_ps();
  const __m256i signAndMagnitude = _mm256_set1_epi16(static_cast<short>(0xBF80));
  // 16 codes per step; the last partial step reads zero-padded copies.
  for (int64_t k = 0; k < K; k += 2 * kLanes) {
    const int64_t left = K - k;
    alignas(32) float xTail[MT][2 * kLanes];
    alignas(16) uint8_t codeTail[NR][2 * kLanes];
    const float* xs[MT];
    const uint8_t* cs[NR];
    for (int i = 0; i < MT; ++i) xs[i] = xr[i] + k;
    for (int r = 0; r < NR; ++r) cs[r] = row[r] + k;
    if (left < 2 * kLanes) {
      for (int i = 0; i < MT; ++i) {
        for (int j = 0; j < 2 * kLanes; ++j) xTail[i][j] = j < left ? xs[i][j] : 0.0f;
        xs[i] = xTail[i];
      }
      for (int r = 0; r < NR; ++r) {
        for (int j = 0; j < 2 * kLanes; ++j) codeTail[r][j] = j < left ? cs[r][j] : 0;
        cs[r] = codeTail[r];
      }
    }
    if (k % kPrefetchBytes == 0)
      for (int r = 0; r < NR; ++r)
        _mm_prefetch(reinterpret_cast<const char*>(row[r] + NR * K + k), _MM_HINT_T0);
    __m256 x0[MT], x1[MT];
    for (int i = 0; i < MT; ++i) {
      x0[i] = _mm256_loadu_ps(xs[i]);
      x1[i] = _mm256_loadu_ps(xs[i] + kLanes);
    }
    for (int r = 0; r < NR; ++r) {
      const __m256i h = _mm256_and_si256(
          _mm256_slli_epi16(
              _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(cs[r]))), 7),
          signAndMagnitude);
      const __m256 w0 = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
      const __m256 w1 = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
      for (int i = 0; i < MT; ++i) {
        acc[i][r] = _mm256_fmadd_ps(w0, x0[i], acc[i][r]);
        acc[i][r] = _mm256_fmadd_ps(w1, x1[i], acc[i][r]);
      }
    }
  }
  for (int i = 0; i < MT; ++i) {
    float* y = a.y + (t + i) * a.y_stride;
    for (int r = 0; r < NR; ++r) {
      const float scale =
          256.0f * (w.channel_scales ? w.channel_scales[n + r] : 1.0f) * w.global_scale;
      y[n + r] = finishOutput(reduce(acc[i][r]), scale, a.bias ? a.bias + n + r : nullptr);
    }
  }
}

template <QuantFormat F, GroupScaleType S, int MT, int NR>
inline void tile(const QuantLinearArgs& a, int64_t t, int64_t n) {
  if constexpr (F == QuantFormat::kFp8) tileFp8<MT, NR>(a, t, n);
  else tile4<F, S, MT, NR>(a, t, n);
}

template <QuantFormat F, GroupScaleType S, int NR>
inline void rowsForTokens(const QuantLinearArgs& a, int64_t t0, int64_t t1, int64_t n) {
  int64_t t = t0;
  for (; t + kTileTokens <= t1; t += kTileTokens) tile<F, S, kTileTokens, NR>(a, t, n);
  if (t < t1) tile<F, S, 1, NR>(a, t, n);
}

template <QuantFormat F, GroupScaleType S>
void linearFormat(const QuantLinearArgs& a, int64_t n0, int64_t n1) {
  int64_t tokenChunk = kTokenChunkFloats / (a.xq_stride > 0 ? a.xq_stride : 1);
  if (tokenChunk < 1) tokenChunk = 1;
  for (int64_t t0 = 0; t0 < a.T; t0 += tokenChunk) {
    const int64_t t1 = a.T < t0 + tokenChunk ? a.T : t0 + tokenChunk;
    int64_t n = n0;
    if (t1 - t0 == 1) {
      for (; n + kDecodeRows <= n1; n += kDecodeRows) tile<F, S, 1, kDecodeRows>(a, t0, n);
      for (; n < n1; ++n) tile<F, S, 1, 1>(a, t0, n);
      continue;
    }
    for (; n + kTileRows <= n1; n += kTileRows) rowsForTokens<F, S, kTileRows>(a, t0, t1, n);
    for (; n < n1; ++n) rowsForTokens<F, S, 1>(a, t0, t1, n);
  }
}

template <QuantFormat F>
void linearInt4(const QuantLinearArgs& a, int64_t n0, int64_t n1) {
  switch (a.w->scale_type) {
    case GroupScaleType::kF16: linearFormat<F, GroupScaleType::kF16>(a, n0, n1); break;
    case GroupScaleType::kBF16: linearFormat<F, GroupScaleType::kBF16>(a, n0, n1); break;
    case GroupScaleType::kF32: linearFormat<F, GroupScaleType::kF32>(a, n0, n1); break;
  }
}

void linearAvx2(const QuantLinearArgs& a, int64_t n0, int64_t n1) {
  switch (a.w->format) {
    case QuantFormat::kInt4Min: linearInt4<QuantFormat::kInt4Min>(a, n0, n1); break;
    case QuantFormat::kInt4Zero: linearInt4<QuantFormat::kInt4Zero>(a, n0, n1); break;
    // The scale type matters to int4 only.
    case QuantFormat::kFp8:
      linearFormat<QuantFormat::kFp8, GroupScaleType::kF16>(a, n0, n1);
      break;
    case QuantFormat::kNvfp4:
      linearFormat<QuantFormat::kNvfp4, GroupScaleType::kF16>(a, n0, n1);
      break;
    case QuantFormat::kMxfp4:
      linearFormat<QuantFormat::kMxfp4, GroupScaleType::kF16>(a, n0, n1);
      break;
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
namespace {

int64_t preparedFloatsAvx2(const QuantMatrix& w) { return lanePreparedFloats(w, kLanes); }
void prepareAvx2(const QuantMatrix& w, const float* x, float* out) {
  prepareLanes(w, x, out, kLanes);
}

}  // namespace

const QuantKernels& avx2QuantKernels() {
  static const QuantKernels kernels = [] {
    QuantKernels k;
    k.level = SimdLevel::kAvx2;
    k.prepared_floats = preparedFloatsAvx2;
    k.prepare = prepareAvx2;
    k.linear = linearAvx2;
    return k;
  }();
  return kernels;
}

}  // namespace ingot

#else  // not x86-64 GCC/Clang

namespace ingot {
const QuantKernels& avx2QuantKernels() { return scalarQuantKernels(); }
}  // namespace ingot

#endif
