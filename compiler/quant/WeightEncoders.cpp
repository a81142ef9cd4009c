//===- WeightEncoders.cpp - quantized linear weights in artifact byte layout -===//
#include "compiler/quant/WeightEncoders.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "compiler/import/WeightConversion.h"
#include "compiler/import/gguf/Dequantize.h"
#include "compiler/quant/FloatFormats.h"

namespace ingot::quant {
namespace {

using importer::floatToF16;
using gguf::halfToFloat;

/// Bytes of the GGUF blocks (ggml's block_q4_0 / block_q4_1).
constexpr int64_t kQ4_0BlockBytes = 18;
constexpr int64_t kQ4_1BlockBytes = 20;

/// Stores nibble `value` as element `index` of a two-per-byte array (zeroed beforehand).
inline void setNibble(std::vector<uint8_t> &bytes, int64_t index, uint8_t value) {
  bytes[static_cast<size_t>(index / 2)] |= static_cast<uint8_t>((value & 0xF) << (4 * (index % 2)));
}
inline uint8_t getNibble(const std::vector<uint8_t> &bytes, int64_t index) {
  return (bytes[static_cast<size_t>(index / 2)] >> (4 * (index % 2))) & 0xF;
}

void storeF16(std::vector<uint8_t> &bytes, int64_t index, uint16_t bits) {
  std::memcpy(bytes.data() + 2 * index, &bits, 2);
}
float loadF16(const std::vector<uint8_t> &bytes, int64_t index) {
  uint16_t bits;
  std::memcpy(&bits, bytes.data() + 2 * index, 2);
  return halfToFloat(bits);
}
void storeF32(std::vector<uint8_t> &bytes, int64_t index, float value) {
  std::memcpy(bytes.data() + 4 * index, &value, 4);
}
float loadF32(const std::vector<uint8_t> &bytes, int64_t index) {
  float value;
  std::memcpy(&value, bytes.data() + 4 * index, 4);
  return value;
}

float absMax(const float *values, int64_t count) {
  float m = 0.0f;
  for (int64_t i = 0; i < count; ++i)
    m = std::max(m, std::fabs(values[i]));
  return m;
}

/// The f16 scale and min of an int4 group over [lo, hi]: scale = (hi - lo) / 15, min = lo.
struct Int4Range {
  uint16_t scaleBits, minBits;
  float scale, min; // the f16 values
  Int4Range(float lo, float hi)
      : scaleBits(floatToF16((hi - lo) / 15.0f)), minBits(floatToF16(lo)),
        scale(halfToFloat(scaleBits)), min(halfToFloat(minBits)) {}
  float code(float w) const {
    return scale > 0.0f ? std::clamp(std::nearbyint((w - min) / scale), 0.0f, 15.0f) : 0.0f;
  }
  /// Squared error over `count` values, weighted by `c` where given.
  float error(const float *w, const float *c, int64_t count) const {
    float e = 0.0f;
    for (int64_t i = 0; i < count; ++i) {
      float d = w[i] - (scale * code(w[i]) + min);
      e += (c ? c[i] : 1.0f) * d * d;
    }
    return e;
  }
};

/// Asymmetric int4 group: min = group minimum, scale = (max - min) / 15, both rounded to
/// f16 first so q is chosen against the values the runtime will use. MinError also tries
/// the range shrunk towards zero (kInt4ClipRatios) and keeps the least (weighted) error.
void encodeInt4MinGroup(const float *w, const float *c, int64_t count, int64_t first,
                        int64_t groupIndex, ScaleChoice choice, EncodedWeight &out) {
  auto [lo, hi] = std::minmax_element(w, w + count);
  Int4Range range(*lo, *hi);
  if (choice == ScaleChoice::MinError) {
    float best = range.error(w, c, count);
    for (float ratio : kInt4ClipRatios) {
      Int4Range candidate(*lo * ratio, *hi * ratio);
      float error = candidate.error(w, c, count);
      if (error < best) {
        best = error;
        range = candidate;
      }
    }
  }
  storeF16(out.scale, groupIndex, range.scaleBits);
  storeF16(out.offset, groupIndex, range.minBits);
  for (int64_t i = 0; i < count; ++i)
    setNibble(out.weight, first + i, static_cast<uint8_t>(range.code(w[i])));
}

/// Q4_0-style int4 group: scale = (signed value of largest magnitude) / -8, zero 8.
void encodeInt4ZeroGroup(const float *w, int64_t count, int64_t first, int64_t groupIndex,
                         EncodedWeight &out) {
  float extreme = 0.0f;
  for (int64_t i = 0; i < count; ++i)
    if (std::fabs(w[i]) > std::fabs(extreme))
      extreme = w[i];
  uint16_t scaleBits = floatToF16(extreme / -8.0f);
  storeF16(out.scale, groupIndex, scaleBits);
  storeF16(out.offset, groupIndex, floatToF16(kInt4Zero));
  float scale = halfToFloat(scaleBits);
  for (int64_t i = 0; i < count; ++i) {
    float q = scale != 0.0f ? std::nearbyint(w[i] / scale) + kInt4Zero : kInt4Zero;
    setNibble(out.weight, first + i, static_cast<uint8_t>(std::clamp(q, 0.0f, 15.0f)));
  }
}

void encodeFp8Row(const float *w, int64_t k, int64_t row, EncodedWeight &out) {
  float scale = absMax(w, k) / kE4M3Max;
  storeF32(out.scale, row, scale);
  uint8_t *q = out.weight.data() + row * k;
  for (int64_t i = 0; i < k; ++i)
    q[i] = scale > 0.0f ? floatToE4M3(w[i] / scale) : 0;
}

/// Squared error of a block of E2M1 values under step (scale) `step`, weighted by `c`
/// where given.
float e2m1BlockError(const float *w, const float *c, int64_t count, float step) {
  float error = 0.0f;
  for (int64_t i = 0; i < count; ++i) {
    float d = w[i] - e2m1ToFloat(floatToE2M1(w[i] / step)) * step;
    error += (c ? c[i] : 1.0f) * d * d;
  }
  return error;
}

/// E4M3 codes below the absmax scale tried by ScaleChoice::MinError (3 mantissa bits:
/// 6 codes reach down to about 0.6x), and the one above it.
constexpr int kNvfp4CodesBelow = 6, kNvfp4CodesAbove = 1;

void encodeNvfp4Block(const float *w, const float *c, int64_t first, int64_t blockIndex,
                      float global, ScaleChoice choice, EncodedWeight &out) {
  float blockMax = absMax(w, kNvfp4BlockSize);
  uint8_t scaleBits = global > 0.0f ? floatToE4M3(blockMax / (kE2M1Max * global)) : 0;
  if (choice == ScaleChoice::MinError && scaleBits != 0) {
    float best = e2m1BlockError(w, c, kNvfp4BlockSize, e4m3ToFloat(scaleBits) * global);
    const int center = scaleBits;
    for (int code = std::max(1, center - kNvfp4CodesBelow);
         code <= std::min(0x7E, center + kNvfp4CodesAbove); ++code) {
      float error =
          e2m1BlockError(w, c, kNvfp4BlockSize, e4m3ToFloat(static_cast<uint8_t>(code)) * global);
      if (error < best) {
        best = error;
        scaleBits = static_cast<uint8_t>(code);
      }
    }
  }
  out.scale[static_cast<size_t>(blockIndex)] = scaleBits;
  float step = e4m3ToFloat(scaleBits) * global;
  for (int64_t i = 0; i < kNvfp4BlockSize; ++i)
    setNibble(out.weight, first + i, step > 0.0f ? floatToE2M1(w[i] / step) : 0);
}

void encodeMxfp4Block(const float *w, const float *c, int64_t first, int64_t blockIndex,
                      ScaleChoice choice, EncodedWeight &out) {
  float blockMax = absMax(w, kMxfp4BlockSize);
  int exponent = blockMax > 0.0f ? floorLog2(blockMax) - kE2M1MaxExponent : kE8M0MinExponent;
  exponent = std::clamp(exponent, kE8M0MinExponent, kE8M0MaxExponent);
  // OCP's exponent lets the block maximum land in [4, 8), so values above 6 saturate; one
  // exponent more never saturates but halves the resolution. MinError keeps the better.
  if (choice == ScaleChoice::MinError && blockMax > 0.0f && exponent < kE8M0MaxExponent &&
      e2m1BlockError(w, c, kMxfp4BlockSize, std::ldexp(1.0f, exponent + 1)) <
          e2m1BlockError(w, c, kMxfp4BlockSize, std::ldexp(1.0f, exponent)))
    ++exponent;
  out.scale[static_cast<size_t>(blockIndex)] = exponentToE8M0(exponent);
  const float inverse = std::ldexp(1.0f, -exponent); // exact: a power of two in range
  for (int64_t i = 0; i < kMxfp4BlockSize; ++i)
    setNibble(out.weight, first + i, floatToE2M1(w[i] * inverse));
}

/// Bytes of each tensor of an encoded [n, k] weight.
EncodedWeight allocate(WeightEncoding encoding, int64_t n, int64_t k, int64_t group) {
  const size_t elements = static_cast<size_t>(n * k);
  const size_t blocks = static_cast<size_t>(n * (k / blockSizeOf(encoding, group, k)));
  EncodedWeight out;
  switch (encoding) {
  case WeightEncoding::Int4Min:
  case WeightEncoding::Int4Zero:
    out.weight.assign(elements / 2, 0);
    out.scale.assign(blocks * 2, 0);
    out.offset.assign(blocks * 2, 0);
    break;
  case WeightEncoding::Fp8PerChannel:
    out.weight.assign(elements, 0);
    out.scale.assign(static_cast<size_t>(n) * 4, 0);
    break;
  case WeightEncoding::Nvfp4:
    out.weight.assign(elements / 2, 0);
    out.scale.assign(blocks, 0);
    out.globalScale.assign(4, 0);
    break;
  case WeightEncoding::Mxfp4:
    out.weight.assign(elements / 2, 0);
    out.scale.assign(blocks, 0);
    break;
  }
  return out;
}

} // namespace

int64_t blockSizeOf(WeightEncoding encoding, int64_t group, int64_t k) {
  switch (encoding) {
  case WeightEncoding::Int4Min:
  case WeightEncoding::Int4Zero:
    return group;
  case WeightEncoding::Fp8PerChannel:
    return k;
  case WeightEncoding::Nvfp4:
    return kNvfp4BlockSize;
  case WeightEncoding::Mxfp4:
    return kMxfp4BlockSize;
  }
  return k;
}

Status checkEncodable(WeightEncoding encoding, int64_t n, int64_t k, int64_t group) {
  if (n <= 0 || k <= 0)
    return invalidArgument("cannot quantize a weight of shape [" + std::to_string(n) + ", " +
                           std::to_string(k) + "]");
  if (encoding == WeightEncoding::Int4Min || encoding == WeightEncoding::Int4Zero) {
    if (std::find(std::begin(kInt4GroupSizes), std::end(kInt4GroupSizes), group) ==
        std::end(kInt4GroupSizes))
      return invalidArgument("int4 group size " + std::to_string(group) +
                             " is not one of 32, 64, 128");
  }
  int64_t block = blockSizeOf(encoding, group, k);
  if (k % block != 0 || k % 2 != 0)
    return invalidArgument("input features K = " + std::to_string(k) +
                           " are not a multiple of the block size " + std::to_string(block));
  return okStatus();
}

StatusOr<EncodedWeight> encodeWeight(const float *values, int64_t n, int64_t k,
                                     WeightEncoding encoding, int64_t group, ScaleChoice choice,
                                     const float *columnWeights) {
  INGOT_RETURN_IF_ERROR(checkEncodable(encoding, n, k, group));
  if (columnWeights)
    for (int64_t i = 0; i < k; ++i)
      if (!(columnWeights[i] >= 0.0f) || !std::isfinite(columnWeights[i]))
        return invalidArgument("column weight " + std::to_string(i) + " is " +
                               std::to_string(columnWeights[i]) + ", not a finite value >= 0");
  for (int64_t i = 0; i < n * k; ++i)
    if (!std::isfinite(values[i]))
      return invalidArgument("cannot quantize a weight holding inf or NaN (element " +
                             std::to_string(i) + ")");
  const int64_t block = blockSizeOf(encoding, group, k);
  EncodedWeight out = allocate(encoding, n, k, group);
  float global = 0.0f;
  if (encoding == WeightEncoding::Nvfp4) {
    global = absMax(values, n * k) / (kE4M3Max * kE2M1Max);
    storeF32(out.globalScale, 0, global);
  }
  for (int64_t row = 0; row < n; ++row) {
    const float *w = values + row * k;
    if (encoding == WeightEncoding::Fp8PerChannel) {
      encodeFp8Row(w, k, row, out);
      continue;
    }
    for (int64_t b = 0; b < k / block; ++b) {
      const int64_t first = row * k + b * block, blockIndex = row * (k / block) + b;
      const float *c = columnWeights ? columnWeights + b * block : nullptr;
      switch (encoding) {
      case WeightEncoding::Int4Min:
        encodeInt4MinGroup(w + b * block, c, block, first, blockIndex, choice, out);
        break;
      case WeightEncoding::Int4Zero:
        encodeInt4ZeroGroup(w + b * block, block, first, blockIndex, out);
        break;
      case WeightEncoding::Nvfp4:
        encodeNvfp4Block(w + b * block, c, first, blockIndex, global, choice, out);
        break;
      case WeightEncoding::Mxfp4:
        encodeMxfp4Block(w + b * block, c, first, blockIndex, choice, out);
        break;
      case WeightEncoding::Fp8PerChannel:
        break;
      }
    }
  }
  return out;
}

StatusOr<EncodedWeight> repackGgmlQ4(const uint8_t *blocks, int64_t n, int64_t k, bool hasMin) {
  if (n <= 0 || k <= 0 || k % kGgmlQ4BlockSize != 0)
    return invalidArgument("a GGUF Q4 tensor needs rows of whole 32-element blocks, got [" +
                           std::to_string(n) + ", " + std::to_string(k) + "]");
  const WeightEncoding encoding = hasMin ? WeightEncoding::Int4Min : WeightEncoding::Int4Zero;
  const int64_t blockBytes = hasMin ? kQ4_1BlockBytes : kQ4_0BlockBytes;
  const int64_t numBlocks = n * (k / kGgmlQ4BlockSize);
  constexpr int64_t kHalf = kGgmlQ4BlockSize / 2;
  const uint16_t zeroBits = floatToF16(kInt4Zero);
  EncodedWeight out = allocate(encoding, n, k, kGgmlQ4BlockSize);
  for (int64_t b = 0; b < numBlocks; ++b) {
    const uint8_t *block = blocks + b * blockBytes;
    std::memcpy(out.scale.data() + 2 * b, block, 2); // d, f16 bits
    if (hasMin)
      std::memcpy(out.offset.data() + 2 * b, block + 2, 2); // m, f16 bits
    else
      storeF16(out.offset, b, zeroBits);
    const uint8_t *qs = block + (hasMin ? 4 : 2);
    uint8_t *dst = out.weight.data() + b * kHalf;
    // ggml: element j is the low nibble of qs[j], element j + 16 the high nibble.
    for (int64_t i = 0; i < kHalf / 2; ++i) // elements 0..15
      dst[i] = static_cast<uint8_t>((qs[2 * i] & 0x0F) | ((qs[2 * i + 1] & 0x0F) << 4));
    for (int64_t i = 0; i < kHalf / 2; ++i) // elements 16..31
      dst[kHalf / 2 + i] = static_cast<uint8_t>((qs[2 * i] >> 4) | (qs[2 * i + 1] & 0xF0));
  }
  return out;
}

Status decodeWeight(const EncodedWeight &encoded, int64_t n, int64_t k, WeightEncoding encoding,
                    int64_t group, float *out) {
  INGOT_RETURN_IF_ERROR(checkEncodable(encoding, n, k, group));
  const int64_t block = blockSizeOf(encoding, group, k);
  const EncodedWeight sizes = allocate(encoding, n, k, group);
  if (encoded.weight.size() != sizes.weight.size() || encoded.scale.size() != sizes.scale.size() ||
      encoded.offset.size() != sizes.offset.size() ||
      encoded.globalScale.size() != sizes.globalScale.size())
    return invalidArgument("encoded weight has the wrong byte sizes for its shape");
  const float global = encoding == WeightEncoding::Nvfp4 ? loadF32(encoded.globalScale, 0) : 0.0f;
  for (int64_t i = 0; i < n * k; ++i) {
    const int64_t row = i / k, blockIndex = row * (k / block) + (i % k) / block;
    switch (encoding) {
    case WeightEncoding::Int4Min: {
      float q = static_cast<float>(getNibble(encoded.weight, i));
      out[i] = loadF16(encoded.scale, blockIndex) * q + loadF16(encoded.offset, blockIndex);
      break;
    }
    case WeightEncoding::Int4Zero: {
      float q = static_cast<float>(getNibble(encoded.weight, i));
      out[i] = (q - loadF16(encoded.offset, blockIndex)) * loadF16(encoded.scale, blockIndex);
      break;
    }
    case WeightEncoding::Fp8PerChannel:
      out[i] = e4m3ToFloat(encoded.weight[static_cast<size_t>(i)]) * loadF32(encoded.scale, row);
      break;
    case WeightEncoding::Nvfp4:
      out[i] = e2m1ToFloat(getNibble(encoded.weight, i)) *
               (e4m3ToFloat(encoded.scale[static_cast<size_t>(blockIndex)]) * global);
      break;
    case WeightEncoding::Mxfp4:
      out[i] = e2m1ToFloat(getNibble(encoded.weight, i)) *
               e8m0ToFloat(encoded.scale[static_cast<size_t>(blockIndex)]);
      break;
    }
  }
  return okStatus();
}

} // namespace ingot::quant
