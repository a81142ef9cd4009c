//===- GgufValue.cpp - One GGUF metadata value -------------------------------===//
#include "compiler/import/gguf/GgufValue.h"

#include <cstdio>
#include <cstring>
#include <limits>

namespace ingot::gguf {
namespace {

struct IntValue {
  bool negative;     // only for signed types
  int64_t asSigned;  // valid when the value fits int64
  uint64_t asUnsigned;
  bool fitsSigned;
};

std::string intToString(const IntValue &v) {
  return v.negative ? std::to_string(v.asSigned) : std::to_string(v.asUnsigned);
}

} // namespace

bool isKnownGgufValueType(uint32_t raw) { return raw <= static_cast<uint32_t>(GgufValueType::Float64); }

const char *ggufValueTypeName(GgufValueType type) {
  switch (type) {
  case GgufValueType::UInt8: return "u8";
  case GgufValueType::Int8: return "i8";
  case GgufValueType::UInt16: return "u16";
  case GgufValueType::Int16: return "i16";
  case GgufValueType::UInt32: return "u32";
  case GgufValueType::Int32: return "i32";
  case GgufValueType::Float32: return "f32";
  case GgufValueType::Bool: return "bool";
  case GgufValueType::String: return "string";
  case GgufValueType::Array: return "array";
  case GgufValueType::UInt64: return "u64";
  case GgufValueType::Int64: return "i64";
  case GgufValueType::Float64: return "f64";
  }
  return "unknown";
}

uint32_t ggufScalarBytes(GgufValueType type) {
  switch (type) {
  case GgufValueType::UInt8:
  case GgufValueType::Int8:
  case GgufValueType::Bool: return 1;
  case GgufValueType::UInt16:
  case GgufValueType::Int16: return 2;
  case GgufValueType::UInt32:
  case GgufValueType::Int32:
  case GgufValueType::Float32: return 4;
  case GgufValueType::UInt64:
  case GgufValueType::Int64:
  case GgufValueType::Float64: return 8;
  case GgufValueType::String:
  case GgufValueType::Array: return 0;
  }
  return 0;
}

GgufValue GgufValue::scalar(GgufValueType type, const uint8_t *raw) {
  GgufValue v;
  v.type_ = type;
  v.raw_ = raw;
  return v;
}

GgufValue GgufValue::string(std::string_view text) {
  GgufValue v;
  v.type_ = GgufValueType::String;
  v.string_ = text;
  return v;
}

GgufValue GgufValue::scalarArray(GgufValueType elementType, const uint8_t *raw, uint64_t count) {
  GgufValue v;
  v.type_ = GgufValueType::Array;
  v.elementType_ = elementType;
  v.raw_ = raw;
  v.count_ = count;
  return v;
}

GgufValue GgufValue::stringArray(std::vector<std::string_view> strings) {
  GgufValue v;
  v.type_ = GgufValueType::Array;
  v.elementType_ = GgufValueType::String;
  v.count_ = strings.size();
  v.strings_ = std::move(strings);
  return v;
}

GgufValue GgufValue::arrayOfArrays(std::vector<GgufValue> arrays) {
  GgufValue v;
  v.type_ = GgufValueType::Array;
  v.elementType_ = GgufValueType::Array;
  v.count_ = arrays.size();
  v.arrays_ = std::move(arrays);
  return v;
}

std::string GgufValue::typeName() const {
  if (!isArray())
    return ggufValueTypeName(type_);
  return std::string("array<") + ggufValueTypeName(elementType_) + ">";
}

bool GgufValue::isInteger(GgufValueType t) const {
  switch (t) {
  case GgufValueType::UInt8:
  case GgufValueType::Int8:
  case GgufValueType::UInt16:
  case GgufValueType::Int16:
  case GgufValueType::UInt32:
  case GgufValueType::Int32:
  case GgufValueType::UInt64:
  case GgufValueType::Int64: return true;
  default: return false;
  }
}

bool GgufValue::isSigned(GgufValueType t) const {
  return t == GgufValueType::Int8 || t == GgufValueType::Int16 || t == GgufValueType::Int32 ||
         t == GgufValueType::Int64;
}

uint64_t GgufValue::rawBits(uint64_t i) const {
  GgufValueType t = isArray() ? elementType_ : type_;
  uint32_t size = ggufScalarBytes(t);
  uint64_t bits = 0;
  const uint8_t *p = raw_ + i * size;
  for (uint32_t b = 0; b < size; ++b)
    bits |= static_cast<uint64_t>(p[b]) << (8 * b);
  return bits;
}

Status GgufValue::typeError(const char *expected) const {
  return invalidArgument("has type " + typeName() + ", expected " + expected);
}

namespace {

IntValue decodeInt(uint64_t bits, uint32_t size, bool isSignedType) {
  IntValue v{};
  if (isSignedType) {
    int shift = 64 - 8 * static_cast<int>(size);
    int64_t s = static_cast<int64_t>(bits << shift) >> shift; // sign-extend
    v.negative = s < 0;
    v.asSigned = s;
    v.asUnsigned = static_cast<uint64_t>(s);
    v.fitsSigned = true;
  } else {
    v.negative = false;
    v.asUnsigned = bits;
    v.fitsSigned = bits <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    v.asSigned = v.fitsSigned ? static_cast<int64_t>(bits) : 0;
  }
  return v;
}

} // namespace

StatusOr<uint64_t> GgufValue::asU64() const {
  if (!isInteger(type_))
    return typeError("an unsigned integer");
  IntValue v = decodeInt(rawBits(0), ggufScalarBytes(type_), isSigned(type_));
  if (v.negative)
    return invalidArgument("has value " + intToString(v) + " (" + typeName() +
                           "), which does not fit in u64");
  return v.asUnsigned;
}

StatusOr<uint32_t> GgufValue::asU32() const {
  if (!isInteger(type_))
    return typeError("u32");
  IntValue v = decodeInt(rawBits(0), ggufScalarBytes(type_), isSigned(type_));
  if (v.negative || v.asUnsigned > std::numeric_limits<uint32_t>::max())
    return invalidArgument("has value " + intToString(v) + " (" + typeName() +
                           "), which does not fit in u32");
  return static_cast<uint32_t>(v.asUnsigned);
}

StatusOr<int64_t> GgufValue::asI64() const {
  if (!isInteger(type_))
    return typeError("i64");
  IntValue v = decodeInt(rawBits(0), ggufScalarBytes(type_), isSigned(type_));
  if (!v.fitsSigned)
    return invalidArgument("has value " + intToString(v) + " (" + typeName() +
                           "), which does not fit in i64");
  return v.asSigned;
}

StatusOr<int32_t> GgufValue::asI32() const {
  if (!isInteger(type_))
    return typeError("i32");
  IntValue v = decodeInt(rawBits(0), ggufScalarBytes(type_), isSigned(type_));
  if (!v.fitsSigned || v.asSigned < std::numeric_limits<int32_t>::min() ||
      v.asSigned > std::numeric_limits<int32_t>::max())
    return invalidArgument("has value " + intToString(v) + " (" + typeName() +
                           "), which does not fit in i32");
  return static_cast<int32_t>(v.asSigned);
}

StatusOr<double> GgufValue::asF64() const {
  if (type_ == GgufValueType::Float32) {
    uint32_t bits = static_cast<uint32_t>(rawBits(0));
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return static_cast<double>(f);
  }
  if (type_ == GgufValueType::Float64) {
    uint64_t bits = rawBits(0);
    double d;
    std::memcpy(&d, &bits, sizeof(d));
    return d;
  }
  return typeError("f64");
}

StatusOr<float> GgufValue::asF32() const {
  if (type_ != GgufValueType::Float32 && type_ != GgufValueType::Float64)
    return typeError("f32");
  StatusOr<double> d = asF64();
  return static_cast<float>(*d);
}

StatusOr<bool> GgufValue::asBool() const {
  if (type_ != GgufValueType::Bool)
    return typeError("bool");
  return raw_[0] != 0;
}

StatusOr<std::string_view> GgufValue::asString() const {
  if (type_ != GgufValueType::String)
    return typeError("string");
  return string_;
}

StatusOr<std::vector<std::string>> GgufValue::asStringArray() const {
  if (!isArray() || elementType_ != GgufValueType::String)
    return typeError("array<string>");
  std::vector<std::string> out;
  out.reserve(strings_.size());
  for (std::string_view s : strings_)
    out.emplace_back(s);
  return out;
}

StatusOr<std::vector<int64_t>> GgufValue::asIntArray() const {
  if (!isArray() || !isInteger(elementType_))
    return typeError("an array of integers");
  const uint32_t size = ggufScalarBytes(elementType_);
  const bool signedType = isSigned(elementType_);
  std::vector<int64_t> out(count_);
  for (uint64_t i = 0; i < count_; ++i) {
    IntValue v = decodeInt(rawBits(i), size, signedType);
    if (!v.fitsSigned)
      return invalidArgument("element " + std::to_string(i) + " has value " + intToString(v) +
                             " (" + ggufValueTypeName(elementType_) +
                             "), which does not fit in i64");
    out[i] = v.asSigned;
  }
  return out;
}

StatusOr<std::vector<float>> GgufValue::asFloatArray() const {
  if (!isArray() || (elementType_ != GgufValueType::Float32 && elementType_ != GgufValueType::Float64))
    return typeError("an array of floats");
  std::vector<float> out(count_);
  for (uint64_t i = 0; i < count_; ++i) {
    uint64_t bits = rawBits(i);
    if (elementType_ == GgufValueType::Float32) {
      uint32_t b32 = static_cast<uint32_t>(bits);
      std::memcpy(&out[i], &b32, sizeof(float));
    } else {
      double d;
      std::memcpy(&d, &bits, sizeof(d));
      out[i] = static_cast<float>(d);
    }
  }
  return out;
}

std::string GgufValue::describe(size_t maxChars) const {
  if (isArray())
    return typeName() + "[" + std::to_string(count_) + "]";
  switch (type_) {
  case GgufValueType::String: {
    std::string text(string_.substr(0, maxChars));
    std::string out = "\"";
    for (char c : text) {
      if (c == '\n') out += "\\n";
      else if (c == '"' || c == '\\') { out += '\\'; out += c; }
      else out += c;
    }
    out += "\"";
    if (string_.size() > maxChars)
      out += "... (" + std::to_string(string_.size()) + " bytes)";
    return out;
  }
  case GgufValueType::Bool: return raw_[0] ? "true" : "false";
  case GgufValueType::Float32:
  case GgufValueType::Float64: {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.9g", *asF64());
    return buf;
  }
  default: {
    IntValue v = decodeInt(rawBits(0), ggufScalarBytes(type_), isSigned(type_));
    return intToString(v);
  }
  }
}

} // namespace ingot::gguf
