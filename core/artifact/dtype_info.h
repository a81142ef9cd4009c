// Element-type facts (bit widths, names, packed byte sizes) shared by the artifact writer and reader.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "schemas/artifact_generated.h"

namespace ingot {

/// Bits per element of `dtype` (4 for the packed sub-byte types), 0 for Invalid or values
/// this build does not know.
inline int dtypeBits(schema::DType dtype) {
  using schema::DType;
  switch (dtype) {
    case DType::F32: case DType::I32: return 32;
    case DType::F16: case DType::BF16: return 16;
    case DType::F8E4M3FN: case DType::F8E5M2: case DType::F8E8M0FNU: return 8;
    case DType::I8: case DType::U8: case DType::I1: return 8;
    case DType::F4E2M1FN: case DType::I4: case DType::U4: return 4;
    case DType::I64: return 64;
    case DType::Invalid: return 0;
  }
  return 0;
}

/// MLIR-style lowercase spelling ("bf16", "f8E4M3FN"), "invalid" for unknown values.
inline const char* dtypeName(schema::DType dtype) {
  using schema::DType;
  switch (dtype) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F8E4M3FN: return "f8E4M3FN";
    case DType::F8E5M2: return "f8E5M2";
    case DType::F8E8M0FNU: return "f8E8M0FNU";
    case DType::F4E2M1FN: return "f4E2M1FN";
    case DType::I4: return "i4";
    case DType::U4: return "ui4";
    case DType::I8: return "i8";
    case DType::U8: return "ui8";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::I1: return "i1";
    case DType::Invalid: break;
  }
  return "invalid";
}

/// Number of elements of `shape`, or nullopt when a dimension is negative or the product
/// overflows int64.
template <typename Dims>
std::optional<uint64_t> elementCount(const Dims& shape) {
  uint64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0) return std::nullopt;
    uint64_t d = static_cast<uint64_t>(dim);
    if (d != 0 && count > static_cast<uint64_t>(INT64_MAX) / d) return std::nullopt;
    count *= d;
  }
  return count;
}

/// Exact packed byte size of a dense tensor: ceil(elements * bits / 8) (sub-byte types
/// are packed two per byte over the flattened tensor). nullopt for an invalid dtype, a
/// negative dimension or overflow.
template <typename Dims>
std::optional<uint64_t> packedByteSize(schema::DType dtype, const Dims& shape) {
  int bits = dtypeBits(dtype);
  if (bits == 0) return std::nullopt;
  std::optional<uint64_t> count = elementCount(shape);
  if (!count) return std::nullopt;
  if (bits >= 8) {
    uint64_t bytesPer = static_cast<uint64_t>(bits / 8);
    if (*count > UINT64_MAX / bytesPer) return std::nullopt;
    return *count * bytesPer;
  }
  return *count / 2 + (*count % 2);
}

}  // namespace ingot
