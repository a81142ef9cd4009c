// Launch ABI of the W8A8 FP8 kernels (codegen/cuda/kernels/fp8_w8a8.cuh, fp8_producers.cuh).
#pragma once
#ifndef INGOT_CORE_KERNELS_W8A8_PARAMS_H  // also a guard: the kernel sources inline these headers
#define INGOT_CORE_KERNELS_W8A8_PARAMS_H

// Plain C++ the host launcher and the device share: constants, the quantizer, epilogue and
// producer parameter structs, grid sizes and launch checks.

#include "core/kernels/abi.h"

namespace ingot {
namespace w8a8 {

/// Threads per CTA of both kernels (8 warps): one CTA per activation row for the quantizer.
constexpr int kW8a8Threads = 256;
/// Largest finite E4M3FN magnitude: a row's absmax maps onto it.
constexpr float kE4m3Max = 448.0f;
/// K and N are padded to multiples of 16 for cuBLASLt's FP8 kernels: its documented FP8
/// requirements are 16-byte aligned leading dimensions (16 one-byte codes) and 16-multiple
/// matrix dimensions for the tensor-core tiles.
constexpr int kFp8Align = 16;
/// Columns one quantizer thread handles per step: 4 codes make one 32-bit store.
constexpr int kCodesPerStep = 4;
/// The smallest row scale: FLT_MIN = 2^-126, the least normal f32. A row with absmax below
/// 448 * 2^-126 would get a subnormal scale, which the device flushes to zero (so 1 / s is
/// inf and its zeros NaN codes); with 2^-126 its codes x * 2^126 are exact and below 448.
constexpr float kMinRowScale = 1.17549435e-38f;
/// The absmax from which absmax / 448 is at least kMinRowScale: 448 * 2^-126 (exact).
constexpr float kMinScaledAbsMax = 448.0f * kMinRowScale;

/// ingot_fp8_quantize_rows: grid (rows, 1, 1), block (kW8a8Threads, 1, 1), no dynamic shared
/// memory. checkQuantizeRowsParams lists what must hold.
struct QuantizeRowsParams {
  const float *x;          ///< [rows, x_stride] f32
  unsigned char *codes;    ///< [rows, codes_stride] E4M3FN
  float *row_scales;       ///< [rows]: s[t] (1 for an all-zero row)
  long x_stride;           ///< floats between rows of x
  long codes_stride;       ///< bytes between rows of codes: >= K, a multiple of kFp8Align
  int K;                   ///< columns of x quantized; [K, codes_stride) are written as 0
  int rows;
};
static_assert(sizeof(QuantizeRowsParams) == 48, "QuantizeRowsParams layout changed");

/// ingot_fp8_scale_epilogue: grid (epilogueGridSize(rows * N), 1, 1), block (kW8a8Threads,
/// 1, 1), grid-stride over the rows * N outputs.
struct ScaleEpilogueParams {
  const float *acc;             ///< [rows, acc_stride] f32: the unit-scale FP8 GEMM
  const float *row_scales;      ///< [rows]
  const float *channel_scales;  ///< [N], or null (per-tensor weight scale)
  const float *bias;            ///< [N] or null
  float *y;                     ///< [rows, y_stride] f32
  long acc_stride, y_stride;    ///< floats between rows
  int N, rows;
  float global_scale;           ///< the weight's tensor scale (1 when per-channel)
};
static_assert(sizeof(ScaleEpilogueParams) == 72, "ScaleEpilogueParams layout changed");

/// CTAs of the epilogue: enough for one element per thread, at most 4096 (grid-stride above).
INGOT_ABI_HD unsigned epilogueGridSize(long count) {
  const long ctas = (count + kW8a8Threads - 1) / kW8a8Threads;
  return static_cast<unsigned>(ctas < 1 ? 1 : ctas > 4096 ? 4096 : ctas);
}

/// Null when `p` can be launched, else what is wrong.
INGOT_ABI_HD const char *checkQuantizeRowsParams(const QuantizeRowsParams &p) {
  if (!p.x || !p.codes || !p.row_scales) return "fp8 quantize rows: x, codes and row_scales must be set";
  if (p.K <= 0 || p.rows < 0) return "fp8 quantize rows: K must be positive and rows not negative";
  if (p.x_stride < p.K) return "fp8 quantize rows: x_stride must be at least K";
  if (p.codes_stride < p.K || p.codes_stride % kFp8Align != 0)
    return "fp8 quantize rows: codes_stride must be at least K and a multiple of 16";
  return nullptr;
}

/// ingot_fp8_rms_norm_quant: grid (rows, 1, 1), block (kW8a8Threads, 1, 1).
/// out = rms_norm(x) * gamma (no residual: the CUDA step's rms_norm has none), plus codes.
struct RmsNormQuantParams {
  const float *x;          ///< [rows, dim]
  const float *gamma;      ///< [dim]
  float *out;              ///< [rows, dim]
  unsigned char *codes;    ///< [rows, codes_stride] E4M3FN; [dim, codes_stride) zero
  float *row_scales;       ///< [rows]
  long codes_stride;       ///< >= dim, a multiple of kFp8Align
  int dim;
  int rows;
  float eps;
};
static_assert(sizeof(RmsNormQuantParams) == 64, "RmsNormQuantParams layout changed");

/// ingot_fp8_silu_mul_quant: grid (rows, 1, 1), block (kW8a8Threads, 1, 1).
/// out[t, d] = silu(gate[t, d]) * up[t, d] (row-major [rows, width] all three), plus codes.
struct SiluMulQuantParams {
  const float *gate;
  const float *up;
  float *out;
  unsigned char *codes;    ///< [rows, codes_stride] E4M3FN; [width, codes_stride) zero
  float *row_scales;       ///< [rows]
  long codes_stride;       ///< >= width, a multiple of kFp8Align
  int width;
  int rows;
};
static_assert(sizeof(SiluMulQuantParams) == 56, "SiluMulQuantParams layout changed");

/// Null when a producer with this output row width and codes stride can be launched, else
/// what is wrong (the runtime checks before each launch).
INGOT_ABI_HD const char *checkProducerCodes(const unsigned char *codes, const float *scales,
                                             long codesStride, int width, int rows) {
  if (!codes || !scales) return "fp8 producer: codes and row_scales must be set";
  if (width <= 0 || rows < 0) return "fp8 producer: width must be positive and rows not negative";
  if (codesStride < width || codesStride % kFp8Align != 0)
    return "fp8 producer: codes_stride must be at least the width and a multiple of 16";
  return nullptr;
}

/// The quantizer's view of producer row storage: row_scales and codes as given, x the output.
INGOT_ABI_HD QuantizeRowsParams producerCodes(const float *out, unsigned char *codes,
                                               float *scales, long codesStride, int width,
                                               int rows) {
  QuantizeRowsParams q{};
  q.x = out;
  q.codes = codes;
  q.row_scales = scales;
  q.x_stride = width;
  q.codes_stride = codesStride;
  q.K = width;
  q.rows = rows;
  return q;
}

}  // namespace w8a8
}  // namespace ingot

#endif  // INGOT_CORE_KERNELS_W8A8_PARAMS_H
