// QuantMatrix sizes, the kernel-table dispatch and the activation layout the vector tables share.
#include "runtime/backend/cpu/quant_linear.h"

#include <algorithm>
#include <cstring>

#include "runtime/backend/cpu/quant_linear_layout.h"

namespace ingot {

int64_t QuantMatrix::bytes() const {
  int64_t total = N * rowBytes();
  switch (format) {
    case QuantFormat::kInt4Min:
    case QuantFormat::kInt4Zero: {
      const int64_t each = scale_type == GroupScaleType::kF32 ? 4 : 2;
      total += 2 * N * groups() * each;
      break;
    }
    case QuantFormat::kFp8:
      total += channel_scales ? N * 4 : 4;
      break;
    case QuantFormat::kNvfp4:
      total += N * groups() + 4;
      break;
    case QuantFormat::kMxfp4:
      total += N * groups();
      break;
  }
  return total;
}

const QuantKernels& quantKernels(SimdLevel level) {
  switch (level) {
    case SimdLevel::kAvx512:
    case SimdLevel::kAvx512Bf16: return avx512QuantKernels();
    case SimdLevel::kAvx2: return avx2QuantKernels();
    case SimdLevel::kScalar: break;
  }
  return scalarQuantKernels();
}

int64_t lanePreparedFloats(const QuantMatrix& w, int lanes) {
  if (w.format == QuantFormat::kFp8) return w.K;
  const int64_t chunk = 8 * lanes;
  int64_t floats = (w.K + chunk - 1) / chunk * chunk;
  if (w.format == QuantFormat::kInt4Min || w.format == QuantFormat::kInt4Zero)
    floats += (w.groups() + lanes - 1) / lanes * lanes;
  return floats;
}

void prepareLanes(const QuantMatrix& w, const float* x, float* out, int lanes) {
  const int64_t K = w.K;
  if (w.format == QuantFormat::kFp8) {
    std::memcpy(out, x, K * sizeof(float));
    return;
  }
  // Chunk c, lane L, nibble j holds element c * 8 * lanes + 8 * L + j: the kernels read a
  // row chunk as `lanes` 32-bit words of eight codes each and code j of every word at once.
  const int64_t chunk = 8 * lanes;
  const int64_t padded = (K + chunk - 1) / chunk * chunk;
  const bool int4 = w.format == QuantFormat::kInt4Min || w.format == QuantFormat::kInt4Zero;
  float scale[8];
  for (int j = 0; j < 8; ++j) scale[j] = int4 ? int4ActivationScale(j) : 1.0f;
  // K is a multiple of 16 (the smallest block): whole 8-element lanes, then zeros.
  std::memset(out + K / chunk * chunk, 0, (padded - K / chunk * chunk) * sizeof(float));
  for (int64_t c = 0; c < padded; c += chunk) {
    const int64_t validLanes = std::min<int64_t>(lanes, (K - c) / 8);
    for (int64_t L = 0; L < validLanes; ++L)
      for (int j = 0; j < 8; ++j) out[c + j * lanes + L] = x[c + 8 * L + j] * scale[j];
  }
  if (!int4) return;
  float* sums = out + padded;
  const int64_t G = w.block, groups = w.groups();
  const int64_t paddedGroups = (groups + lanes - 1) / lanes * lanes;
  for (int64_t g = 0; g < paddedGroups; ++g) {
    // Four interleaved partial sums (G is a multiple of 16), added pairwise.
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (g < groups)
      for (int64_t k = g * G; k < (g + 1) * G; k += 4)
        for (int i = 0; i < 4; ++i) s[i] += x[k + i];
    sums[g] = (s[0] + s[1]) + (s[2] + s[3]);
  }
}

}  // namespace ingot
