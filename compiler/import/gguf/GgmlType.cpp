//===- GgmlType.cpp - ggml tensor element types and their block layouts ---===//
#include "compiler/import/gguf/GgmlType.h"

#include <string>

namespace ingot::gguf {
namespace {

struct TypeTraits {
  const char *name;   // nullptr: id not in use
  uint32_t blockSize; // elements per block
  uint32_t blockBytes;
  bool dequantizable;
};

// Indexed by type id. Block sizes and bytes follow ggml's block structs (ggml-common.h):
// e.g. block_q4_1 = f16 d, f16 m, 16 bytes of nibbles for 32 elements.
constexpr TypeTraits kTraits[] = {
    /* 0 */ {"F32", 1, 4, true},
    /* 1 */ {"F16", 1, 2, true},
    /* 2 */ {"Q4_0", kQK32, 2 + 16, true},
    /* 3 */ {"Q4_1", kQK32, 2 + 2 + 16, true},
    /* 4 */ {nullptr, 0, 0, false},
    /* 5 */ {nullptr, 0, 0, false},
    /* 6 */ {"Q5_0", kQK32, 2 + 4 + 16, true},
    /* 7 */ {"Q5_1", kQK32, 2 + 2 + 4 + 16, true},
    /* 8 */ {"Q8_0", kQK32, 2 + 32, true},
    /* 9 */ {"Q8_1", kQK32, 4 + 4 + 32, false},
    /* 10 */ {"Q2_K", kQK_K, 2 + 2 + kQK_K / 16 + kQK_K / 4, false},
    /* 11 */ {"Q3_K", kQK_K, 2 + kQK_K / 4 + kQK_K / 8 + 12, false},
    /* 12 */ {"Q4_K", kQK_K, 2 + 2 + 12 + kQK_K / 2, true},
    /* 13 */ {"Q5_K", kQK_K, 2 + 2 + 12 + kQK_K / 8 + kQK_K / 2, true},
    /* 14 */ {"Q6_K", kQK_K, kQK_K / 2 + kQK_K / 4 + kQK_K / 16 + 2, true},
    /* 15 */ {"Q8_K", kQK_K, 4 + kQK_K + kQK_K / 8, false},
    /* 16 */ {"IQ2_XXS", kQK_K, 2 + kQK_K / 4, false},
    /* 17 */ {"IQ2_XS", kQK_K, 2 + kQK_K / 4 + kQK_K / 32, false},
    /* 18 */ {"IQ3_XXS", kQK_K, 2 + kQK_K / 4 + kQK_K / 8, false},
    /* 19 */ {"IQ1_S", kQK_K, 2 + kQK_K / 8 + kQK_K / 16, false},
    /* 20 */ {"IQ4_NL", kQK32, 2 + 16, false},
    /* 21 */ {"IQ3_S", kQK_K, 2 + kQK_K / 4 + kQK_K / 8 + kQK_K / 32 + 4, false},
    /* 22 */ {"IQ2_S", kQK_K, 2 + kQK_K / 4 + kQK_K / 16, false},
    /* 23 */ {"IQ4_XS", kQK_K, 2 + 2 + kQK_K / 2 + kQK_K / 64, false},
    /* 24 */ {"I8", 1, 1, false},
    /* 25 */ {"I16", 1, 2, false},
    /* 26 */ {"I32", 1, 4, false},
    /* 27 */ {"I64", 1, 8, false},
    /* 28 */ {"F64", 1, 8, false},
    /* 29 */ {"IQ1_M", kQK_K, kQK_K / 8 + kQK_K / 16 + kQK_K / 32, false},
    /* 30 */ {"BF16", 1, 2, true},
    /* 31 */ {nullptr, 0, 0, false},
    /* 32 */ {nullptr, 0, 0, false},
    /* 33 */ {nullptr, 0, 0, false},
    /* 34 */ {"TQ1_0", kQK_K, 2 + 4 * 13, false},
    /* 35 */ {"TQ2_0", kQK_K, 2 + 64, false},
    /* 36 */ {nullptr, 0, 0, false},
    /* 37 */ {nullptr, 0, 0, false},
    /* 38 */ {nullptr, 0, 0, false},
    /* 39 */ {"MXFP4", 32, 1 + 16, false},
    /* 40 */ {"NVFP4", 64, 4 + 32, false},
    /* 41 */ {"Q1_0", 128, 2 + 16, false},
};
constexpr uint32_t kNumTypeIds = sizeof(kTraits) / sizeof(kTraits[0]);

const TypeTraits *traits(GgmlType type) {
  auto raw = static_cast<uint32_t>(type);
  if (raw >= kNumTypeIds || kTraits[raw].name == nullptr)
    return nullptr;
  return &kTraits[raw];
}

} // namespace

bool isKnownGgmlType(uint32_t raw) { return traits(static_cast<GgmlType>(raw)) != nullptr; }

const char *ggmlTypeName(GgmlType type) {
  const TypeTraits *t = traits(type);
  return t ? t->name : "unknown";
}

uint32_t ggmlBlockSize(GgmlType type) {
  const TypeTraits *t = traits(type);
  return t ? t->blockSize : 0;
}

uint32_t ggmlBlockBytes(GgmlType type) {
  const TypeTraits *t = traits(type);
  return t ? t->blockBytes : 0;
}

bool canDequantize(GgmlType type) {
  const TypeTraits *t = traits(type);
  return t && t->dequantizable;
}

StatusOr<uint64_t> bytesForElements(GgmlType type, uint64_t numElements) {
  const TypeTraits *t = traits(type);
  if (!t)
    return invalidArgument("unknown ggml type " + std::to_string(static_cast<uint32_t>(type)));
  if (numElements % t->blockSize != 0)
    return invalidArgument(std::to_string(numElements) + " elements are not a whole number of " +
                           t->name + " blocks of " + std::to_string(t->blockSize));
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(numElements / t->blockSize, uint64_t{t->blockBytes}, &bytes))
    return invalidArgument(std::to_string(numElements) + " " + t->name +
                           " elements take more than 2^64 bytes");
  return bytes;
}

} // namespace ingot::gguf
