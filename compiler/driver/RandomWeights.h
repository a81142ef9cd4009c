//===- RandomWeights.h - seeded pseudo-random weight bytes ------*- C++ -*-===//
//
// Deterministic weight bytes for models given as IR only (examples, benchmarks).
// The same (seed, tensor name) always yields the same bytes on every machine.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "schemas/artifact_generated.h"

namespace ingot::compiler {

/// Fills `out` with the packed bytes of `numElements` elements of finite values:
/// floats uniform in [-amplitude, amplitude] (in (0, amplitude] when `positive`, for
/// scales), E8M0 scales in [2^-7, 1], packed 4-bit values uniform over all 16 codes.
void fillRandomWeights(schema::DType dtype, uint64_t numElements, uint64_t seed,
                       std::string_view tensorName, float amplitude, bool positive,
                       std::vector<uint8_t> &out);

} // namespace ingot::compiler
