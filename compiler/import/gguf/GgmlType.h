//===- GgmlType.h - ggml tensor element types and their block layouts -----===//
//
// The tensor types a GGUF file may name (ggml's `ggml_type` numbering), with the
// number of elements per block and the bytes per block of each. Plain C++.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

#include "core/base/status.h"

namespace ingot::gguf {

/// ggml's tensor type ids as stored in a GGUF tensor info (ggml.h `enum ggml_type`).
/// Ids 4, 5 and 31..33, 36..38 were used by removed types and are not accepted.
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
  Q1_0 = 41,
};

/// Elements per super-block of the k-quants (ggml's QK_K).
inline constexpr uint32_t kQK_K = 256;
/// Elements per block of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (ggml's QK4_0 etc.).
inline constexpr uint32_t kQK32 = 32;

/// True when `raw` is the id of a type this table knows (its block size is known).
bool isKnownGgmlType(uint32_t raw);

/// The type's name as ggml prints it ("Q4_1", "F32"); "unknown" for an unknown id.
const char *ggmlTypeName(GgmlType type);

/// Elements per block (1 for plain types); 0 for an unknown type.
uint32_t ggmlBlockSize(GgmlType type);

/// Bytes per block; 0 for an unknown type.
uint32_t ggmlBlockBytes(GgmlType type);

/// True when dequantizeRows() supports the type.
bool canDequantize(GgmlType type);

/// Bytes that `numElements` elements of `type` occupy. Fails when the type is unknown,
/// `numElements` is not a whole number of blocks, or the size overflows 64 bits.
StatusOr<uint64_t> bytesForElements(GgmlType type, uint64_t numElements);

} // namespace ingot::gguf
