// Fused dequantize-GEMV/GEMM kernels for quantized linear weights (int4, fp8, nvfp4, mxfp4).
#pragma once
#include "core/kernels/quant_params.h"

// y[t, n] = sum_k x[t, k] * w[n, k] (+ bias[n]) for t < T, with w a quantized [N, K] matrix
// in the runtime's packed layout (runtime/backend/cpu/quant_linear.h, QuantMatrix): codes
// row-major [N, K], 4-bit ones two per byte with element 2i in the low nibble, block scales
// row-major [N, K / block] (the artifact's canonical order). Activations and outputs are f32
// (the CUDA backend keeps activations in f32); every product and sum is f32.
//
// Work split: one warp per output row n (kQuantRowsPerWarp rows). Lane L reads the row's
// 16-byte chunks L, L + 32, L + 64, ... (8-byte chunks where a row is not a whole number
// of 16 bytes, e.g. fp8 with K = 8 mod 16, or the codes are only 8-byte aligned), decodes
// them in registers, multiplies them with the matching activations of up to kQuantTileT
// tokens and accumulates in f32; a warp-shuffle butterfly sums the 32 lane partials. The
// warp passes over its row once per tile of kQuantTileT tokens (correctness first for
// prefill-sized T; a tensor-core GEMM is the later step there).
//
// The per-element decoders and the whole per-lane loop (laneRowDot) are INGOT_QUANT_HD: the
// host test runs the very same code for every lane and the same butterfly, against the CPU
// backend's QuantKernels. Everything below the math compiles only under NVRTC/nvcc.

#include "codegen/cuda/kernels/e4m3.cuh"

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#include <cuda_fp16.h>
#define INGOT_QUANT_HD __host__ __device__ __forceinline__
#define INGOT_QUANT_UNROLL _Pragma("unroll")
#else
#define INGOT_QUANT_HD inline
#define INGOT_QUANT_UNROLL
#endif
#if !defined(__CUDACC_RTC__)
#include <cstring>  // the host side of loadWords (nvcc's host pass included)
#endif

namespace ingot {
namespace quantgemv {


// ---- per-element math (host and device) -------------------------------------------------

using e4m3::bitsToFloat;

/// Exact IEEE binary16 -> f32 (f16 subnormals are f32 normals).
INGOT_QUANT_HD float halfToFloat(unsigned short h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  const unsigned sign = static_cast<unsigned>(h & 0x8000u) << 16;
  unsigned e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return bitsToFloat(sign | 0x7f800000u | (m << 13));
  if (e != 0) return bitsToFloat(sign | ((e + 112u) << 23) | (m << 13));
  if (m == 0) return bitsToFloat(sign);
  e = 113;
  while ((m & 0x400u) == 0) {
    m <<= 1;
    --e;
  }
  return bitsToFloat(sign | (e << 23) | ((m & 0x3ffu) << 13));
#endif
}

/// bf16 is the upper half of an f32.
INGOT_QUANT_HD float bf16ToFloat(unsigned short h) { return bitsToFloat(unsigned(h) << 16); }

/// An E2M1 code (low nibble) as f32, exactly: the normal codes (exponent field 1..3) are the
/// f32 of exponent e - 1 + 127 and mantissa bit m, code 1 is 0.5, code 0 is zero.
INGOT_QUANT_HD float e2m1Value(unsigned code) {
  const unsigned mag = code & 7u;
  const unsigned bits = mag >= 2u ? (mag << 22) + (126u << 23) : (mag == 1u ? 0x3f000000u : 0u);
  return bitsToFloat(bits | ((code & 8u) << 28));
}

/// An E4M3FN weight code as f32, exactly (e4m3::decode); the NaN codes 0x7F / 0xFF read as
/// +-480, as the CPU vector kernels read them: a quantizer never writes them.
INGOT_QUANT_HD float e4m3WeightValue(unsigned code) { return e4m3::decode(code); }

/// An E4M3FN block scale (nvfp4) as f32; its NaN codes give NaN, as on the CPU.
INGOT_QUANT_HD float e4m3ScaleValue(unsigned code) {
  return (code & 0x7fu) == 0x7fu ? bitsToFloat(0x7fc00000u) : e4m3WeightValue(code);
}

/// An E8M0 scale (mxfp4): 2^(code - 127); 0 is 2^-127 (an f32 subnormal, which a kernel
/// built with fast math flushes to zero in products), 0xFF is NaN.
INGOT_QUANT_HD float e8m0Value(unsigned code) {
  if (code == 0xffu) return bitsToFloat(0x7fc00000u);
  return bitsToFloat(code == 0 ? 0x00400000u : code << 23);
}


/// Element i of an int4 scale or zero/min tensor of type S.
template <ScaleType S>
INGOT_QUANT_HD float groupValue(const void *p, long i) {
  if (S == ScaleType::kF32) return static_cast<const float *>(p)[i];
  const unsigned short h = static_cast<const unsigned short *>(p)[i];
  return S == ScaleType::kF16 ? halfToFloat(h) : bf16ToFloat(h);
}

/// One weight from its code value q (the integer of an int4 nibble, or the decoded E2M1 /
/// E4M3 value) and its block's scale and zero/min: int4min s * q + m (one rounding), int4zero
/// s * (q - z), fp4 q * s, fp8 q (its scale applies to the whole row, at the end).
template <Format F>
INGOT_QUANT_HD float dequant(float q, float s, float z) {
  if (F == Format::kInt4Min) return rn::fma(s, q, z);
  if (F == Format::kInt4Zero) return rn::mul(s, q - z);
  if (F == Format::kFp8) return q;
  return rn::mul(q, s);
}

/// The factor of a row's sum: the fp8 channel scale times the global scale, else the global.
INGOT_QUANT_HD float rowScale(const QuantGemvParams &p, int n) {
  return p.channel_scales ? rn::mul(p.channel_scales[n], p.global_scale) : p.global_scale;
}

/// An output from the row's sum: sum * scale (+ bias, one fused multiply-add).
INGOT_QUANT_HD float finishOutput(float sum, float scale, const float *bias, int n) {
  return bias ? rn::fma(sum, scale, bias[n]) : rn::mul(sum, scale);
}

/// log2 of a power of two (block sizes; checked on the host).
INGOT_QUANT_HD int log2Exact(int v) {
  int s = 0;
  while ((1 << s) < v) ++s;
  return s;
}

/// CB bytes (8 or 16) at p, CB-aligned, as 32-bit words: one vector load on the device.
template <int CB>
INGOT_QUANT_HD void loadWords(const unsigned char *p, unsigned (&w)[CB / 4]) {
#if defined(__CUDA_ARCH__)
  if constexpr (CB == 16) {
    const uint4 v = __ldg(reinterpret_cast<const uint4 *>(p));
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  } else {
    const uint2 v = __ldg(reinterpret_cast<const uint2 *>(p));
    w[0] = v.x, w[1] = v.y;
  }
#else
  std::memcpy(w, p, CB);
#endif
}

/// E (4 or 8) activations of token row xr from element k (k a multiple of 4, rows 16-byte
/// aligned): float4 loads on the device.
template <int E>
INGOT_QUANT_HD void loadActivations(const float *xr, int k, float (&v)[E]) {
#if defined(__CUDA_ARCH__)
  INGOT_QUANT_UNROLL
  for (int i = 0; i < E; i += 4) {
    const float4 f = *reinterpret_cast<const float4 *>(xr + k + i);
    v[i] = f.x, v[i + 1] = f.y, v[i + 2] = f.z, v[i + 3] = f.w;
  }
#else
  for (int i = 0; i < E; ++i) v[i] = xr[k + i];
#endif
}

/// The decoded weights of one 32-bit word of row n's codes starting at element k: 8 nibbles
/// (4-bit formats; a word never straddles a block, blocks being multiples of 16) or 4 fp8
/// bytes, element order as stored (low nibble / low byte first).
template <Format F, ScaleType S>
INGOT_QUANT_HD void decodeWord(const QuantGemvParams &p, int n, int k, int blockShift,
                               unsigned word, float (&w)[F == Format::kFp8 ? 4 : 8]) {
  if constexpr (F == Format::kFp8) {
    INGOT_QUANT_UNROLL
    for (int j = 0; j < 4; ++j) w[j] = e4m3WeightValue((word >> (8 * j)) & 0xffu);
  } else {
    const long g = static_cast<long>(n) * (p.K >> blockShift) + (k >> blockShift);
    float s = 0.0f, z = 0.0f;
    if constexpr (F == Format::kInt4Min || F == Format::kInt4Zero) {
      s = groupValue<S>(p.scales, g);
      z = groupValue<S>(p.zeros, g);
    } else if constexpr (F == Format::kNvfp4) {
      s = e4m3ScaleValue(static_cast<const unsigned char *>(p.scales)[g]);
    } else {
      s = e8m0Value(static_cast<const unsigned char *>(p.scales)[g]);
    }
    INGOT_QUANT_UNROLL
    for (int j = 0; j < 8; ++j) {
      const unsigned c = (word >> (4 * j)) & 15u;
      const float q = (F == Format::kNvfp4 || F == Format::kMxfp4) ? e2m1Value(c)
                                                                    : static_cast<float>(c);
      w[j] = dequant<F>(q, s, z);
    }
  }
}

/// Lane `lane`'s partial sums of rows n0 .. n0 + NR - 1 (a row past N repeats row N - 1;
/// its sums are not written) for tokens t0 .. t0 + MT - 1 (those below T): its chunks of CB
/// bytes in order, each word decoded once per row, each activation word loaded once for all
/// rows, then one fma chain per (token, row) in element order. The next chunk's codes are
/// loaded before the current one is used. A (token, row) sum does not depend on NR or MT.
template <Format F, ScaleType S, int MT, int NR, int CB>
INGOT_QUANT_HD void laneRowDot(const QuantGemvParams &p, int n0, int t0, int lane,
                               float (&acc)[MT][NR]) {
  constexpr bool kFp8 = F == Format::kFp8;
  constexpr int kWords = CB / 4, kPerWord = kFp8 ? 4 : 8, kPerChunk = kWords * kPerWord;
  const long rowBytes = kFp8 ? p.K : p.K / 2;
  int n[NR];
  const unsigned char *row[NR];
  INGOT_QUANT_UNROLL
  for (int r = 0; r < NR; ++r) {
    n[r] = n0 + r < p.N ? n0 + r : p.N - 1;
    row[r] = p.codes + static_cast<long>(n[r]) * rowBytes;
  }
  const int chunks = static_cast<int>(rowBytes / CB);
  const int blockShift = kFp8 ? 0 : log2Exact(p.block);
  INGOT_QUANT_UNROLL
  for (int i = 0; i < MT; ++i) {
    INGOT_QUANT_UNROLL
    for (int r = 0; r < NR; ++r) acc[i][r] = 0.0f;
  }
  unsigned cur[NR][kWords];
  INGOT_QUANT_UNROLL
  for (int r = 0; r < NR; ++r)
    if (lane < chunks) loadWords<CB>(row[r] + static_cast<long>(lane) * CB, cur[r]);
  for (int c = lane; c < chunks; c += 32) {
    unsigned next[NR][kWords] = {};
    INGOT_QUANT_UNROLL
    for (int r = 0; r < NR; ++r)
      if (c + 32 < chunks) loadWords<CB>(row[r] + static_cast<long>(c + 32) * CB, next[r]);
    INGOT_QUANT_UNROLL
    for (int wi = 0; wi < kWords; ++wi) {
      const int k = c * kPerChunk + wi * kPerWord;
      float w[NR][kPerWord];
      INGOT_QUANT_UNROLL
      for (int r = 0; r < NR; ++r) decodeWord<F, S>(p, n[r], k, blockShift, cur[r][wi], w[r]);
      INGOT_QUANT_UNROLL
      for (int i = 0; i < MT; ++i) {
        if (MT == 1 || t0 + i < p.T) {
          float xv[kPerWord];
          loadActivations<kPerWord>(p.x + static_cast<long>(t0 + i) * p.x_stride, k, xv);
          INGOT_QUANT_UNROLL
          for (int r = 0; r < NR; ++r) {
            INGOT_QUANT_UNROLL
            for (int j = 0; j < kPerWord; ++j) acc[i][r] = rn::fma(w[r][j], xv[j], acc[i][r]);
          }
        }
      }
    }
    INGOT_QUANT_UNROLL
    for (int r = 0; r < NR; ++r) {
      INGOT_QUANT_UNROLL
      for (int wi = 0; wi < kWords; ++wi) cur[r][wi] = next[r][wi];
    }
  }
}

/// Whether row chunks of 16 bytes fit the matrix (else the kernel reads 8-byte chunks).
INGOT_QUANT_HD bool sixteenByteChunks(const QuantGemvParams &p, bool fp8) {
  const long rowBytes = fp8 ? p.K : p.K / 2;
  return rowBytes % 16 == 0 && reinterpret_cast<unsigned long>(p.codes) % 16 == 0;
}


#if defined(__CUDACC__) || defined(__CUDACC_RTC__)

// ---- device code -------------------------------------------------------------------------

/// Sum over the warp; every lane gets it (xor butterfly 16, 8, 4, 2, 1).
__device__ __forceinline__ float warpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// Rows n0 .. n0 + NR - 1 (those below N) for tokens t0 .. t0 + MT - 1 (those below T).
template <Format F, ScaleType S, int MT, int NR, int CB>
__device__ __forceinline__ void rowTile(const QuantGemvParams &p, int n0, int t0, int lane) {
  float acc[MT][NR];
  laneRowDot<F, S, MT, NR, CB>(p, n0, t0, lane, acc);
#pragma unroll
  for (int r = 0; r < NR; ++r) {
    const int n = n0 + r;
    const float scale = rowScale(p, n < p.N ? n : p.N - 1);
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      const float sum = warpSum(acc[i][r]);
      if (lane == 0 && n < p.N && t0 + i < p.T)
        p.y[static_cast<long>(t0 + i) * p.y_stride + n] = finishOutput(sum, scale, p.bias, n);
    }
  }
}

/// The body of every entry point: warp w of CTA b owns rows n0 = (b * kQuantWarps + w) *
/// kQuantRowsPerWarp onwards. One token: all its rows in one pass, sharing the activation
/// loads. More: row by row, one pass per tile of up to kQuantTileT tokens (the registers
/// of a rows x tokens tile would spill).
template <Format F, ScaleType S>
__device__ __forceinline__ void quantGemv(const QuantGemvParams &p) {
  const int lane = threadIdx.x & 31;
  const int n0 = (blockIdx.x * kQuantWarps + (threadIdx.x >> 5)) * kQuantRowsPerWarp;
  if (n0 >= p.N) return;
  const bool wide = sixteenByteChunks(p, F == Format::kFp8);
  if (p.T == 1) {
    if (wide) rowTile<F, S, 1, kQuantRowsPerWarp, 16>(p, n0, 0, lane);
    else rowTile<F, S, 1, kQuantRowsPerWarp, 8>(p, n0, 0, lane);
    return;
  }
  for (int n = n0; n < n0 + kQuantRowsPerWarp && n < p.N; ++n)
    for (int t0 = 0; t0 < p.T; t0 += kQuantTileT) {
      if (wide) rowTile<F, S, kQuantTileT, 1, 16>(p, n, t0, lane);
      else rowTile<F, S, kQuantTileT, 1, 8>(p, n, t0, lane);
    }
}

#endif  // __CUDACC__ || __CUDACC_RTC__

}  // namespace quantgemv
}  // namespace ingot

#undef INGOT_QUANT_UNROLL
