//===- WeightConversion.h - layout and dtype changes of imported weights -*- C++ -*-===//
//
// What every importer does to a dequantized tensor before it reaches the artifact: put
// RoPE rows back in Hugging Face order, convert to the artifact dtype, stream in chunks.
// Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <vector>

#include "core/artifact/artifact_writer.h"

namespace ingot::importer {

/// Undoes llama.cpp's Q/K permutation of a [heads * headDim, K] weight: within each head,
/// stored row 2i + j holds Hugging Face row j * headDim/2 + i (j in {0, 1}).
Status unpermuteRopeRows(std::vector<float> &values, const std::vector<int64_t> &shape,
                         int32_t heads);

/// The same row permutation on rows of any fixed byte width (`rows` rows of `rowBytes`
/// bytes each), e.g. rows of quantized blocks.
Status unpermuteRopeRowBytes(uint8_t *bytes, int64_t rows, int64_t rowBytes, int32_t heads);

/// Converts f32 values to `dtype` (f32, bf16 with round-to-nearest-even, f16) and streams
/// them into `sink` in chunks, so no second full-size copy exists.
Status writeConverted(const std::vector<float> &values, schema::DType dtype,
                      const TensorByteSink &sink);

/// f32 -> bf16 bits, round to nearest even; NaN stays NaN.
uint16_t floatToBf16(float value);
/// f32 -> IEEE half bits, round to nearest even, with subnormals and infinities.
uint16_t floatToF16(float value);

} // namespace ingot::importer
