// Fused elementwise kernels of a serving step: norms, rope+KV write, activations, adds, casts, gathers.
#pragma once
#include "core/kernels/fused_params.h"

// Semantics match runtime/backend/cpu/cpu_ops.cc (rmsNormRows, ropeRows, siluMulRange,
// geluMulRange, addRange, embeddingShardRows) and kvWriteRows of
// runtime/backend/cpu/paged_attention.cc;
// add_bias, to_bf16 and gather_rows are plain per-element adds, casts and copies. The
// per-element math is in INGOT_FUSED_HD functions so that the host test runs the very same
// code on the CPU against those ops; the kernels only add indexing and the reduction.
// Element types: float and __nv_bfloat16 (loads widen to f32, all math is f32, stores round
// to nearest even). The KV pool has the activations' element type and the CPU layout
//   kv_cache [num_blocks, num_layers, 2 (K, V), block_size, num_kv_heads, head_dim].
// Everything below the math compiles only under NVRTC/nvcc; the math is plain C++ too.

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#include <cuda_bf16.h>
#define INGOT_FUSED_HD __host__ __device__ __forceinline__
#else
#include <cmath>
#define INGOT_FUSED_HD inline
#endif

namespace ingot {
namespace fused {


// ---- per-element math (host and device) -------------------------------------------------

/// 1 / sqrt(mean(x^2) + eps) from the row's sum of squares (f32, as the kernel reduces it).
INGOT_FUSED_HD float rmsInverse(float sumSquares, int dim, float eps) {
  return 1.0f / sqrtf(sumSquares / static_cast<float>(dim) + eps);
}

/// One normalized element: w * (x * inv), the CPU op's order of operations.
INGOT_FUSED_HD float rmsNormElement(float x, float inv, float w) { return w * (x * inv); }

/// cos and sin of position * inv_freq: the angle is an f32 product (Hugging Face), its cos
/// and sin are taken in double and rounded, so the result does not depend on the GPU's
/// (fast-math) f32 transcendental functions.
INGOT_FUSED_HD void ropeCosSin(int position, float invFreq, float &c, float &s) {
  const float angle = static_cast<float>(position) * invFreq;
  c = static_cast<float>(cos(static_cast<double>(angle)));
  s = static_cast<float>(sin(static_cast<double>(angle)));
}

/// Rotate-half (NeoX / Llama) rotation of the pair (x[i], x[i + rotary_dim / 2]).
INGOT_FUSED_HD void ropePair(float a, float b, float c, float s, float &outA, float &outB) {
  outA = a * c - b * s;
  outB = b * c + a * s;
}

/// silu(gate) * up.
INGOT_FUSED_HD float siluMul(float gate, float up) { return gate / (1.0f + expf(-gate)) * up; }

/// gelu(gate) * up with GELU's tanh form (gelu_pytorch_tanh), as the CPU's geluMulRange.
INGOT_FUSED_HD float geluMul(float gate, float up) {
  const float inner = 0.7978845608028654f * (gate + 0.044715f * gate * gate * gate);
  return 0.5f * gate * (1.0f + tanhf(inner)) * up;
}

/// Embedding row of `token` in a table holding tokens [vocabStart, vocabStart + numRows)
/// of a vocabulary of `vocabSize`: the row, -1 for a token of another shard (zeros, not an
/// error: the all-reduce adds the owner's row), -2 for a token outside the vocabulary.
INGOT_FUSED_HD int embeddingRow(int token, int vocabSize, int vocabStart, int numRows) {
  if (token < 0 || token >= vocabSize) return -2;
  const int row = token - vocabStart;
  return row >= 0 && row < numRows ? row : -1;
}

/// Offset (in elements) of the K (kv = 0) or V (kv = 1) row of KV slot `slot` of `layer`
/// in the paged pool; a row holds `width` = num_kv_heads * head_dim elements.
INGOT_FUSED_HD long kvRowOffset(long slot, int layer, int kv, int numLayers, int blockSize,
                                int width) {
  const long block = slot / blockSize, inBlock = slot % blockSize;
  return (((block * numLayers + layer) * 2 + kv) * blockSize + inBlock) * width;
}

/// Column of flat element `i` of a row-major [rows, width] matrix (add_bias's bias index).
INGOT_FUSED_HD int columnOf(long i, int width) { return static_cast<int>(i % width); }

/// The bfloat16 bit pattern nearest to `bits` (an f32 bit pattern), ties to even: the
/// upper 16 bits after adding 0x7fff plus the lowest kept bit. Infinities stay infinite, a
/// finite value past the largest bf16 rounds to infinity, and every NaN becomes the
/// canonical quiet NaN 0x7fff (what the GPU's cvt.rn.bf16.f32 returns). Bits, not a float,
/// so host and device run the same integer code.
INGOT_FUSED_HD unsigned short bf16BitsNearestEven(unsigned bits) {
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fff;  // NaN
  return static_cast<unsigned short>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}


#if defined(__CUDACC__) || defined(__CUDACC_RTC__)

// ---- device code -------------------------------------------------------------------------

__device__ __forceinline__ float load(const float *p, long i) { return p[i]; }
__device__ __forceinline__ float load(const __nv_bfloat16 *p, long i) {
  return __bfloat162float(p[i]);
}
__device__ __forceinline__ void store(float *p, long i, float v) { p[i] = v; }
__device__ __forceinline__ void store(__nv_bfloat16 *p, long i, float v) {
  p[i] = __float2bfloat16_rn(v);
}
/// v rounded to T and widened again (what a later load of the stored value returns).
template <class T> __device__ __forceinline__ float roundTo(float v);
template <> __device__ __forceinline__ float roundTo<float>(float v) { return v; }
template <> __device__ __forceinline__ float roundTo<__nv_bfloat16>(float v) {
  return __bfloat162float(__float2bfloat16_rn(v));
}

/// Sum of `v` over the CTA (kFusedThreads threads): warp shuffles, then one warp over the
/// per-warp sums in shared memory. Every thread gets the total.
__device__ __forceinline__ float blockSum(float v) {
  __shared__ float warpSums[kFusedThreads / 32];
  __shared__ float total;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warpSums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < kFusedThreads / 32 ? warpSums[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) total = s;
  }
  __syncthreads();
  return total;
}

/// Row blockIdx.x: residual += x (when residual is not null; the sum is stored in T and
/// the rounded value normalized), out = rms_norm(residual or x) * gamma.
template <class T>
__device__ void rmsNormResidual(const T *x, T *residual, const T *gamma, T *out, int dim,
                                float eps) {
  const long base = static_cast<long>(blockIdx.x) * dim;
  const T *src = residual ? residual : x;
  float squares = 0.0f;
  for (int d = threadIdx.x; d < dim; d += kFusedThreads) {
    float r = load(x, base + d);
    if (residual) {
      r = roundTo<T>(load(residual, base + d) + r);
      store(residual, base + d, r);
    }
    squares += r * r;
  }
  const float inv = rmsInverse(blockSum(squares), dim, eps);
  // Each thread reads back only the elements it wrote itself: no barrier needed.
  for (int d = threadIdx.x; d < dim; d += kFusedThreads)
    store(out, base + d, rmsNormElement(load(src, base + d), inv, load(gamma, d)));
}

/// Token blockIdx.x: rope on its q and k heads in place, then its k and v rows into the
/// paged pool at slot_mapping (the rotated k is re-read after a barrier).
template <class T>
__device__ void ropeKvWrite(const RopeKvParams &p) {
  const int t = blockIdx.x;
  const int half = p.rotary_dim / 2;
  const int pos = p.positions[t];
  T *q = static_cast<T *>(p.q) + static_cast<long>(t) * p.q_stride;
  T *k = static_cast<T *>(p.k) + static_cast<long>(t) * p.k_stride;
  const int pairs = (p.num_heads + p.num_kv_heads) * half;
  for (int i = threadIdx.x; i < pairs; i += kFusedThreads) {
    const int h = i / half, j = i % half;
    T *row = h < p.num_heads ? q + h * p.head_dim : k + (h - p.num_heads) * p.head_dim;
    float c, s, a, b;
    ropeCosSin(pos, p.inv_freq[j], c, s);
    ropePair(load(row, j), load(row, j + half), c, s, a, b);
    store(row, j, a);
    store(row, j + half, b);
  }
  const int slot = p.slot_mapping[t];
  if (slot < 0) return;
  __syncthreads();  // k rotated by other threads of this CTA
  const int width = p.num_kv_heads * p.head_dim;
  T *cache = static_cast<T *>(p.kv_cache);
  const long kRow = kvRowOffset(slot, p.layer, 0, p.num_layers, p.block_size, width);
  const long vRow = kvRowOffset(slot, p.layer, 1, p.num_layers, p.block_size, width);
  const T *v = static_cast<const T *>(p.v) + static_cast<long>(t) * p.v_stride;
  for (int d = threadIdx.x; d < width; d += kFusedThreads) {
    cache[kRow + d] = k[d];
    cache[vRow + d] = v[d];
  }
}

/// out[i] = ActMul(gate[i], up[i]) over `count` elements, grid-stride: siluMul or geluMul,
/// a gated MLP's activation times its up projection.
template <class T, float (*ActMul)(float, float)>
__device__ void gatedMulRange(const T *gate, const T *up, T *out, long count) {
  const long stride = static_cast<long>(gridDim.x) * kFusedThreads;
  for (long i = static_cast<long>(blockIdx.x) * kFusedThreads + threadIdx.x; i < count;
       i += stride)
    store(out, i, ActMul(load(gate, i), load(up, i)));
}

/// Token blockIdx.x: its table row, or zeros (another shard's token, or an invalid one,
/// which also sets the error word).
template <class T>
__device__ void embeddingGather(const EmbeddingParams &p) {
  const int t = blockIdx.x;
  const int row = embeddingRow(p.tokens[t], p.vocab_size, p.vocab_start, p.num_rows);
  if (row == -2 && threadIdx.x == 0) atomicCAS(p.error, 0u, static_cast<unsigned>(t) + 1u);
  T *out = static_cast<T *>(p.out) + static_cast<long>(t) * p.dim;
  const T *src = static_cast<const T *>(p.table) + static_cast<long>(row < 0 ? 0 : row) * p.dim;
  for (int d = threadIdx.x; d < p.dim; d += kFusedThreads)
    store(out, d, row < 0 ? 0.0f : load(src, d));
}

/// out[i] = a[i] + b[i] over `count` elements (f32 sum, stored in T), grid-stride; out may
/// alias a or b.
template <class T>
__device__ void addElements(const T *a, const T *b, T *out, long count) {
  const long stride = static_cast<long>(gridDim.x) * kFusedThreads;
  for (long i = static_cast<long>(blockIdx.x) * kFusedThreads + threadIdx.x; i < count;
       i += stride)
    store(out, i, load(a, i) + load(b, i));
}

/// out[i] = in[i] * factor over `count` elements (f32 product, stored in T), grid-stride;
/// out may alias in.
template <class T>
__device__ void scaleElements(const T *in, T *out, float factor, long count) {
  const long stride = static_cast<long>(gridDim.x) * kFusedThreads;
  for (long i = static_cast<long>(blockIdx.x) * kFusedThreads + threadIdx.x; i < count;
       i += stride)
    store(out, i, load(in, i) * factor);
}

/// x[r, c] += bias[c] in place over a row-major [rows, width] matrix, grid-stride over
/// rows * width elements (the f32 bias of a linear layer added to its output).
template <class T>
__device__ void addBiasRows(T *x, const float *bias, long rows, int width) {
  const long count = rows * width;
  const long stride = static_cast<long>(gridDim.x) * kFusedThreads;
  for (long i = static_cast<long>(blockIdx.x) * kFusedThreads + threadIdx.x; i < count;
       i += stride)
    store(x, i, load(x, i) + bias[columnOf(i, width)]);
}

/// out[i] = in[i] rounded to bf16 (nearest even), grid-stride: the bf16 input of a GEMM.
/// For bf16 activations a plain copy.
__device__ __forceinline__ __nv_bfloat16 toBf16(float v) {
  __nv_bfloat16_raw raw;
  raw.x = bf16BitsNearestEven(__float_as_uint(v));
  return __nv_bfloat16(raw);
}
__device__ __forceinline__ __nv_bfloat16 toBf16(__nv_bfloat16 v) { return v; }
template <class T>
__device__ void convertToBf16(const T *in, __nv_bfloat16 *out, long count) {
  const long stride = static_cast<long>(gridDim.x) * kFusedThreads;
  for (long i = static_cast<long>(blockIdx.x) * kFusedThreads + threadIdx.x; i < count;
       i += stride)
    out[i] = toBf16(in[i]);
}

/// Output row r (r = blockIdx.x, blockIdx.x + gridDim.x, ...) = input row rows[r] of a
/// row-major matrix `width` elements wide, copied bit for bit; launched with one CTA per
/// output row. rows[] must index rows of `in` (the runtime validates the logits rows with
/// the step inputs).
template <class T>
__device__ void gatherRows(const T *in, const int *rows, T *out, int numRows, int width) {
  for (int r = blockIdx.x; r < numRows; r += gridDim.x) {
    const T *src = in + static_cast<long>(rows[r]) * width;
    T *dst = out + static_cast<long>(r) * width;
    for (int c = threadIdx.x; c < width; c += kFusedThreads) dst[c] = src[c];
  }
}

#endif  // __CUDACC__ || __CUDACC_RTC__

}  // namespace fused
}  // namespace ingot
