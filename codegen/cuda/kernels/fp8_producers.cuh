// rms_norm and silu_mul that also quantize their f32 output rows for W8A8 fp8 linears.
#pragma once
#include "core/kernels/w8a8_params.h"

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
// The per-thread absmax is INGOT_W8A8_HD so test/kernels/fp8_producers_host_test.cc runs it.

#include "codegen/cuda/kernels/fp8_w8a8.cuh"
#include "codegen/cuda/kernels/fused_ops.cuh"

namespace ingot {
namespace w8a8 {

static_assert(fused::kFusedThreads == kW8a8Threads,
              "the producers run fused::blockSum and the quantizer's reduction in one CTA");


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
