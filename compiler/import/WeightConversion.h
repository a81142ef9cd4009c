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

#include <string>
#include <utility>

#include "compiler/import/ImportedModel.h"
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

/// The tensors a fused [rows, K] tensor holds, as consecutive row ranges (Phi-3's qkv_proj
/// and gate_up_proj): the fused tensor is read (its readF32, or readBlocks) once for all its
/// parts, each part keeping its rows, with the fused tensor's dtype. `parts` gives each part's canonical name and row count,
/// in order; they must add up to the fused tensor's rows.
StatusOr<std::vector<ImportedTensor>>
splitFusedRows(const ImportedTensor &fused,
               const std::vector<std::pair<std::string, int64_t>> &parts);

/// Phi-3's fused tensors (…self_attn.qkv_proj.weight, …mlp.gate_up_proj.weight) as the
/// Llama tensors the graph reads (q/k/v, gate/up); any other tensor as it is.
StatusOr<std::vector<ImportedTensor>> splitFused(const ImportedTensor &tensor,
                                                const ModelConfig &config);

/// f32 -> bf16 bits, round to nearest even; NaN stays NaN.
uint16_t floatToBf16(float value);
/// f32 -> IEEE half bits, round to nearest even, with subnormals and infinities.
uint16_t floatToF16(float value);

} // namespace ingot::importer
