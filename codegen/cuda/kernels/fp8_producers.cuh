// rms_norm and silu_mul that also quantize their f32 output rows for W8A8 fp8 linears.
#pragma once

// A W8A8 linear (kernels/fp8_w8a8.cuh) needs its f32 input as per-token E4M3 codes and one
// scale per row. When that input is made by rms_norm or silu_mul, the producer writes the
// codes itself: one CTA per row computes the row as the fused kernel would
// (kernels/fused_ops.cuh math: rmsInverse, rmsNormElement, siluMul), stores it (residual adds
// and other consumers still read the f32 row), takes the absmax of what each thread wrote,
// and after a barrier runs the quantizer's own tail (w8a8::blockAbsMax, w8a8::encodeRow, so
// threadEncode over the stored row): the codes and scale are bit for bit those
// ingot_fp8_quantize_rows would make from the same f32 row. All q/k/v projections of one
// rms_norm then share one quantization, and a linear whose input was quantized this way
// skips the separate quantizer pass. f32 activations only (W8A8 linears read f32).
// The per-thread absmax is INGOT_W8A8_HD so codegen/cuda/Fp8ProducersHostTest.cpp runs it.

#include "codegen/cuda/kernels/fp8_w8a8.cuh"
#include "codegen/cuda/kernels/fused_ops.cuh"

namespace ingot {
namespace w8a8 {

static_assert(fused::kFusedThreads == kW8a8Threads,
              "the producers run fused::blockSum and the quantizer's reduction in one CTA");

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
INGOT_W8A8_HD const char *checkProducerCodes(const unsigned char *codes, const float *scales,
                                             long codesStride, int width, int rows) {
  if (!codes || !scales) return "fp8 producer: codes and row_scales must be set";
  if (width <= 0 || rows < 0) return "fp8 producer: width must be positive and rows not negative";
  if (codesStride < width || codesStride % kFp8Align != 0)
    return "fp8 producer: codes_stride must be at least the width and a multiple of 16";
  return nullptr;
}

/// The absmax (flushedAbs, NaN sticks) over the elements thread `tid` of `threads` wrote in
/// a producer row: columns tid, tid + threads, ... (the fused kernels' ownership).
INGOT_W8A8_HD float producerThreadAbsMax(const float *row, int width, int tid, int threads) {
  float m = 0.0f;
  for (int d = tid; d < width; d += threads) {
    const float a = flushedAbs(row[d]);
    m = a > m ? a : m;
    if (a != a) m = a;
  }
  return m;
}

/// The quantizer's view of producer row storage: row_scales and codes as given, x the output.
INGOT_W8A8_HD QuantizeRowsParams producerCodes(const float *out, unsigned char *codes,
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

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)

/// Body of ingot_fp8_rms_norm_quant: row blockIdx.x.
__device__ __forceinline__ void rmsNormQuant(const RmsNormQuantParams &p) {
  const int t = blockIdx.x;
  if (t >= p.rows) return;
  const long base = static_cast<long>(t) * p.dim;
  float squares = 0.0f;
  for (int d = threadIdx.x; d < p.dim; d += kW8a8Threads) {
    const float r = p.x[base + d];
    squares += r * r;
  }
  const float inv = fused::rmsInverse(fused::blockSum(squares), p.dim, p.eps);
  for (int d = threadIdx.x; d < p.dim; d += kW8a8Threads)
    p.out[base + d] = fused::rmsNormElement(p.x[base + d], inv, p.gamma[d]);
  const float m = blockAbsMax(producerThreadAbsMax(p.out + base, p.dim, threadIdx.x, kW8a8Threads));
  // blockAbsMax's barrier also makes every thread's stored elements visible to the encoder.
  encodeRow(producerCodes(p.out, p.codes, p.row_scales, p.codes_stride, p.dim, p.rows), t, m);
}

/// Body of ingot_fp8_silu_mul_quant: row blockIdx.x.
__device__ __forceinline__ void siluMulQuant(const SiluMulQuantParams &p) {
  const int t = blockIdx.x;
  if (t >= p.rows) return;
  const long base = static_cast<long>(t) * p.width;
  for (int d = threadIdx.x; d < p.width; d += kW8a8Threads)
    p.out[base + d] = fused::siluMul(p.gate[base + d], p.up[base + d]);
  const float m =
      blockAbsMax(producerThreadAbsMax(p.out + base, p.width, threadIdx.x, kW8a8Threads));
  encodeRow(producerCodes(p.out, p.codes, p.row_scales, p.codes_stride, p.width, p.rows), t, m);
}

#endif

}  // namespace w8a8
}  // namespace ingot
