//===- Dequantize.cpp - ggml block formats to f32 ---------------------------===//
//
// Each dequantizer follows the block struct of ggml-common.h and evaluates the same f32
// expressions in the same order as ggml's dequantize_row_* (no FMA: built with
// -ffp-contract=off), so results match ggml and gguf-py bit for bit.
//
//===----------------------------------------------------------------------===//
#include "compiler/import/gguf/Dequantize.h"

#include <cstring>
#include <string>

namespace ingot::gguf {
namespace {

static_assert(sizeof(float) == 4, "f32 is 4 bytes");

uint16_t loadU16(const uint8_t *p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

float loadHalf(const uint8_t *p) { return halfToFloat(loadU16(p)); }

// Byte sizes of the k-quant super-blocks (ggml-common.h: block_q4_K, block_q5_K,
// block_q6_K); they match the table in GgmlType.cpp.
constexpr uint32_t kScaleBytesK = 12; // packed 6-bit scales and mins of Q4_K / Q5_K
constexpr uint32_t kQ4_KBlockBytes = 2 + 2 + kScaleBytesK + kQK_K / 2;
constexpr uint32_t kQ5_KBlockBytes = 2 + 2 + kScaleBytesK + kQK_K / 8 + kQK_K / 2;
constexpr uint32_t kQ6_KBlockBytes = kQK_K / 2 + kQK_K / 4 + kQK_K / 16 + 2;

void dequantizeF32(const uint8_t *src, uint64_t n, float *dst) {
  std::memcpy(dst, src, n * sizeof(float));
}

void dequantizeF16(const uint8_t *src, uint64_t n, float *dst) {
  for (uint64_t i = 0; i < n; ++i)
    dst[i] = loadHalf(src + 2 * i);
}

void dequantizeBF16(const uint8_t *src, uint64_t n, float *dst) {
  for (uint64_t i = 0; i < n; ++i)
    dst[i] = bfloat16ToFloat(loadU16(src + 2 * i));
}

void dequantizeQ8_0(const uint8_t *src, uint64_t numBlocks, float *dst) {
  for (uint64_t b = 0; b < numBlocks; ++b, src += kQ8_0BlockBytes, dst += kQK32) {
    const float d = loadHalf(src);
    for (uint32_t i = 0; i < kQK32; ++i)
      dst[i] = static_cast<float>(static_cast<int8_t>(src[2 + i])) * d;
  }
}

void dequantizeQ4_0(const uint8_t *src, uint64_t numBlocks, float *dst) {
  for (uint64_t b = 0; b < numBlocks; ++b, src += kQ4_0BlockBytes, dst += kQK32) {
    const float d = loadHalf(src);
    const uint8_t *qs = src + 2;
    for (uint32_t i = 0; i < kQK32 / 2; ++i) {
      dst[i] = static_cast<float>((qs[i] & 0x0F) - 8) * d;
      dst[i + kQK32 / 2] = static_cast<float>((qs[i] >> 4) - 8) * d;
    }
  }
}

/// Q5_0 / Q5_1: f16 scale d (Q5_1: then f16 min m), 32 high bits (element i's in bit i,
/// little-endian), 16 bytes of low nibbles (element i < 16 low, i + 16 high). Q5_0 values are
/// (q - 16) d, Q5_1 values q d + m.
template <bool WithMin>
void dequantizeQ5(const uint8_t *src, uint64_t numBlocks, float *dst) {
  constexpr uint32_t blockBytes = WithMin ? kQ5_1BlockBytes : kQ5_0BlockBytes;
  constexpr uint32_t highAt = WithMin ? 4 : 2;
  for (uint64_t b = 0; b < numBlocks; ++b, src += blockBytes, dst += kQK32) {
    const float d = loadHalf(src);
    const float m = WithMin ? loadHalf(src + 2) : 0.0f;
    const uint32_t high = static_cast<uint32_t>(src[highAt]) | (src[highAt + 1] << 8) |
                          (src[highAt + 2] << 16) | (static_cast<uint32_t>(src[highAt + 3]) << 24);
    const uint8_t *qs = src + highAt + 4;
    for (uint32_t i = 0; i < kQK32 / 2; ++i) {
      const int lo = (qs[i] & 0x0F) | (((high >> i) & 1) << 4);
      const int hi = (qs[i] >> 4) | (((high >> (i + kQK32 / 2)) & 1) << 4);
      if (WithMin) {
        dst[i] = static_cast<float>(lo) * d + m;
        dst[i + kQK32 / 2] = static_cast<float>(hi) * d + m;
      } else {
        dst[i] = static_cast<float>(lo - 16) * d;
        dst[i + kQK32 / 2] = static_cast<float>(hi - 16) * d;
      }
    }
  }
}

void dequantizeQ4_1(const uint8_t *src, uint64_t numBlocks, float *dst) {
  for (uint64_t b = 0; b < numBlocks; ++b, src += kQ4_1BlockBytes, dst += kQK32) {
    const float d = loadHalf(src);
    const float m = loadHalf(src + 2);
    const uint8_t *qs = src + 4;
    for (uint32_t i = 0; i < kQK32 / 2; ++i) {
      dst[i] = static_cast<float>(qs[i] & 0x0F) * d + m;
      dst[i + kQK32 / 2] = static_cast<float>(qs[i] >> 4) * d + m;
    }
  }
}

// Q4_K / Q5_K pack 8 six-bit scales and 8 six-bit mins into 12 bytes: bytes 0..3 hold
// scales 0..3 (low 6 bits) and the top 2 bits of scales 4..7; bytes 4..7 likewise for
// the mins; bytes 8..11 hold the low 4 bits of scale j+4 (low nibble) and min j+4 (high).
void unpackScaleMinK(const uint8_t *packed, uint32_t j, uint8_t *scale, uint8_t *min) {
  if (j < 4) {
    *scale = packed[j] & 63;
    *min = packed[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((packed[j + 4] & 0x0F) | ((packed[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((packed[j + 4] >> 4) | ((packed[j] >> 6) << 4));
  }
}

void dequantizeQ4_K(const uint8_t *src, uint64_t numBlocks, float *dst) {
  for (uint64_t b = 0; b < numBlocks; ++b, src += kQ4_KBlockBytes) {
    const float d = loadHalf(src);
    const float dmin = loadHalf(src + 2);
    const uint8_t *scales = src + 4;
    const uint8_t *qs = scales + kScaleBytesK;
    // 4 chunks of 64 elements; each uses 32 bytes: low nibbles first, then high.
    for (uint32_t chunk = 0; chunk < kQK_K / 64; ++chunk, qs += 32) {
      uint8_t sc, m;
      unpackScaleMinK(scales, 2 * chunk, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      unpackScaleMinK(scales, 2 * chunk + 1, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (uint32_t l = 0; l < 32; ++l)
        *dst++ = d1 * static_cast<float>(qs[l] & 0x0F) - m1;
      for (uint32_t l = 0; l < 32; ++l)
        *dst++ = d2 * static_cast<float>(qs[l] >> 4) - m2;
    }
  }
}

void dequantizeQ5_K(const uint8_t *src, uint64_t numBlocks, float *dst) {
  for (uint64_t b = 0; b < numBlocks; ++b, src += kQ5_KBlockBytes) {
    const float d = loadHalf(src);
    const float dmin = loadHalf(src + 2);
    const uint8_t *scales = src + 4;
    const uint8_t *qh = scales + kScaleBytesK; // bit s of qh[l]: 5th bit of sub-block s
    const uint8_t *ql = qh + kQK_K / 8;
    for (uint32_t chunk = 0; chunk < kQK_K / 64; ++chunk, ql += 32) {
      uint8_t sc, m;
      unpackScaleMinK(scales, 2 * chunk, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      unpackScaleMinK(scales, 2 * chunk + 1, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      const uint8_t bit1 = static_cast<uint8_t>(1u << (2 * chunk));
      const uint8_t bit2 = static_cast<uint8_t>(2u << (2 * chunk));
      for (uint32_t l = 0; l < 32; ++l)
        *dst++ = d1 * static_cast<float>((ql[l] & 0x0F) + ((qh[l] & bit1) ? 16 : 0)) - m1;
      for (uint32_t l = 0; l < 32; ++l)
        *dst++ = d2 * static_cast<float>((ql[l] >> 4) + ((qh[l] & bit2) ? 16 : 0)) - m2;
    }
  }
}

void dequantizeQ6_K(const uint8_t *src, uint64_t numBlocks, float *dst) {
  for (uint64_t b = 0; b < numBlocks; ++b, src += kQ6_KBlockBytes) {
    const uint8_t *ql = src;                // low 4 bits, 128 bytes
    const uint8_t *qh = ql + kQK_K / 2;     // high 2 bits, 64 bytes
    const uint8_t *sc = qh + kQK_K / 4;     // 16 int8 scales, one per 16 elements
    const float d = loadHalf(sc + kQK_K / 16);
    // Two halves of 128 elements; in each, element l + 32k (l < 32) takes its low bits
    // from ql[l + 32 (k & 1)] (nibble k >> 1) and its high bits from qh[l] bits 2k..2k+1.
    for (uint32_t half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8, dst += 128) {
      for (uint32_t l = 0; l < 32; ++l) {
        const uint32_t is = l / 16;
        const int q1 = static_cast<int>((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = static_cast<int>((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = static_cast<int>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = static_cast<int>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        dst[l] = d * static_cast<int8_t>(sc[is + 0]) * static_cast<float>(q1);
        dst[l + 32] = d * static_cast<int8_t>(sc[is + 2]) * static_cast<float>(q2);
        dst[l + 64] = d * static_cast<int8_t>(sc[is + 4]) * static_cast<float>(q3);
        dst[l + 96] = d * static_cast<int8_t>(sc[is + 6]) * static_cast<float>(q4);
      }
    }
  }
}

} // namespace

float halfToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1Fu;
  const uint32_t mantissa = bits & 0x3FFu;
  uint32_t out;
  if (exponent == 0x1F) {
    out = sign | 0x7F800000u | (mantissa << 13); // inf, NaN (payload kept)
  } else if (exponent != 0) {
    out = sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13);
  } else {
    // Zero or subnormal: mantissa * 2^-24, exact in f32 (a normal number there).
    float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    std::memcpy(&out, &magnitude, sizeof(out));
    out |= sign;
  }
  float result;
  std::memcpy(&result, &out, sizeof(result));
  return result;
}

float bfloat16ToFloat(uint16_t bits) {
  const uint32_t out = static_cast<uint32_t>(bits) << 16;
  float result;
  std::memcpy(&result, &out, sizeof(result));
  return result;
}

Status dequantizeRows(GgmlType type, const uint8_t *src, uint64_t numElements, float *dst) {
  if (!canDequantize(type))
    return unimplemented(std::string("cannot dequantize ggml type ") + ggmlTypeName(type) +
                         " (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)");
  const uint64_t blockSize = ggmlBlockSize(type);
  if (numElements % blockSize != 0)
    return invalidArgument(std::to_string(numElements) + " elements are not a whole number of " +
                           ggmlTypeName(type) + " blocks of " + std::to_string(blockSize));
  if (numElements == 0)
    return okStatus(); // src and dst may be null
  const uint64_t numBlocks = numElements / blockSize;
  switch (type) {
  case GgmlType::F32: dequantizeF32(src, numElements, dst); break;
  case GgmlType::F16: dequantizeF16(src, numElements, dst); break;
  case GgmlType::BF16: dequantizeBF16(src, numElements, dst); break;
  case GgmlType::Q8_0: dequantizeQ8_0(src, numBlocks, dst); break;
  case GgmlType::Q4_0: dequantizeQ4_0(src, numBlocks, dst); break;
  case GgmlType::Q4_1: dequantizeQ4_1(src, numBlocks, dst); break;
  case GgmlType::Q5_0: dequantizeQ5<false>(src, numBlocks, dst); break;
  case GgmlType::Q5_1: dequantizeQ5<true>(src, numBlocks, dst); break;
  case GgmlType::Q4_K: dequantizeQ4_K(src, numBlocks, dst); break;
  case GgmlType::Q5_K: dequantizeQ5_K(src, numBlocks, dst); break;
  case GgmlType::Q6_K: dequantizeQ6_K(src, numBlocks, dst); break;
  default: return internalError("dequantizer table out of sync for " + std::string(ggmlTypeName(type)));
  }
  return okStatus();
}

void decodeQ4_0Block(const uint8_t *block, float *scale, uint8_t q[32]) {
  *scale = loadHalf(block);
  for (uint32_t i = 0; i < kQK32 / 2; ++i) {
    q[i] = block[2 + i] & 0x0F;
    q[i + kQK32 / 2] = block[2 + i] >> 4;
  }
}

void decodeQ4_1Block(const uint8_t *block, float *scale, float *min, uint8_t q[32]) {
  *scale = loadHalf(block);
  *min = loadHalf(block + 2);
  for (uint32_t i = 0; i < kQK32 / 2; ++i) {
    q[i] = block[4 + i] & 0x0F;
    q[i + kQK32 / 2] = block[4 + i] >> 4;
  }
}

void decodeQ8_0Block(const uint8_t *block, float *scale, int8_t q[32]) {
  *scale = loadHalf(block);
  std::memcpy(q, block + 2, kQK32);
}

} // namespace ingot::gguf
