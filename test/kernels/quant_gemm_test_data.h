// Test support for the quantized GEMM: format dispatch, its host emulation and references.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "test/kernels/quant_gemv_test_data.h"
#include "codegen/cuda/kernels/quant_gemm.cuh"

namespace ingot::quantgemm::testing {

template <Format F>
using FormatTag = std::integral_constant<Format, F>;
template <ScaleType S>
using ScaleTag = std::integral_constant<ScaleType, S>;

/// Calls fn(FormatTag<F>{}, ScaleTag<S>{}) for the runtime (format, int4 scale type).
template <class Fn>
void withFormat(Format f, ScaleType s, Fn &&fn) {
  auto int4 = [&](auto tag) {
    if (s == ScaleType::kF16) return fn(tag, ScaleTag<ScaleType::kF16>{});
    if (s == ScaleType::kBF16) return fn(tag, ScaleTag<ScaleType::kBF16>{});
    return fn(tag, ScaleTag<ScaleType::kF32>{});
  };
  switch (f) {
    case Format::kInt4Min: return int4(FormatTag<Format::kInt4Min>{});
    case Format::kInt4Zero: return int4(FormatTag<Format::kInt4Zero>{});
    case Format::kFp8: return fn(FormatTag<Format::kFp8>{}, ScaleTag<ScaleType::kF16>{});
    case Format::kNvfp4: return fn(FormatTag<Format::kNvfp4>{}, ScaleTag<ScaleType::kF16>{});
    case Format::kMxfp4: return fn(FormatTag<Format::kMxfp4>{}, ScaleTag<ScaleType::kF16>{});
  }
}

inline float bf16Value(unsigned short bits) { return quantgemv::bf16ToFloat(bits); }

/// Every weight of `p` (host pointers) as the GEMM puts it into shared memory: the GEMV's
/// decodeWord, rounded to bf16; [N, K] row-major. (The tile test checks these against
/// the CPU backend's weights.)
inline std::vector<float> bf16Weights(const QuantGemvParams &p, Format f, ScaleType s) {
  std::vector<float> w(static_cast<size_t>(p.N) * p.K);
  withFormat(f, s, [&](auto ft, auto st) {
    constexpr Format F = decltype(ft)::value;
    constexpr ScaleType S = decltype(st)::value;
    constexpr bool kFp8 = F == Format::kFp8;
    constexpr int kPerWord = kFp8 ? 4 : 8;
    const long rowBytes = kFp8 ? p.K : p.K / 2;
    const int shift = kFp8 ? 0 : quantgemv::log2Exact(p.block);
    for (int n = 0; n < p.N; ++n)
      for (int k = 0; k < p.K; k += kPerWord) {
        unsigned word;
        std::memcpy(&word, p.codes + n * rowBytes + (kFp8 ? k : k / 2), 4);
        float v[kPerWord];
        quantgemv::decodeWord<F, S>(p, n, k, shift, word, v);
        for (int j = 0; j < kPerWord; ++j)
          w[static_cast<size_t>(n) * p.K + k + j] = bf16Value(floatToBf16Bits(v[j]));
      }
  });
  return w;
}

/// The GEMM's result from bf16 weights `w` and bf16-rounded x in double, times the row
/// scale, plus bias; and in `mag` the sum of |w x| per output (for the tolerance).
inline std::vector<double> bf16Reference(const QuantGemvParams &p, const std::vector<float> &w,
                                         std::vector<double> *mag) {
  std::vector<double> y(static_cast<size_t>(p.T) * p.N);
  mag->assign(y.size(), 0.0);
  for (int t = 0; t < p.T; ++t)
    for (int n = 0; n < p.N; ++n) {
      double sum = 0.0, abs = 0.0;
      for (int k = 0; k < p.K; ++k) {
        const double xv = bf16Value(floatToBf16Bits(p.x[static_cast<long>(t) * p.x_stride + k]));
        sum += w[static_cast<size_t>(n) * p.K + k] * xv;
        abs += std::fabs(w[static_cast<size_t>(n) * p.K + k] * xv);
      }
      const double scale = quantgemv::rowScale(p, n);
      y[static_cast<size_t>(t) * p.N + n] = sum * scale + (p.bias ? p.bias[n] : 0.0);
      (*mag)[static_cast<size_t>(t) * p.N + n] = abs * std::fabs(scale);
    }
  return y;
}

/// The tolerance against the CPU QuantKernels (f32 activations, exact weights): both
/// operands' bf16 rounding (2^-9 relative each) on top of the GEMV's f32 bound.
inline double cpuTolerance(const quantgemv::testing::RandomQuantWeight &w,
                           const std::vector<float> &x, int64_t xStride, int64_t t, int64_t n) {
  double s = 0.0;
  for (int64_t k = 0; k < w.m.K; ++k)
    s += w.wabs[n * w.m.K + k] * std::fabs(x[t * xStride + k]);
  return (0.0040 + 1e-5) * s + 1e-6;
}

/// What one CTA of quantGemm computes, on the host: the same stage functions for every
/// thread fill the tiles, a scalar f32 FMA chain in k order stands in for the MMAs, and the
/// epilogue writes y as the kernel does.
template <Format F, ScaleType S>
void emulateCta(const QuantGemvParams &p, int bx, int by) {
  const int n0 = bx * kGemmTileN, t0 = by * kGemmTileT;
  const int shift = F == Format::kFp8 ? 0 : quantgemv::log2Exact(p.block);
  std::vector<unsigned short> a(kGemmTileAElems), b(kGemmTileBElems);
  std::vector<float> acc(kGemmTileT * kGemmTileN, 0.0f);
  for (int k0 = 0; k0 < p.K; k0 += kGemmTileK) {
    for (int tid = 0; tid < kGemmThreads; ++tid) {
      unsigned codes[4];
      float xs[8];
      loadWeightStage<F>(p, n0, k0, tid, codes);
      loadActStage(p, t0, k0, tid, xs);
      storeWeightStage<F, S>(p, n0, k0, tid, shift, codes, b.data());
      storeActStage(tid, xs, a.data());
    }
    for (int r = 0; r < kGemmTileT; ++r)
      for (int c = 0; c < kGemmTileN; ++c)
        for (int k = 0; k < kGemmTileK; ++k)
          acc[r * kGemmTileN + c] = rn::fma(bf16Value(a[r * kGemmLd + k]),
                                                    bf16Value(b[c * kGemmLd + k]),
                                                    acc[r * kGemmTileN + c]);
  }
  for (int tid = 0; tid < kGemmThreads; ++tid) {
    const int c = tid % kGemmTileN, n = n0 + c;
    if (n >= p.N) continue;
    const float scale = quantgemv::rowScale(p, n);
    for (int r = tid / kGemmTileN; r < kGemmTileT && t0 + r < p.T;
         r += kGemmThreads / kGemmTileN)
      p.y[static_cast<long>(t0 + r) * p.y_stride + n] =
          quantgemv::finishOutput(acc[r * kGemmTileN + c], scale, p.bias, n);
  }
}

/// The whole grid of quantGemm on the host.
inline void emulateGemm(const QuantGemvParams &p, Format f, ScaleType s) {
  withFormat(f, s, [&](auto ft, auto st) {
    for (unsigned by = 0; by < quantGemmGridY(p.T); ++by)
      for (unsigned bx = 0; bx < quantGemmGridX(p.N); ++bx)
        emulateCta<decltype(ft)::value, decltype(st)::value>(p, static_cast<int>(bx),
                                                             static_cast<int>(by));
  });
}

}  // namespace ingot::quantgemm::testing
