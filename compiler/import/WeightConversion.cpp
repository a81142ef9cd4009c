//===- WeightConversion.cpp - layout and dtype changes of imported weights -===//
#include "compiler/import/WeightConversion.h"

#include <cmath>
#include <cstring>

namespace ingot::importer {

Status unpermuteRopeRows(std::vector<float> &values, const std::vector<int64_t> &shape,
                         int32_t heads) {
  if (shape.size() != 2)
    return invalidArgument("cannot undo the RoPE row permutation of a tensor of " +
                           std::to_string(shape.size()) + " dims with " +
                           std::to_string(heads) + " heads");
  return unpermuteRopeRowBytes(reinterpret_cast<uint8_t *>(values.data()), shape[0],
                               shape[1] * static_cast<int64_t>(sizeof(float)), heads);
}

Status unpermuteRopeRowBytes(uint8_t *bytes, int64_t rows, int64_t rowBytes, int32_t heads) {
  if (heads <= 0 || rows % heads != 0 || (rows / heads) % 2 != 0)
    return invalidArgument("cannot undo the RoPE row permutation of a tensor of 2 dims with " +
                           std::to_string(heads) + " heads");
  const int64_t headDim = rows / heads, half = headDim / 2;
  std::vector<uint8_t> head(static_cast<size_t>(headDim * rowBytes));
  for (int64_t h = 0; h < heads; ++h) {
    uint8_t *base = bytes + h * headDim * rowBytes;
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j)
        std::memcpy(head.data() + (j * half + i) * rowBytes, base + (2 * i + j) * rowBytes,
                    static_cast<size_t>(rowBytes));
    std::memcpy(base, head.data(), head.size());
  }
  return okStatus();
}

uint16_t floatToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if (std::isnan(value))
    return static_cast<uint16_t>((bits >> 16) | 0x40); // quiet NaN, sign kept
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

uint16_t floatToF16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  uint32_t absBits = bits & 0x7FFFFFFF;
  if (absBits > 0x7F800000)
    return sign | 0x7E00; // NaN
  if (absBits >= 0x477FF000)
    return sign | 0x7C00; // rounds to infinity (>= 65520)
  if (absBits < 0x38800000) {
    // Subnormal half (or zero): value = m * 2^-24; round to nearest even.
    float a;
    std::memcpy(&a, &absBits, 4);
    float scaled = a * 16777216.0f; // 2^24, exact
    float rounded = std::nearbyint(scaled);
    return sign | static_cast<uint16_t>(rounded);
  }
  uint32_t mant = absBits & 0x7FFFFF;
  uint32_t exp = (absBits >> 23) - 127 + 15;
  uint32_t half = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1)))
    ++half; // may carry into the exponent, which is still correct
  return sign | static_cast<uint16_t>(half);
}

Status writeConverted(const std::vector<float> &values, schema::DType dtype,
                      const TensorByteSink &sink) {
  if (dtype == schema::DType::F32)
    return sink(values.data(), values.size() * sizeof(float));
  if (dtype != schema::DType::BF16 && dtype != schema::DType::F16)
    return invalidArgument("weights can be converted to f32, bf16 or f16 only");
  constexpr size_t kChunk = 1 << 16; // elements per write
  std::vector<uint16_t> chunk(kChunk);
  for (size_t start = 0; start < values.size(); start += kChunk) {
    size_t n = std::min(kChunk, values.size() - start);
    for (size_t i = 0; i < n; ++i)
      chunk[i] = dtype == schema::DType::BF16 ? floatToBf16(values[start + i])
                                              : floatToF16(values[start + i]);
    INGOT_RETURN_IF_ERROR(sink(chunk.data(), n * sizeof(uint16_t)));
  }
  return okStatus();
}

} // namespace ingot::importer
