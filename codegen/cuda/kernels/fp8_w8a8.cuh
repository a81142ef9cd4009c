// W8A8 FP8 linears: the per-token E4M3 activation quantizer and the scale epilogue that
// surround the cuBLASLt FP8 GEMM (runtime/backend/cuda/cuda_fp8_linear.cc).
#pragma once
#include "core/kernels/w8a8_params.h"

// The W8A8 path of an fp8 linear (per-output-channel E4M3 weights, runtime/backend/cpu/
// quant_linear.h) on sm_90 and newer:
//   1. ingot_fp8_quantize_rows: every activation row t of x [rows, K] (f32) becomes E4M3 codes
//      q[t, k] = e4m3(x[t, k] / s[t]) with one f32 scale s[t] = absmax_k |x[t, k]| / 448 per
//      row (per token), written into a codes buffer whose row stride is K rounded up to 16
//      (kFp8Align); the padding columns are written as zero codes, so the GEMM's padded K adds
//      nothing.
//   2. cuBLASLt (CublasLt::gemmFp8): acc [rows, Np] f32 = q . w^T with unit scales, Np = N
//      rounded up to 16 (the weight codes are padded with zero rows once at load).
//   3. ingot_fp8_scale_epilogue: y[t, n] = acc[t, n] * (s[t] * c[n] * g) + bias[n], c the
//      weight's channel scales (1 when per-tensor), g its global scale: the un-padding, both
//      scale vectors and the bias in one pass.
// The per-thread loops are INGOT_W8A8_HD so the host test runs the very code the kernels
// run, thread by thread (test/kernels/w8a8_host_test.cc).
//
// The kernels are built with --use_fast_math (approximate division, flush-to-zero), while
// the host emulation (test/kernels/w8a8_test_data.h) that test/gpu/fp8_linear_test.cc compares
// codes against is exact IEEE: so the scale's division, the reciprocal and every product
// go through correctly rounded intrinsics (__fdiv_rn, __frcp_rn, __fmul_rn, __fmaf_rn) on the
// device, and every value FTZ would flush is flushed explicitly on both sides (a subnormal
// activation reads as a signed zero; a row whose scale would be subnormal gets the smallest
// normal one), so host and device produce the same code bytes and scales.

#include "codegen/cuda/kernels/e4m3.cuh"

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define INGOT_W8A8_HD __host__ __device__ __forceinline__
#else
#define INGOT_W8A8_HD inline
#endif

namespace ingot {
namespace w8a8 {


/// |v| with a subnormal v read as 0, as the device's flush-to-zero reads it: integer
/// arithmetic, so the absmax of a row is the same bits on host and device. NaN stays NaN.
INGOT_W8A8_HD float flushedAbs(float v) {
  const unsigned ax = e4m3::floatToBits(v) & 0x7fffffffu;
  if (ax < 0x00800000u) return 0.0f;
  return e4m3::bitsToFloat(ax);
}

/// f32 -> E4M3FN (e4m3::encode): round to nearest even, saturating at +-448 (satfinite:
/// what cuBLASLt's own FP8 outputs do); NaN -> 0x7F. Integer arithmetic only, so host and
/// device agree bit for bit.
INGOT_W8A8_HD unsigned encodeE4m3(float f) { return e4m3::encode(f); }

/// A row's scale from its absmax (flushedAbs values: 0, normal, inf or NaN): absmax / 448
/// correctly rounded, at least kMinRowScale (a tiny but nonzero row keeps its codes), or 1
/// for an all-zero row (its codes are 0). A NaN in the row (absmax NaN: scale 1) or an inf
/// (scale inf: inf * 0) reaches the GEMM as the NaN code 0x7F, so the outputs are NaN
/// rather than hidden.
INGOT_W8A8_HD float rowScale(float absmax) {
  if (!(absmax > 0.0f)) return 1.0f;
  if (absmax < kMinScaledAbsMax) return kMinRowScale;
  return rn::div(absmax, kE4m3Max);
}

/// 1 / s correctly rounded: the `inv` threadEncode multiplies by. s is kMinRowScale or more
/// (finite: at most FLT_MAX / 448, so 1 / s is normal) or inf (0).
INGOT_W8A8_HD float rowInverse(float s) { return rn::rcp(s); }

/// The E4M3 code of activation v in a row of inverse scale inv: a subnormal v is a signed
/// zero (flush-to-zero on the device), the product correctly rounded; a product below
/// 2^-126 encodes to a signed zero whether or not it was flushed.
INGOT_W8A8_HD unsigned activationCode(float v, float inv) {
  const unsigned bits = e4m3::floatToBits(v);
  if ((bits & 0x7fffffffu) < 0x00800000u) return (bits >> 24) & 0x80u;
  return encodeE4m3(rn::mul(v, inv));
}

/// |x| maximum over the columns thread `tid` of `threads` reads in row `t` (columns
/// kCodesPerStep * (tid + i * threads) .. +3, those below K).
INGOT_W8A8_HD float threadAbsMax(const QuantizeRowsParams &p, int t, int tid, int threads) {
  const float *row = p.x + static_cast<long>(t) * p.x_stride;
  float m = 0.0f;
  for (long c0 = static_cast<long>(tid) * kCodesPerStep; c0 < p.K;
       c0 += static_cast<long>(threads) * kCodesPerStep)
    for (int j = 0; j < kCodesPerStep; ++j)
      if (c0 + j < p.K) {
        const float a = flushedAbs(row[c0 + j]);
        m = a > m ? a : m;
        if (a != a) m = a;  // NaN sticks (a comparison would drop it)
      }
  return m;
}

/// Writes the codes of row `t` that thread `tid` of `threads` owns, `inv` = rowInverse(s[t]): four
/// columns per step as one 32-bit word, zero past K up to codes_stride.
INGOT_W8A8_HD void threadEncode(const QuantizeRowsParams &p, int t, int tid, int threads, float inv) {
  const float *row = p.x + static_cast<long>(t) * p.x_stride;
  unsigned char *out = p.codes + static_cast<long>(t) * p.codes_stride;
  for (long c0 = static_cast<long>(tid) * kCodesPerStep; c0 < p.codes_stride;
       c0 += static_cast<long>(threads) * kCodesPerStep) {
    unsigned word = 0;
    for (int j = 0; j < kCodesPerStep; ++j)
      if (c0 + j < p.K) word |= activationCode(row[c0 + j], inv) << (8 * j);
    *reinterpret_cast<unsigned *>(out + c0) = word;  // codes rows are 16-byte multiples
  }
}

/// Output `i` (row-major over rows x N) of the epilogue: acc * ((s[t] * c[n]) * g), each
/// product rounded, the bias added in the FMA's single rounding: the host's bits, except
/// where a product falls below 2^-126 (a row at kMinRowScale), which the device flushes.
INGOT_W8A8_HD void epilogueElement(const ScaleEpilogueParams &p, long i) {
  const long t = i / p.N, n = i - t * p.N;
  const float c = p.channel_scales ? p.channel_scales[n] : 1.0f;
  const float scale = rn::mul(rn::mul(p.row_scales[t], c), p.global_scale);
  const float a = p.acc[t * p.acc_stride + n];
  p.y[t * p.y_stride + n] = p.bias ? rn::fma(a, scale, p.bias[n]) : rn::mul(a, scale);
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)

/// The maximum of every thread's `m` over the CTA (NaN sticks): warp shuffles and one shared
/// slot per warp. Every thread gets it; call once per kernel (its shared slots are reused
/// without a second barrier).
__device__ __forceinline__ float blockAbsMax(float m) {
  __shared__ float warpMax[kW8a8Threads / 32];
  for (int off = 16; off > 0; off >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, m, off);
    m = (o > m || o != o) ? o : m;
  }
  if ((threadIdx.x & 31) == 0) warpMax[threadIdx.x >> 5] = m;
  __syncthreads();
  m = warpMax[0];
  for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w)
    m = (warpMax[w] > m || warpMax[w] != warpMax[w]) ? warpMax[w] : m;
  return m;
}

/// Row t's scale and codes from its absmax: the quantizer's tail, shared with the producers
/// that quantize their own output rows (kernels/fp8_producers.cuh). The row must be visible
/// to every thread of the CTA (a barrier after it was written).
__device__ __forceinline__ void encodeRow(const QuantizeRowsParams &p, int t, float absmax) {
  const float s = rowScale(absmax);
  if (threadIdx.x == 0) p.row_scales[t] = s;
  threadEncode(p, t, threadIdx.x, blockDim.x, rowInverse(s));
}

/// Body of ingot_fp8_quantize_rows: CTA = row. absmax by warp shuffles and one shared slot
/// per warp, then the codes.
__device__ __forceinline__ void quantizeRows(const QuantizeRowsParams &p) {
  const int t = blockIdx.x;
  if (t >= p.rows) return;
  encodeRow(p, t, blockAbsMax(threadAbsMax(p, t, threadIdx.x, blockDim.x)));
}

/// Body of ingot_fp8_scale_epilogue.
__device__ __forceinline__ void scaleEpilogue(const ScaleEpilogueParams &p) {
  const long count = static_cast<long>(p.rows) * p.N;
  for (long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<long>(gridDim.x) * blockDim.x)
    epilogueElement(p, i);
}

#endif

}  // namespace w8a8
}  // namespace ingot
