//===- RandomWeights.cpp - seeded pseudo-random weight bytes ---------------===//
#include "compiler/driver/RandomWeights.h"

#include <array>
#include <cmath>
#include <cstring>

#include "compiler/import/WeightConversion.h"
#include "core/artifact/dtype_info.h"

namespace ingot::compiler {
namespace {

/// splitmix64: tiny, fast, and identical everywhere (std distributions are not).
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in [-1, 1).
  float uniform() { return static_cast<float>((next() >> 40) * 0x1.0p-24) * 2.0f - 1.0f; }
};

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

} // namespace

void fillRandomWeights(schema::DType dtype, uint64_t numElements, uint64_t seed,
                       std::string_view tensorName, float amplitude, bool positive,
                       std::vector<uint8_t> &out) {
  SplitMix64 rng{seed ^ fnv1a(tensorName)};
  out.assign(packedByteSize(dtype, std::array<int64_t, 1>{int64_t(numElements)}).value_or(0), 0);
  uint8_t *p = out.data();
  for (uint64_t i = 0; i < numElements; ++i) {
    float v = rng.uniform() * amplitude;
    if (positive)
      v = std::fabs(v) + amplitude * 0x1.0p-8f;
    switch (dtype) {
    case schema::DType::F32:
      std::memcpy(p + 4 * i, &v, 4);
      break;
    case schema::DType::BF16: {
      uint16_t h = importer::floatToBf16(v);
      std::memcpy(p + 2 * i, &h, 2);
      break;
    }
    case schema::DType::F16: {
      uint16_t h = importer::floatToF16(v);
      std::memcpy(p + 2 * i, &h, 2);
      break;
    }
    case schema::DType::F8E4M3FN:
      // Any byte but the two NaN encodings (S.1111.111) is finite.
      p[i] = static_cast<uint8_t>(rng.next() % 0x7F) | (positive ? 0 : rng.next() & 0x80);
      break;
    case schema::DType::F8E8M0FNU:
      p[i] = static_cast<uint8_t>(120 + rng.next() % 8); // 2^-7 .. 2^0, never NaN (0xFF)
      break;
    case schema::DType::F4E2M1FN:
    case schema::DType::I4:
    case schema::DType::U4:
      p[i / 2] |= static_cast<uint8_t>((rng.next() & 0xF) << (4 * (i % 2)));
      break;
    case schema::DType::I32: {
      int32_t x = static_cast<int32_t>(rng.next());
      std::memcpy(p + 4 * i, &x, 4);
      break;
    }
    case schema::DType::I64: {
      uint64_t x = rng.next();
      std::memcpy(p + 8 * i, &x, 8);
      break;
    }
    default:
      p[i] = static_cast<uint8_t>(rng.next());
      break;
    }
  }
}

} // namespace ingot::compiler
