//===- Dequantize.h - ggml block formats to f32 -----------------------------===//
//
// Turns tensor bytes of F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K (block
// layouts as ggml defines them in ggml-common.h) into f32, and exposes the raw
// quantized blocks of Q4_0, Q4_1 and Q8_0 for import paths that keep the quantization.
//
// Results are bit-identical to ggml's reference dequantizers (dequantize_row_*), which
// compute in f32 without fused multiply-adds; this file is built with -ffp-contract=off
// so the compiler never fuses them either.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

#include "compiler/import/gguf/GgmlType.h"
#include "core/base/status.h"

namespace ingot::gguf {

/// Converts IEEE binary16 bits to f32 exactly (subnormals, infinities and NaN payloads
/// included).
float halfToFloat(uint16_t bits);

/// Converts bfloat16 bits to f32 exactly.
float bfloat16ToFloat(uint16_t bits);

/// Dequantizes `numElements` elements of `type` from `src` (which holds
/// bytesForElements(type, numElements) bytes, any alignment) into `dst`.
/// Fails when the type is not supported or `numElements` is not a whole number of blocks.
Status dequantizeRows(GgmlType type, const uint8_t *src, uint64_t numElements, float *dst);

/// Bytes of one Q4_0 / Q4_1 / Q8_0 block (32 elements each).
inline constexpr uint32_t kQ4_0BlockBytes = 18;
inline constexpr uint32_t kQ4_1BlockBytes = 20;
inline constexpr uint32_t kQ8_0BlockBytes = 34;
inline constexpr uint32_t kQ5_0BlockBytes = 22;
inline constexpr uint32_t kQ5_1BlockBytes = 24;

/// Decodes one Q4_0 block (f16 scale, 16 bytes of nibbles): element i has the value
/// `*scale * (q[i] - 8)` with q[i] in [0, 15], in element order (q[0..15] are the low
/// nibbles of the 16 bytes, q[16..31] the high nibbles). The scale is exact (an f16).
void decodeQ4_0Block(const uint8_t *block, float *scale, uint8_t q[32]);

/// Decodes one Q4_1 block (f16 scale, f16 min, 16 bytes of nibbles): element i has the
/// value `*scale * q[i] + *min` with q[i] in [0, 15], in element order as for Q4_0.
/// Scale and min are exact (f16 values), so an int4 group-wise import with group 32,
/// a scale and a min per group reproduces the block without a float round trip.
void decodeQ4_1Block(const uint8_t *block, float *scale, float *min, uint8_t q[32]);

/// Decodes one Q8_0 block (f16 scale, 32 int8): element i has the value `*scale * q[i]`.
void decodeQ8_0Block(const uint8_t *block, float *scale, int8_t q[32]);

} // namespace ingot::gguf
