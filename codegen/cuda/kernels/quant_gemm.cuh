// Tensor-core dequantizing GEMM for quantized linear weights at prefill token counts.
#pragma once
#include "core/kernels/quant_params.h"

// y[t, n] = sum_k x[t, k] * w[n, k] (+ bias[n]): the product of quant_gemv.cuh, same
// parameters (QuantGemvParams), same packed weight layout, same f32 x and y, for T large
// enough that one decode pass per 4-token tile (the GEMV) costs more than a tiled read.
//
// Work split: one CTA of kGemmThreads (8 warps) per output tile of kGemmTileT tokens x
// kGemmTileN outputs; grid (ceil(N / kGemmTileN), ceil(T / kGemmTileT), 1). Along K in
// steps of kGemmTileK, every thread
//   - loads 16 consecutive codes of one weight row (8 bytes of 4-bit codes or 16 of fp8)
//     and 8 activations of one token into registers (loadWeightStage, loadActStage),
//   - decodes the codes with the GEMV's decodeWord (scales applied, fp8's row scale left to
//     the end) and rounds weights and activations to bf16 into shared memory
//     (storeWeightStage, storeActStage),
// and each warp multiplies its 32 x 32 sub-tile with nvcuda::wmma bf16 16x16x16 fragments,
// f32 accumulation. Double-buffered: the next step's global loads are issued before this
// step's MMAs and decoded into the other shared buffer after them (one barrier per step).
// cp.async does not fit: both operands are transformed (decoded, rounded) on the way in.
// The epilogue stages the f32 accumulators through shared memory (aliasing the operand
// buffers) and writes y with the row scale and bias (finishOutput), coalesced along N.
//
// Edges: T and N need not be multiples of the tile (rows past them load as zero and are
// not written); K must be a multiple of 16 (every 4-bit format's smallest block; fp8's K
// may be 8 mod 16 for the GEMV, not here: checkQuantGemmShape), so a K step holds whole 16-element groups and the last one may
// be half full (zeros). Precision: weights and activations are rounded to bf16 once (int4
// weights after s q + m; fp8, nvfp4 and mxfp4 weights are exact in bf16), products and sums
// in f32 — unlike the GEMV, which keeps f32 activations.
//
// The stage functions are INGOT_QUANT_HD: the host test runs them for every thread of a
// tile against the CPU backend's weights. The MMAs and the kernel compile only under NVRTC.

#include "codegen/cuda/kernels/quant_gemv.cuh"

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#include <cuda_bf16.h>
#include <mma.h>
#define INGOT_QGEMM_UNROLL _Pragma("unroll")
#else
#define INGOT_QGEMM_UNROLL
#endif

namespace ingot {
namespace quantgemm {



/// f32 -> bf16 bits, round to nearest even (the device's __float2bfloat16_rn); NaN stays NaN.
INGOT_QUANT_HD unsigned short floatToBf16Bits(float f) {
#if defined(__CUDA_ARCH__)
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
#else
  unsigned bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<unsigned short>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<unsigned short>(bits >> 16);
#endif
}

/// 8 or 16 bf16 values (as bits, element order) to a 16-byte aligned shared-memory row.
template <int E>
INGOT_QUANT_HD void storeBf16Row(unsigned short *dst, const unsigned short (&v)[E]) {
  static_assert(E % 8 == 0, "whole 16-byte stores");
#if defined(__CUDA_ARCH__)
  INGOT_QGEMM_UNROLL
  for (int i = 0; i < E; i += 8) {
    uint4 q;
    q.x = v[i] | (unsigned(v[i + 1]) << 16);
    q.y = v[i + 2] | (unsigned(v[i + 3]) << 16);
    q.z = v[i + 4] | (unsigned(v[i + 5]) << 16);
    q.w = v[i + 6] | (unsigned(v[i + 7]) << 16);
    *reinterpret_cast<uint4 *>(dst + i) = q;
  }
#else
  std::memcpy(dst, v, 2 * E);
#endif
}

/// The weight tile's row and first column that thread `tid` owns: 16 codes of one row.
INGOT_QUANT_HD int weightRowOf(int tid) { return tid / (kGemmTileK / 16); }
INGOT_QUANT_HD int weightColOf(int tid) { return (tid % (kGemmTileK / 16)) * 16; }
/// The activation tile's token and first column that thread `tid` owns: 8 of one token.
INGOT_QUANT_HD int actRowOf(int tid) { return tid / (kGemmTileK / 8); }
INGOT_QUANT_HD int actColOf(int tid) { return (tid % (kGemmTileK / 8)) * 8; }

/// Thread `tid`'s raw codes of the weight tile at (n0, k0): 16 codes of row n0 + its row
/// from k0 + its column, as 2 (4-bit) or 4 (fp8) words; zeros past N or K. Codes 8-byte
/// aligned and K a multiple of 16 make every load an aligned 8-byte one.
template <Format F>
INGOT_QUANT_HD void loadWeightStage(const QuantGemvParams &p, int n0, int k0, int tid,
                                    unsigned (&w)[4]) {
  constexpr bool kFp8 = F == Format::kFp8;
  const int n = n0 + weightRowOf(tid), k = k0 + weightColOf(tid);
  w[0] = w[1] = w[2] = w[3] = 0u;
  if (n >= p.N || k >= p.K) return;
  const long rowBytes = kFp8 ? p.K : p.K / 2;
  const unsigned char *src = p.codes + static_cast<long>(n) * rowBytes + (kFp8 ? k : k / 2);
  unsigned lo[2];
  quantgemv::loadWords<8>(src, lo);
  w[0] = lo[0], w[1] = lo[1];
  if constexpr (kFp8) {
    unsigned hi[2];
    quantgemv::loadWords<8>(src + 8, hi);
    w[2] = hi[0], w[3] = hi[1];
  }
}

/// Decodes thread `tid`'s codes from loadWeightStage (the GEMV's decodeWord: int4 s q + m or
/// s (q - z), fp4 q s, fp8 q) and writes them as bf16 to its 16 elements of `tile`
/// ([kGemmTileN][kGemmLd]); zeros past N or K. `blockShift` = log2(p.block) (0 for fp8).
template <Format F, ScaleType S>
INGOT_QUANT_HD void storeWeightStage(const QuantGemvParams &p, int n0, int k0, int tid,
                                     int blockShift, const unsigned (&w)[4],
                                     unsigned short *tile) {
  constexpr bool kFp8 = F == Format::kFp8;
  constexpr int kPerWord = kFp8 ? 4 : 8;
  const int r = weightRowOf(tid), c = weightColOf(tid), n = n0 + r, k = k0 + c;
  unsigned short out[16];
  if (n < p.N && k < p.K) {
    INGOT_QGEMM_UNROLL
    for (int i = 0; i < 16 / kPerWord; ++i) {
      float v[kPerWord];
      quantgemv::decodeWord<F, S>(p, n, k + i * kPerWord, blockShift, w[i], v);
      INGOT_QGEMM_UNROLL
      for (int j = 0; j < kPerWord; ++j) out[i * kPerWord + j] = floatToBf16Bits(v[j]);
    }
  } else {
    INGOT_QGEMM_UNROLL
    for (int j = 0; j < 16; ++j) out[j] = 0;
  }
  storeBf16Row<16>(tile + r * kGemmLd + c, out);
}

/// Thread `tid`'s 8 activations of the tile at (t0, k0) (float4 loads; x rows 16-byte
/// aligned); zeros past T or K.
INGOT_QUANT_HD void loadActStage(const QuantGemvParams &p, int t0, int k0, int tid,
                                 float (&v)[8]) {
  const int t = t0 + actRowOf(tid), k = k0 + actColOf(tid);
  if (t < p.T && k < p.K) {
    quantgemv::loadActivations<8>(p.x + static_cast<long>(t) * p.x_stride, k, v);
  } else {
    INGOT_QGEMM_UNROLL
    for (int j = 0; j < 8; ++j) v[j] = 0.0f;
  }
}

/// Thread `tid`'s activations as bf16 into `tile` ([kGemmTileT][kGemmLd]).
INGOT_QUANT_HD void storeActStage(int tid, const float (&v)[8], unsigned short *tile) {
  unsigned short out[8];
  INGOT_QGEMM_UNROLL
  for (int j = 0; j < 8; ++j) out[j] = floatToBf16Bits(v[j]);
  storeBf16Row<8>(tile + actRowOf(tid) * kGemmLd + actColOf(tid), out);
}


#if defined(__CUDACC__) || defined(__CUDACC_RTC__)

// ---- device code -------------------------------------------------------------------------

/// The body of every ingot_quant_gemm_* entry point (launch: grid (quantGemmGridX(N),
/// quantGemmGridY(T), 1), block (kGemmThreads, 1, 1), static shared memory only).
template <Format F, ScaleType S>
__device__ __forceinline__ void quantGemm(const QuantGemvParams &p) {
  namespace wmma = nvcuda::wmma;
  __shared__ __align__(128) unsigned char smem[kGemmSharedBytes];
  unsigned short *const base = reinterpret_cast<unsigned short *>(smem);
  // Buffer b: activations at b * (A + B) elements, weights right after them.
  auto actTile = [&](int b) { return base + b * (kGemmTileAElems + kGemmTileBElems); };
  auto weightTile = [&](int b) { return actTile(b) + kGemmTileAElems; };
  const int tid = threadIdx.x, warp = tid >> 5;
  const int n0 = blockIdx.x * kGemmTileN, t0 = blockIdx.y * kGemmTileT;
  const int wt = (warp / kGemmWarpsN) * kGemmWarpT, wn = (warp % kGemmWarpsN) * kGemmWarpN;
  const int blockShift = F == Format::kFp8 ? 0 : quantgemv::log2Exact(p.block);
  constexpr int kFT = kGemmWarpT / kGemmFrag, kFN = kGemmWarpN / kGemmFrag;

  wmma::fragment<wmma::accumulator, kGemmFrag, kGemmFrag, kGemmFrag, float> acc[kFT][kFN];
#pragma unroll
  for (int i = 0; i < kFT; ++i)
#pragma unroll
    for (int j = 0; j < kFN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  unsigned codes[4];
  float xs[8];
  loadWeightStage<F>(p, n0, 0, tid, codes);
  loadActStage(p, t0, 0, tid, xs);
  storeWeightStage<F, S>(p, n0, 0, tid, blockShift, codes, weightTile(0));
  storeActStage(tid, xs, actTile(0));
  __syncthreads();
  const int steps = (p.K + kGemmTileK - 1) / kGemmTileK;
  for (int s = 0; s < steps; ++s) {
    const int cur = s & 1;
    const bool more = s + 1 < steps;
    if (more) {  // in flight during the MMAs below
      loadWeightStage<F>(p, n0, (s + 1) * kGemmTileK, tid, codes);
      loadActStage(p, t0, (s + 1) * kGemmTileK, tid, xs);
    }
    const __nv_bfloat16 *a = reinterpret_cast<const __nv_bfloat16 *>(actTile(cur));
    const __nv_bfloat16 *b = reinterpret_cast<const __nv_bfloat16 *>(weightTile(cur));
#pragma unroll
    for (int kk = 0; kk < kGemmTileK; kk += kGemmFrag) {
      wmma::fragment<wmma::matrix_a, kGemmFrag, kGemmFrag, kGemmFrag, __nv_bfloat16,
                     wmma::row_major> fa[kFT];
      // The weight tile is [n][k]: as the [k][n] operand it is column-major.
      wmma::fragment<wmma::matrix_b, kGemmFrag, kGemmFrag, kGemmFrag, __nv_bfloat16,
                     wmma::col_major> fb[kFN];
#pragma unroll
      for (int i = 0; i < kFT; ++i)
        wmma::load_matrix_sync(fa[i], a + (wt + i * kGemmFrag) * kGemmLd + kk, kGemmLd);
#pragma unroll
      for (int j = 0; j < kFN; ++j)
        wmma::load_matrix_sync(fb[j], b + (wn + j * kGemmFrag) * kGemmLd + kk, kGemmLd);
#pragma unroll
      for (int i = 0; i < kFT; ++i)
#pragma unroll
        for (int j = 0; j < kFN; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    if (more) {  // the other buffer: every warp finished reading it before the last barrier
      storeWeightStage<F, S>(p, n0, (s + 1) * kGemmTileK, tid, blockShift, codes,
                             weightTile(cur ^ 1));
      storeActStage(tid, xs, actTile(cur ^ 1));
    }
    __syncthreads();
  }

  // Epilogue: accumulators through shared memory (the operands are dead after the last
  // barrier), then y[t, n] = acc * row scale (+ bias) for the tile's rows below T and N.
  float *out = reinterpret_cast<float *>(smem);
#pragma unroll
  for (int i = 0; i < kFT; ++i)
#pragma unroll
    for (int j = 0; j < kFN; ++j)
      wmma::store_matrix_sync(out + (wt + i * kGemmFrag) * kGemmOutLd + wn + j * kGemmFrag,
                              acc[i][j], kGemmOutLd, wmma::mem_row_major);
  __syncthreads();
  const int c = tid % kGemmTileN, n = n0 + c;
  if (n >= p.N) return;
  const float scale = quantgemv::rowScale(p, n);
  for (int r = tid / kGemmTileN; r < kGemmTileT && t0 + r < p.T; r += kGemmThreads / kGemmTileN)
    p.y[static_cast<long>(t0 + r) * p.y_stride + n] =
        quantgemv::finishOutput(out[r * kGemmOutLd + c], scale, p.bias, n);
}

#endif  // __CUDACC__ || __CUDACC_RTC__

}  // namespace quantgemm
}  // namespace ingot

#undef INGOT_QGEMM_UNROLL
