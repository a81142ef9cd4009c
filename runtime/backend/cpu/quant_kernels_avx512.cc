// AVX-512 quantized-linear kernels (16 f32 lanes), compiled for that target only.
#include "runtime/backend/cpu/quant_linear.h"
#include "runtime/backend/cpu/quant_linear_layout.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

// Only internal-linkage code below (see kernels_avx512.cc for why).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")
#endif

namespace ingot {
namespace {

constexpr int kLanes = 16;
/// A row chunk of 4-bit codes: 16 32-bit words of 8 codes, 64 bytes (one cache line).
constexpr int64_t kChunk = 8 * kLanes;
constexpr int64_t kChunkBytes = kChunk / 2;
/// One token: 8 rows at a time keep 8 independent FMA chains in flight.
constexpr int kDecodeRows = 8;
/// Several tokens: 4 tokens x 2 rows share every decoded code vector.
constexpr int kTileTokens = 4;
constexpr int kTileRows = 2;
/// Prepared activations of the tokens in flight stay in L2 (512 KiB of floats).
constexpr int64_t kTokenChunkFloats = 128 * 1024;
/// Bytes per prefetch (a cache line).
constexpr int64_t kPrefetchBytes = 64;

inline __mmask16 laneMask(int64_t n) {
  return n >= kLanes ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1u);
}

/// Elements i.. of an int4 scale or zero/min tensor as f32 (lanes past `m` are 0).
template <GroupScaleType S>
inline __m512 loadGroupValues(const void* base, int64_t i, __mmask16 m) {
  if constexpr (S == GroupScaleType::kF16) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(base) + i));
  } else if constexpr (S == GroupScaleType::kBF16) {
    const __m256i h = _mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(base) + i);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else {
    return _mm512_maskz_loadu_ps(m, static_cast<const float*>(base) + i);
  }
}

/// 16 f8E4M3FN codes as f32 divided by 256, exactly: the sign-extended code shifted left by
/// 7 and masked is the f16 with the same sign, exponent and mantissa bits (f16 bias 15 vs 7,
/// subnormals included). NaN codes come out as +-480 / 256.
inline __m512 e4m3Over256(__m128i codes) {
  const __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(codes), 7),
                                     _mm256_set1_epi16(static_cast<short>(0xBF80)));
  return _mm512_cvtph_ps(h);
}

/// Scales of groups g0.. of row n as f32 (lanes past `m` are 0).
template <QuantFormat F, GroupScaleType S>
inline __m512 loadBlockScales(const QuantMatrix& w, int64_t n, int64_t g0, __mmask16 m) {
  const int64_t i = n * w.groups() + g0;
  if constexpr (F == QuantFormat::kNvfp4) {
    const __m128i b = _mm_maskz_loadu_epi8(m, static_cast<const uint8_t*>(w.scales) + i);
    const __m512 s = _mm512_mul_ps(e4m3Over256(b), _mm512_set1_ps(256.0f));
    const __m128i mag = _mm_and_si128(b, _mm_set1_epi8(0x7f));
    const __mmask16 nan = _mm_cmpeq_epi8_mask(mag, _mm_set1_epi8(0x7f));
    return _mm512_mask_mov_ps(s, nan, _mm512_set1_ps(__builtin_nanf("")));
  } else if constexpr (F == QuantFormat::kMxfp4) {
    const __m512i e =
        _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, static_cast<const uint8_t*>(w.scales) + i));
    __m512i bits = _mm512_slli_epi32(e, 23);  // 2^(e - 127) for e in 1..254
    bits = _mm512_mask_mov_epi32(bits, _mm512_mask_cmpeq_epi32_mask(m, e, _mm512_setzero_si512()),
                                 _mm512_set1_epi32(0x00400000));  // 2^-127, subnormal
    bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(e, _mm512_set1_epi32(255)),
                                 _mm512_set1_epi32(0x7fc00000));  // NaN
    return _mm512_castsi512_ps(bits);
  } else {
    return loadGroupValues<S>(w.scales, i, m);
  }
}

constexpr bool isInt4(QuantFormat f) {
  return f == QuantFormat::kInt4Min || f == QuantFormat::kInt4Zero;
}

/// Code J of every word of d as f32: the integer for int4, the E2M1 value (by `table`) for fp4.
template <QuantFormat F, int J>
inline __m512 decodeCodes(__m512i d, __m512 table) {
  if constexpr (!isInt4(F)) {
    __m512i v = d;
    if constexpr (J > 0) v = _mm512_srli_epi32(d, 4 * J);
    return _mm512_permutexvar_ps(v, table);  // reads the low 4 bits of each index
  } else if constexpr (J == 7) {
    return _mm512_cvtepi32_ps(_mm512_srli_epi32(d, 28));
  } else {  // in place (see int4ActivationScale): q * 16^J
    return _mm512_cvtepi32_ps(_mm512_and_si512(d, _mm512_set1_epi32(15 << (4 * J))));
  }
}

/// p[i][r] (+)= code J of row r's chunk times token i's matching activations.
template <QuantFormat F, int MT, int NR, int J>
inline void codeStep(const __m512i (&d)[NR], const float* const (&x)[MT], __m512 table,
                     __m512 (&p)[MT][NR]) {
  __m512 xv[MT];
  for (int i = 0; i < MT; ++i) xv[i] = _mm512_loadu_ps(x[i] + J * kLanes);
  for (int r = 0; r < NR; ++r) {
    const __m512 q = decodeCodes<F, J>(d[r], table);
    for (int i = 0; i < MT; ++i)
      p[i][r] = J == 0 ? _mm512_mul_ps(q, xv[i]) : _mm512_fmadd_ps(q, xv[i], p[i][r]);
  }
}

/// Fetches the scale (and zero/min) bytes that the next row tile reads for groups g0.. .
/// (the first and the last byte's lines: rows of scales need not start on a line).
template <QuantFormat F, GroupScaleType S, int NR>
inline void prefetchNextScales(const QuantMatrix& w, int64_t n, int64_t g0) {
  const int64_t bytes = isInt4(F) ? (S == GroupScaleType::kF32 ? 4 : 2) : 1;
  const int64_t last = kLanes * bytes - 1;
  for (int r = NR; r < 2 * NR; ++r) {
    const char* s = static_cast<const char*>(w.scales) + ((n + r) * w.groups() + g0) * bytes;
    _mm_prefetch(s, _MM_HINT_T0);
    _mm_prefetch(s + last, _MM_HINT_T0);
    if constexpr (isInt4(F)) {
      const char* z = static_cast<const char*>(w.zeros) + ((n + r) * w.groups() + g0) * bytes;
      _mm_prefetch(z, _MM_HINT_T0);
      _mm_prefetch(z + last, _MM_HINT_T0);
    }
  }
}

/// MT tokens x NR rows of a 4-bit format. Per 64-byte chunk, p = sum over the 8 code
/// positions of codes times x (lane L covers 8 consecutive elements of one block), then
/// acc += p * (each lane's block scale); int4 adds its min/zero term per 16 groups from the
/// group sums of x. The order depends only on K and the block.
template <QuantFormat F, GroupScaleType S, int MT, int NR>
inline void tile4(const QuantLinearArgs& a, int64_t t, int64_t n) {
  const QuantMatrix& w = *a.w;
  const int64_t G = w.block, groups = w.groups(), rowBytes = w.rowBytes();
  const int64_t chunks = (w.K + kChunk - 1) / kChunk;
  const int64_t sumsOffset = chunks * kChunk;
  const __m128i shift = _mm_cvtsi32_si128(blockShift(G));
  const __m512i laneFirst = _mm512_setr_epi32(0, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96,
                                              104, 112, 120);
  const __m512 table = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f,
                                      -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f);
  const uint8_t* row[NR];
  for (int r = 0; r < NR; ++r) row[r] = w.codes + (n + r) * rowBytes;
  const float* xr[MT];
  for (int i = 0; i < MT; ++i) xr[i] = a.xq + (t + i) * a.xq_stride;
  __m512 acc[MT][NR];
  for (int i = 0; i < MT; ++i)
    for (int r = 0; r < NR; ++r) acc[i][r] = _mm512_setzero_ps();

  int64_t c = 0;
  for (int64_t g0 = 0; g0 < groups; g0 += kLanes) {
    const __mmask16 gm = laneMask(groups - g0);
    __m512 scale[NR];
    for (int r = 0; r < NR; ++r) scale[r] = loadBlockScales<F, S>(w, n + r, g0, gm);
    prefetchNextScales<F, S, NR>(w, n, g0);
    // The chunks holding groups [g0, g0 + 16): G / 8 of them (G >= 16), fewer at the end.
    const int64_t cEnd = (g0 + kLanes) * G / kChunk < chunks ? (g0 + kLanes) * G / kChunk : chunks;
    for (; c < cEnd; ++c) {
      // Lane L holds elements c * 128 + 8L .. + 7, all of group g0 + idx[L].
      const __m512i idx = _mm512_srl_epi32(
          _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(c * kChunk - g0 * G)), laneFirst),
          shift);
      const int64_t left = rowBytes - c * kChunkBytes;
      __m512i d[NR];
      if (left >= kChunkBytes) {  // plain loads: measurably faster than masked ones from DRAM
        for (int r = 0; r < NR; ++r) d[r] = _mm512_loadu_si512(row[r] + c * kChunkBytes);
      } else {
        const __mmask16 dm = laneMask(left / 4);
        for (int r = 0; r < NR; ++r) d[r] = _mm512_maskz_loadu_epi32(dm, row[r] + c * kChunkBytes);
      }
      // Decode streams the codes once: fetch the next row tile's chunk one tile ahead, so
      // the short row streams never wait on DRAM latency.
      for (int r = 0; r < NR; ++r)
        _mm_prefetch(reinterpret_cast<const char*>(row[r] + NR * rowBytes + c * kChunkBytes),
                     _MM_HINT_T0);
      const float* xc[MT];
      for (int i = 0; i < MT; ++i) xc[i] = xr[i] + c * kChunk;
      __m512 p[MT][NR];
      codeStep<F, MT, NR, 0>(d, xc, table, p);
      codeStep<F, MT, NR, 1>(d, xc, table, p);
      codeStep<F, MT, NR, 2>(d, xc, table, p);
      codeStep<F, MT, NR, 3>(d, xc, table, p);
      codeStep<F, MT, NR, 4>(d, xc, table, p);
      codeStep<F, MT, NR, 5>(d, xc, table, p);
      codeStep<F, MT, NR, 6>(d, xc, table, p);
      codeStep<F, MT, NR, 7>(d, xc, table, p);
      for (int r = 0; r < NR; ++r) {
        const __m512 s = _mm512_permutexvar_ps(idx, scale[r]);
        for (int i = 0; i < MT; ++i) acc[i][r] = _mm512_fmadd_ps(p[i][r], s, acc[i][r]);
      }
    }
    if constexpr (isInt4(F)) {
      // Min: + sum_g m_g * xsum_g.  Zero: - sum_g s_g z_g * xsum_g.
      for (int r = 0; r < NR; ++r) {
        const __m512 z = loadGroupValues<S>(w.zeros, (n + r) * groups + g0, gm);
        const __m512 coef = F == QuantFormat::kInt4Min ? z : _mm512_mul_ps(scale[r], z);
        for (int i = 0; i < MT; ++i) {
          const __m512 sums = _mm512_loadu_ps(xr[i] + sumsOffset + g0);
          acc[i][r] = F == QuantFormat::kInt4Min ? _mm512_fmadd_ps(coef, sums, acc[i][r])
                                                 : _mm512_fnmadd_ps(coef, sums, acc[i][r]);
        }
      }
    }
  }
  for (int i = 0; i < MT; ++i) {
    float* y = a.y + (t + i) * a.y_stride;
    for (int r = 0; r < NR; ++r) {
      y[n + r] = finishOutput(_mm512_reduce_add_ps(acc[i][r]), w.global_scale,
                              a.bias ? a.bias + n + r : nullptr);
    }
  }
}

/// MT tokens x NR rows of fp8: two 16-lane FMAs per 32 codes into one accumulator, then the
/// row's scale (times 256, undoing e4m3Over256).
template <int MT, int NR>
inline void tileFp8(const QuantLinearArgs& a, int64_t t, int64_t n) {
  const QuantMatrix& w = *a.w;
  const int64_t K = w.K;
  const uint8_t* row[NR];
  for (int r = 0; r < NR; ++r) row[r] = w.codes + (n + r) * K;
  const float* xr[MT];
  for (int i = 0; i < MT; ++i) xr[i] = a.xq + (t + i) * a.xq_stride;
  __m512 acc[MT][NR];
  for (int i = 0; i < MT; ++i)
    for (int r = 0; r < NR; ++r) acc[i][r] = _mm512_setzero_ps();
  const __m512i signAndMagnitude = _mm512_set1_epi16(static_cast<short>(0xBF80));
  int64_t k = 0;
  for (; k + 2 * kLanes <= K; k += 2 * kLanes) {
    __m512 x0[MT], x1[MT];
    for (int i = 0; i < MT; ++i) {
      x0[i] = _mm512_loadu_ps(xr[i] + k);
      x1[i] = _mm512_loadu_ps(xr[i] + k + kLanes);
    }
    if (k % kPrefetchBytes == 0)
      for (int r = 0; r < NR; ++r)
        _mm_prefetch(reinterpret_cast<const char*>(row[r] + NR * K + k), _MM_HINT_T0);
    for (int r = 0; r < NR; ++r) {
      const __m512i h = _mm512_and_si512(
          _mm512_slli_epi16(_mm512_cvtepi8_epi16(
                                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row[r] + k))),
                            7),
          signAndMagnitude);
      const __m512 w0 = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
      const __m512 w1 = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
      for (int i = 0; i < MT; ++i) {
        acc[i][r] = _mm512_fmadd_ps(w0, x0[i], acc[i][r]);
        acc[i][r] = _mm512_fmadd_ps(w1, x1[i], acc[i][r]);
      }
    }
  }
  if (k < K) {
    const int64_t left = K - k;  // 1..31
    const __mmask32 bm = static_cast<__mmask32>((1u << left) - 1u);
    const __mmask16 m0 = laneMask(left), m1 = laneMask(left > kLanes ? left - kLanes : 0);
    __m512 x0[MT], x1[MT];
    for (int i = 0; i < MT; ++i) {
      x0[i] = _mm512_maskz_loadu_ps(m0, xr[i] + k);
      x1[i] = _mm512_maskz_loadu_ps(m1, xr[i] + k + kLanes);
    }
    for (int r = 0; r < NR; ++r) {
      const __m512i h = _mm512_and_si512(
          _mm512_slli_epi16(_mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(bm, row[r] + k)), 7),
          signAndMagnitude);
      const __m512 w0 = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
      const __m512 w1 = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
      for (int i = 0; i < MT; ++i) {
        acc[i][r] = _mm512_fmadd_ps(w0, x0[i], acc[i][r]);
        acc[i][r] = _mm512_fmadd_ps(w1, x1[i], acc[i][r]);
      }
    }
  }
  for (int i = 0; i < MT; ++i) {
    float* y = a.y + (t + i) * a.y_stride;
    for (int r = 0; r < NR; ++r) {
      const float scale =
          256.0f * (w.channel_scales ? w.channel_scales[n + r] : 1.0f) * w.global_scale;
      y[n + r] =
          finishOutput(_mm512_reduce_add_ps(acc[i][r]), scale, a.bias ? a.bias + n + r : nullptr);
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
  switch (t1 - t) {
    case 3: tile<F, S, 3, NR>(a, t, n); break;
    case 2: tile<F, S, 2, NR>(a, t, n); break;
    case 1: tile<F, S, 1, NR>(a, t, n); break;
    default: break;
  }
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
      for (; n + 4 <= n1; n += 4) tile<F, S, 1, 4>(a, t0, n);
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

void linearAvx512(const QuantLinearArgs& a, int64_t n0, int64_t n1) {
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

int64_t preparedFloatsAvx512(const QuantMatrix& w) { return lanePreparedFloats(w, kLanes); }
void prepareAvx512(const QuantMatrix& w, const float* x, float* out) {
  prepareLanes(w, x, out, kLanes);
}

}  // namespace

const QuantKernels& avx512QuantKernels() {
  static const QuantKernels kernels = [] {
    QuantKernels k;
    k.level = SimdLevel::kAvx512;
    k.prepared_floats = preparedFloatsAvx512;
    k.prepare = prepareAvx512;
    k.linear = linearAvx512;
    return k;
  }();
  return kernels;
}

}  // namespace ingot

#else  // not x86-64 GCC/Clang

namespace ingot {
const QuantKernels& avx512QuantKernels() { return scalarQuantKernels(); }
}  // namespace ingot

#endif
