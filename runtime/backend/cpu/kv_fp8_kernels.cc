// FP8 KV row decoders (scalar, AVX2, AVX-512), chosen at run time by SimdLevel.
#include <cstdint>

#include "runtime/backend/cpu/kv_fp8.h"
#include "runtime/backend/cpu/quant_formats.h"

namespace ingot {
namespace {

void decodeRowsScalar(const uint8_t* codes, int64_t stride, int64_t rows, int64_t D,
                      float scale, float* out, int64_t out_stride) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t d = 0; d < D; ++d)
      out[r * out_stride + d] = e4m3fnToF32(codes[r * stride + d]) * scale;
}

}  // namespace
}  // namespace ingot

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

// Only internal-linkage code in the target regions (see kernels_avx512.cc for why).
// The decode is the f16 bit trick of quant_kernels_avx512.cc: a sign-extended E4M3 code
// shifted left by 7 and masked is the f16 with the same sign, exponent and mantissa bits,
// i.e. the E4M3 value / 256 exactly (subnormals included); times 256 * scale, exact since
// the scale is a power of two. NaN codes (never written) would read as +-480 * scale.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,fma,f16c")
#endif
namespace ingot {
namespace {

inline __m512 e4m3x16(__m128i codes, __m512 factor) {
  const __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(codes), 7),
                                     _mm256_set1_epi16(static_cast<short>(0xBF80)));
  return _mm512_mul_ps(_mm512_cvtph_ps(h), factor);
}

void decodeRowsAvx512(const uint8_t* codes, int64_t stride, int64_t rows, int64_t D,
                      float scale, float* out, int64_t out_stride) {
  const __m512 factor = _mm512_set1_ps(scale * 256.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* c = codes + r * stride;
    float* o = out + r * out_stride;
    int64_t d = 0;
    for (; d + 16 <= D; d += 16)
      _mm512_storeu_ps(o + d, e4m3x16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c + d)),
                                      factor));
    if (d < D) {
      const __mmask16 m = static_cast<__mmask16>((1u << (D - d)) - 1u);
      _mm512_mask_storeu_ps(o + d, m, e4m3x16(_mm_maskz_loadu_epi8(m, c + d), factor));
    }
  }
}

}  // namespace
}  // namespace ingot
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
namespace ingot {
namespace {

inline __m256 e4m3x8(__m128i codes, __m256 factor) {
  const __m128i h = _mm_and_si128(_mm_slli_epi16(_mm_cvtepi8_epi16(codes), 7),
                                  _mm_set1_epi16(static_cast<short>(0xBF80)));
  return _mm256_mul_ps(_mm256_cvtph_ps(h), factor);
}

void decodeRowsAvx2(const uint8_t* codes, int64_t stride, int64_t rows, int64_t D, float scale,
                    float* out, int64_t out_stride) {
  const __m256 factor = _mm256_set1_ps(scale * 256.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* c = codes + r * stride;
    float* o = out + r * out_stride;
    int64_t d = 0;
    for (; d + 8 <= D; d += 8)
      _mm256_storeu_ps(o + d, e4m3x8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(c + d)),
                                     factor));
    for (; d < D; ++d) o[d] = static_cast<float>(_cvtsh_ss(static_cast<unsigned short>(
                                  (static_cast<uint32_t>(static_cast<int32_t>(static_cast<int8_t>(c[d]))) << 7) &
                                  0xBF80))) * (scale * 256.0f);
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
Fp8RowsDecoder fp8RowsDecoder(SimdLevel level) {
  switch (level) {
    case SimdLevel::kAvx512:
    case SimdLevel::kAvx512Bf16: return decodeRowsAvx512;
    case SimdLevel::kAvx2: return decodeRowsAvx2;
    default: return decodeRowsScalar;
  }
}
}  // namespace ingot

#else  // not x86-64 GCC/Clang

namespace ingot {
Fp8RowsDecoder fp8RowsDecoder(SimdLevel) { return decodeRowsScalar; }
}  // namespace ingot

#endif
