// Test support for the W8A8 FP8 path: the quantizer run on the host as its CTAs would, and
// the whole linear emulated (per-token E4M3 codes . weight codes in float64, then both
// scales and the bias), as the GPU's quantizer + cuBLASLt + epilogue compute it.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "codegen/cuda/kernels/fp8_w8a8.cuh"
#include "runtime/backend/cpu/quant_formats.h"
#include "runtime/backend/cpu/quant_linear.h"

namespace ingot::w8a8::testing {

/// Runs ingot_fp8_quantize_rows as a CTA of kW8a8Threads threads would, row by row.
inline void emulateQuantizeRows(const QuantizeRowsParams &p) {
  for (int t = 0; t < p.rows; ++t) {
    float m = 0.0f;
    for (int tid = 0; tid < kW8a8Threads; ++tid) {
      const float o = threadAbsMax(p, t, tid, kW8a8Threads);
      m = (o > m || o != o) ? o : m;
    }
    const float s = rowScale(m);
    p.row_scales[t] = s;
    for (int tid = 0; tid < kW8a8Threads; ++tid) threadEncode(p, t, tid, kW8a8Threads, rowInverse(s));
  }
}

/// The W8A8 linear of fp8 weight `w` on x [T, xStride]: y [T, yStride] in float64 (exact
/// products and sums of the codes, then row scale x channel scale x global scale + bias).
/// `absTerms`, if given, gets sum_k |xq| |wq| s c g per output (for error bounds).
inline std::vector<double> emulateW8a8Linear(const QuantMatrix &w, const std::vector<float> &x,
                                             int64_t xStride, int64_t T, const float *bias,
                                             int64_t yStride,
                                             std::vector<double> *absTerms = nullptr) {
  const int64_t K = w.K, N = w.N, codesStride = (K + kFp8Align - 1) / kFp8Align * kFp8Align;
  std::vector<unsigned char> codes(T * codesStride);
  std::vector<float> scales(T);
  QuantizeRowsParams p{x.data(), codes.data(), scales.data(), static_cast<long>(xStride),
                       static_cast<long>(codesStride), static_cast<int>(K), static_cast<int>(T)};
  emulateQuantizeRows(p);
  std::vector<double> y(T * yStride, 0.0);
  if (absTerms) absTerms->assign(T * yStride, 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      double sum = 0, abs = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double v = double(e4m3fnToF32(codes[t * codesStride + k])) *
                         e4m3fnToF32(w.codes[n * K + k]);
        sum += v;
        abs += std::fabs(v);
      }
      const double scale = double(scales[t]) * (w.channel_scales ? w.channel_scales[n] : 1.0) *
                           w.global_scale;
      y[t * yStride + n] = sum * scale + (bias ? bias[n] : 0.0);
      if (absTerms) (*absTerms)[t * yStride + n] = abs * std::fabs(scale);
    }
  return y;
}

}  // namespace ingot::w8a8::testing
