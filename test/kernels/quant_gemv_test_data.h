// Test support for the quantized GEMV kernels: random packed weights of every format, the
// CPU backend's scalar QuantKernels as the reference, and an f32 error bound per output.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codegen/cuda/kernels/quant_gemv.cuh"
#include "runtime/backend/cpu/half_float.h"
#include "runtime/backend/cpu/quant_formats.h"
#include "runtime/backend/cpu/quant_linear.h"

namespace ingot::quantgemv::testing {

static_assert(static_cast<int>(Format::kInt4Min) == static_cast<int>(QuantFormat::kInt4Min) &&
                  static_cast<int>(Format::kInt4Zero) == static_cast<int>(QuantFormat::kInt4Zero) &&
                  static_cast<int>(Format::kFp8) == static_cast<int>(QuantFormat::kFp8) &&
                  static_cast<int>(Format::kNvfp4) == static_cast<int>(QuantFormat::kNvfp4) &&
                  static_cast<int>(Format::kMxfp4) == static_cast<int>(QuantFormat::kMxfp4),
              "quantgemv::Format must mirror ingot::QuantFormat");
static_assert(static_cast<int>(ScaleType::kF16) == static_cast<int>(GroupScaleType::kF16) &&
                  static_cast<int>(ScaleType::kBF16) == static_cast<int>(GroupScaleType::kBF16) &&
                  static_cast<int>(ScaleType::kF32) == static_cast<int>(GroupScaleType::kF32),
              "quantgemv::ScaleType must mirror ingot::GroupScaleType");

/// One weight format the quantized kernels are tested on: format, group scale type and
/// group size (0 for fp8's per-channel scales), with a name for test traces.
struct FormatCase {
  QuantFormat format;
  GroupScaleType scaleType;
  int64_t block;
  const char *name;
};

/// Every (format, scale type) the kernels take, in a fixed order (int4 min f16/bf16/f32,
/// int4 zero f16/bf16/f32, fp8, nvfp4, mxfp4); `int4Blocks` gives the six int4 cases' group
/// sizes, so that each test spreads its own choice of group sizes over the scale types.
inline std::vector<FormatCase> formatCases(const int64_t (&int4Blocks)[6]) {
  return {
      {QuantFormat::kInt4Min, GroupScaleType::kF16, int4Blocks[0], "int4min_f16"},
      {QuantFormat::kInt4Min, GroupScaleType::kBF16, int4Blocks[1], "int4min_bf16"},
      {QuantFormat::kInt4Min, GroupScaleType::kF32, int4Blocks[2], "int4min_f32"},
      {QuantFormat::kInt4Zero, GroupScaleType::kF16, int4Blocks[3], "int4zero_f16"},
      {QuantFormat::kInt4Zero, GroupScaleType::kBF16, int4Blocks[4], "int4zero_bf16"},
      {QuantFormat::kInt4Zero, GroupScaleType::kF32, int4Blocks[5], "int4zero_f32"},
      {QuantFormat::kFp8, GroupScaleType::kF16, 0, "fp8"},
      {QuantFormat::kNvfp4, GroupScaleType::kF16, 16, "nvfp4"},
      {QuantFormat::kMxfp4, GroupScaleType::kF16, 32, "mxfp4"},
  };
}

/// A random quantized [N, K] matrix that owns its packed bytes (codes start `codeOffset`
/// bytes into an 16-byte aligned buffer, so 8 gives codes that are only 8-byte aligned).
struct RandomQuantWeight {
  QuantMatrix m;
  std::vector<uint8_t> codeStorage, scales, zeros;
  std::vector<float> channel;
  /// |w[n, k]| from the exact decoders, or for int4 the magnitudes of the terms the CPU
  /// kernel sums (s q and the zero/min term, which may cancel), for the error bound.
  std::vector<double> wabs;
};

inline void putGroupValue(std::vector<uint8_t> &out, GroupScaleType type, int64_t i, float v) {
  if (type == GroupScaleType::kF32) {
    std::memcpy(&out[4 * i], &v, 4);
    return;
  }
  const uint16_t h = type == GroupScaleType::kF16 ? f32ToF16(v) : f32ToBf16(v);
  std::memcpy(&out[2 * i], &h, 2);
}

inline double readGroupValue(const std::vector<uint8_t> &in, GroupScaleType type, int64_t i) {
  if (type == GroupScaleType::kF32) {
    float f;
    std::memcpy(&f, &in[4 * i], 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, &in[2 * i], 2);
  return type == GroupScaleType::kF16 ? f16ToF32(h) : bf16ToF32(h);
}

/// Fresh random codes and scales of `format`; `block` is the int4 group (16, 32 for fp4,
/// K for fp8). fp8 codes avoid the NaN codes 0x7F / 0xFF (no quantizer writes them); fp8
/// gets per-channel scales when `perChannel`, else one per-tensor scale.
inline RandomQuantWeight randomQuantWeight(std::mt19937 &rng, QuantFormat format,
                                           GroupScaleType scaleType, int64_t N, int64_t K,
                                           int64_t block, bool perChannel, int codeOffset) {
  RandomQuantWeight r;
  QuantMatrix &m = r.m;
  m.format = format;
  m.N = N;
  m.K = K;
  m.block = format == QuantFormat::kFp8 ? K : block;
  m.scale_type = scaleType;
  const int64_t rowBytes = m.rowBytes(), groups = m.groups();
  r.codeStorage.resize(N * rowBytes + 32);
  const uintptr_t base = reinterpret_cast<uintptr_t>(r.codeStorage.data());
  uint8_t *codes = r.codeStorage.data() + ((16 - base % 16) % 16) + codeOffset;
  std::uniform_int_distribution<int> byte(0, 255);
  for (int64_t i = 0; i < N * rowBytes; ++i) {
    int b = byte(rng);
    if (format == QuantFormat::kFp8)
      while ((b & 0x7f) == 0x7f) b = byte(rng);
    codes[i] = static_cast<uint8_t>(b);
  }
  m.codes = codes;
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  const bool int4 = format == QuantFormat::kInt4Min || format == QuantFormat::kInt4Zero;
  if (int4) {
    const int64_t each = scaleType == GroupScaleType::kF32 ? 4 : 2;
    r.scales.resize(N * groups * each);
    r.zeros.resize(N * groups * each);
    for (int64_t i = 0; i < N * groups; ++i) {
      putGroupValue(r.scales, scaleType, i, 0.002f + 0.02f * u(rng));
      putGroupValue(r.zeros, scaleType, i,
                    format == QuantFormat::kInt4Min ? 0.2f * (u(rng) - 0.5f) : 15.0f * u(rng));
    }
    m.scales = r.scales.data();
    m.zeros = r.zeros.data();
  } else if (format == QuantFormat::kNvfp4 || format == QuantFormat::kMxfp4) {
    r.scales.resize(N * groups);
    std::uniform_int_distribution<int> exponent(118, 130);
    for (int64_t i = 0; i < N * groups; ++i)
      r.scales[i] = format == QuantFormat::kNvfp4 ? f32ToE4m3fn(0.01f + 3.0f * u(rng))
                                                  : static_cast<uint8_t>(exponent(rng));
    m.scales = r.scales.data();
    if (format == QuantFormat::kNvfp4) m.global_scale = 0.05f + u(rng);
  } else {
    if (perChannel) {
      r.channel.resize(N);
      for (float &c : r.channel) c = 0.0005f + 0.004f * u(rng);
      m.channel_scales = r.channel.data();
    } else {
      m.global_scale = 0.0005f + 0.004f * u(rng);
    }
  }
  // Exact magnitudes of the weights, for the error bound.
  r.wabs.resize(N * K);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const uint8_t *row = codes + n * rowBytes;
      const uint8_t nib = (k & 1) ? row[k / 2] >> 4 : row[k / 2] & 15;
      const int64_t g = n * groups + k / m.block;
      double w = 0.0;
      switch (format) {
        case QuantFormat::kInt4Min:
          w = readGroupValue(r.scales, scaleType, g) * nib +
              std::fabs(readGroupValue(r.zeros, scaleType, g));
          break;
        case QuantFormat::kInt4Zero:
          w = readGroupValue(r.scales, scaleType, g) *
              (nib + std::fabs(readGroupValue(r.zeros, scaleType, g)));
          break;
        case QuantFormat::kFp8:
          w = e4m3fnToF32(row[k]) * (perChannel ? r.channel[n] : 1.0) * m.global_scale;
          break;
        case QuantFormat::kNvfp4:
          w = e2m1ToF32(nib) * e4m3fnToF32(r.scales[g]) * m.global_scale;
          break;
        case QuantFormat::kMxfp4: w = e2m1ToF32(nib) * e8m0ToF32(r.scales[g]); break;
      }
      r.wabs[n * K + k] = std::fabs(w);
    }
  return r;
}

/// Random normal activations [T, stride] (zero in the padding) and a random bias.
inline std::vector<float> randomActivations(std::mt19937 &rng, int64_t T, int64_t K,
                                            int64_t stride) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(T * stride, 0.0f);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k) x[t * stride + k] = normal(rng);
  return x;
}

/// y [T, yStride] from the CPU backend's scalar QuantKernels (the reference semantics).
inline std::vector<float> cpuQuantLinear(const QuantMatrix &m, const std::vector<float> &x,
                                         int64_t xStride, int64_t T, const float *bias,
                                         int64_t yStride) {
  const QuantKernels &qk = scalarQuantKernels();
  const int64_t prepared = qk.prepared_floats(m);
  std::vector<float> xq(T * prepared);
  for (int64_t t = 0; t < T; ++t) qk.prepare(m, x.data() + t * xStride, xq.data() + t * prepared);
  std::vector<float> y(T * yStride, 0.0f);
  QuantLinearArgs a;
  a.w = &m;
  a.xq = xq.data();
  a.xq_stride = prepared;
  a.bias = bias;
  a.y = y.data();
  a.y_stride = yStride;
  a.T = T;
  qk.linear(a, 0, m.N);
  return y;
}

/// The tolerance of output (t, n): f32 rounding of two K-term sums (kernel and reference in
/// different orders), relative to sum |w x|; one wrong element is off by about 1/K of it.
inline double outputTolerance(const RandomQuantWeight &w, const std::vector<float> &x,
                              int64_t xStride, int64_t t, int64_t n) {
  double s = 0.0;
  for (int64_t k = 0; k < w.m.K; ++k)
    s += w.wabs[n * w.m.K + k] * std::fabs(x[t * xStride + k]);
  return 1e-5 * s + 1e-6;
}

/// Kernel parameters for `w` (device or host pointers alike).
inline QuantGemvParams gemvParams(const QuantMatrix &m, const float *x, int64_t xStride,
                                  const float *bias, float *y, int64_t yStride, int64_t T) {
  QuantGemvParams p{};
  p.codes = m.codes;
  p.scales = m.scales;
  p.zeros = m.zeros;
  p.channel_scales = m.channel_scales;
  p.x = x;
  p.bias = bias;
  p.y = y;
  p.x_stride = xStride;
  p.y_stride = yStride;
  p.N = static_cast<int>(m.N);
  p.K = static_cast<int>(m.K);
  p.T = static_cast<int>(T);
  p.block = static_cast<int>(m.block);
  p.scale_type = static_cast<int>(m.scale_type);
  p.global_scale = m.global_scale;
  return p;
}

}  // namespace ingot::quantgemv::testing
