//===- GgufValue.h - One GGUF metadata value ---------------------------------===//
//
// A metadata value of a GGUF file: a scalar, a string, or an array (of scalars, strings
// or arrays). Strings and scalar arrays point into the file's mapping, so a value is
// valid only while the GgufFile that produced it is alive. Typed accessors convert with
// range checks and return errors of the form "has type string, expected u32".
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"

namespace ingot::gguf {

/// GGUF metadata value types as stored in the file (`gguf_type`).
enum class GgufValueType : uint32_t {
  UInt8 = 0,
  Int8 = 1,
  UInt16 = 2,
  Int16 = 3,
  UInt32 = 4,
  Int32 = 5,
  Float32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  UInt64 = 10,
  Int64 = 11,
  Float64 = 12,
};

/// True when `raw` names a GgufValueType.
bool isKnownGgufValueType(uint32_t raw);
/// "u8", "i32", "f32", "bool", "string", "array", ...
const char *ggufValueTypeName(GgufValueType type);
/// Bytes of one scalar of `type` in the file; 0 for string and array.
uint32_t ggufScalarBytes(GgufValueType type);

class GgufValue {
public:
  GgufValue() = default;

  // Constructors used by the parser. `raw` points at `count` little-endian scalars of
  // `elementType` inside the file mapping.
  static GgufValue scalar(GgufValueType type, const uint8_t *raw);
  static GgufValue string(std::string_view text);
  static GgufValue scalarArray(GgufValueType elementType, const uint8_t *raw, uint64_t count);
  static GgufValue stringArray(std::vector<std::string_view> strings);
  static GgufValue arrayOfArrays(std::vector<GgufValue> arrays);

  GgufValueType type() const { return type_; }
  /// For arrays: the element type.
  GgufValueType elementType() const { return elementType_; }
  bool isArray() const { return type_ == GgufValueType::Array; }
  /// Number of elements of an array (0 for non-arrays).
  uint64_t arrayLength() const { return count_; }

  /// The type as written in messages: "u32", "string", "array<i32>", "array<array>".
  std::string typeName() const;
  /// A short human-readable rendering: the value of a scalar, a string quoted and cut
  /// after `maxChars` characters, "array<string>[49152]" for an array.
  std::string describe(size_t maxChars = 80) const;

  /// Integer accessors accept any integer type whose value fits the result.
  StatusOr<uint64_t> asU64() const;
  StatusOr<uint32_t> asU32() const;
  StatusOr<int64_t> asI64() const;
  StatusOr<int32_t> asI32() const;
  /// Accepts f32 and f64 (an f64 is rounded to f32).
  StatusOr<float> asF32() const;
  StatusOr<double> asF64() const;
  StatusOr<bool> asBool() const;
  /// The bytes of a string value (GGUF strings are UTF-8, not NUL-terminated).
  StatusOr<std::string_view> asString() const;

  /// An array of strings.
  StatusOr<std::vector<std::string>> asStringArray() const;
  /// An array of any integer type whose values all fit in int64.
  StatusOr<std::vector<int64_t>> asIntArray() const;
  /// An array of f32 or f64.
  StatusOr<std::vector<float>> asFloatArray() const;
  /// The elements of an array of arrays (empty for other values).
  const std::vector<GgufValue> &nestedArrays() const { return arrays_; }

private:
  Status typeError(const char *expected) const;
  // Element i of a scalar value or scalar array, widened.
  uint64_t rawBits(uint64_t i) const;
  bool isInteger(GgufValueType t) const;
  bool isSigned(GgufValueType t) const;

  GgufValueType type_ = GgufValueType::UInt8;
  GgufValueType elementType_ = GgufValueType::UInt8;
  const uint8_t *raw_ = nullptr; // scalar or scalar-array payload in the mapping
  uint64_t count_ = 0;           // array length
  std::string_view string_;
  std::vector<std::string_view> strings_;
  std::vector<GgufValue> arrays_;
};

} // namespace ingot::gguf
