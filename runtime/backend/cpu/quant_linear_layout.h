// The prepared-activation layout shared by the vector quantized-linear tables (AVX2, AVX-512).
#pragma once

#include <cmath>
#include <cstdint>

#include "runtime/backend/cpu/quant_linear.h"

namespace ingot {

/// Floats per token that prepareLanes(w, x, out, lanes) writes.
int64_t lanePreparedFloats(const QuantMatrix& w, int lanes);

/// One token's activations for a table of `lanes` f32 lanes. 4-bit formats: x reordered so
/// that row chunks of 8 * lanes elements (4 * lanes bytes) decode with one shift per code
/// position: out[c + j * lanes + L] = x[c + 8 * L + j], zero past K, padded to whole chunks;
/// int4 scales code position j by int4ActivationScale(j) and appends the per-group sums of
/// x (zero-padded to a multiple of `lanes`). kFp8: x as is.
void prepareLanes(const QuantMatrix& w, const float* x, float* out, int lanes);

/// Int4 code j < 7 of a word is used in place, masked but not shifted down: the integer
/// q * 16^j converts to f32 exactly (four significant bits) and meets x * 16^-j, so the
/// product equals q * x (both scalings are exact powers of two; x * 16^-j stays normal
/// unless |x| < 2^-102) one shift cheaper. Code 7 is shifted down (in place it would be the
/// sign bit).
inline float int4ActivationScale(int j) {
  return j == 7 ? 1.0f : 1.0f / static_cast<float>(int64_t{1} << (4 * j));
}

/// An output from its f32 sum: sum * scale (+ bias), the bias added by an explicit fused
/// multiply-add. Left to the compiler, `sum * scale + bias` is contracted in some tile
/// shapes and not in others, and a row's result would depend on the batch.
inline float finishOutput(float sum, float scale, const float* bias) {
  return bias ? std::fma(sum, scale, *bias) : sum * scale;
}

/// The exact shift for the kernels' group lookups: log2(block), or -1 if block is not a
/// power of two.
inline int blockShift(int64_t block) {
  for (int s = 0; s < 31; ++s)
    if ((int64_t{1} << s) == block) return s;
  return -1;
}

}  // namespace ingot
