// Split-KV paged decode attention (FlashDecoding) templated on an attention variant, plus the split combine.
#pragma once

// One CTA per (kv head g, request b, split s) computes attention of every query row the
// request has in this step against the split's keys: rows are (token i, group head j),
// r = i * G + j, so the K/V a CTA loads serve all G query heads of the kv head (GQA packed)
// and all 1..N new tokens (N > 1: speculative verification, chunk tails). Per key tile:
// K and V rows of the paged pool (T, or fp8 codes times their block-head's scale) are
// gathered into shared memory as f32, each thread
// scores (row, key) pairs, the variant's mask and score run on them, a warp per row does
// the online-softmax step, and every thread accumulates P.V for its output columns.
// Semantics match runtime/backend/cpu/paged_attention.cc: score = scale * q.k, a hidden key
// has weight 0, the score region runs only on visible keys, a row that sees nothing is 0.

#include <cuda_bf16.h>

#include "core/kernels/attention_params.h"
#include "codegen/cuda/kernels/kv_fp8.cuh"
#include "codegen/cuda/kernels/region_ops.h"

namespace ingot {
namespace attn {

/// Tile shape of the decode kernel for G query heads per kv head. kRows, the (token, head)
/// rows a pass scores, follows G so that single-token decode wastes few rows (the scoring
/// and P.V work is per row, whether the row exists or not): 4 rows for G <= 4 (GQA 1, 3, 4:
/// one token per pass), 8 for G <= 8, 16 above; longer row lists (speculative trees,
/// chunk tails) take several passes over the same keys, which then come from L2.
/// Shared memory: K and V tiles of kKeys rows of f32 (K padded by one float per row
/// against bank conflicts), Q and P for kRows rows:
///   4 * (kKeys * (2D + 1) + kRows * (D + 1) + kRows * kKeys + 3 kRows) bytes
/// at most (kRows 16) 42.4 KiB for D = 128 and 22.4 KiB for D = 64: under the 48 KiB of
/// static shared memory every target since sm_80 grants a CTA, leaving room for 2 (D = 128)
/// or 4 (D = 64) CTAs per SM on sm_86/89/120 (100 KiB) and 3-5 on sm_80/90/100 (164-228 KiB).
template <int G>
struct DecodeTile {
  static constexpr int kThreads = 128;  ///< four warps
  static constexpr int kRows = G <= 4 ? 4 : G <= 8 ? 8 : 16;  ///< rows per pass
  static constexpr int kKeys = 32;      ///< keys per tile: one per lane when scoring
  static constexpr int kWarps = kThreads / 32;
};

/// Element loads of the pool and of q as f32.
__device__ __forceinline__ float toFloat(float x) { return x; }
__device__ __forceinline__ float toFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T fromFloat(float x);
template <> __device__ __forceinline__ float fromFloat<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

/// Elements of T in one 16-byte load; rows (head_dim elements) start 16-byte aligned as
/// head_dim is a multiple of 32 and the buffers are allocation-aligned.
template <typename T> constexpr int kVecOf = 16 / static_cast<int>(sizeof(T));
/// Loads kVecOf<T> elements at `src` (16-byte aligned) as f32.
template <typename T>
__device__ __forceinline__ void loadVec(const T *src, float (&out)[kVecOf<T>]) {
  const uint4 raw = *reinterpret_cast<const uint4 *>(src);
  const T *x = reinterpret_cast<const T *>(&raw);
#pragma unroll
  for (int i = 0; i < kVecOf<T>; ++i) out[i] = toFloat(x[i]);
}

__device__ __forceinline__ float negInf() { return __int_as_float(0xff800000); }

__device__ __forceinline__ float warpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// The decode kernel body; `extern "C"` wrappers (AttentionKernelSource) instantiate it.
/// T: element type of q, the KV pool and out (float or __nv_bfloat16); D: head dim; G: query
/// heads per kv head. KvFp8: the pool holds E4M3 codes with per-block-head scales
/// (p.kv_scales, kernels/kv_fp8.cuh) instead of T, decoded to f32 as the tile is gathered.
template <class V, typename T, int D, int G, bool KvFp8 = false>
__device__ __forceinline__ void pagedDecode(const PagedAttentionParams &p,
                                            const rgn::RegionOperands &ops) {
  using Tile = DecodeTile<G>;
  constexpr int kRows = Tile::kRows, kKeys = Tile::kKeys, kThreads = Tile::kThreads;
  static_assert(D == 32 || D == 64 || D == 128, "head dim: 32, 64 or 128 (shared memory)");
  static_assert(kThreads % D == 0 || D % kThreads == 0, "columns map onto threads");
  // P.V: each thread owns kCols columns of kRows / kRowGroups rows.
  constexpr int kCols = D > kThreads ? D / kThreads : 1;
  constexpr int kRowGroups = D < kThreads ? kThreads / D : 1;
  constexpr int kRowsPerThread = kRows / kRowGroups;
  constexpr int kRowsPerWarp = kRows / Tile::kWarps;
  constexpr int kVec = kVecOf<T>;
  constexpr int kKvVec = KvFp8 ? 16 : kVec;  // pool elements per 16-byte load

  __shared__ float sK[kKeys][D + 1];
  __shared__ float sV[kKeys][D];
  __shared__ float sQ[kRows][D + 1];
  __shared__ float sP[kRows][kKeys];
  __shared__ float sAlpha[kRows];
  __shared__ float sMax[kRows];
  __shared__ float sSum[kRows];

  const int g = blockIdx.x, b = blockIdx.y, split = blockIdx.z;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int len = p.seq_lens[b];
  const int tokenBegin = p.query_start[b];
  const int numTokens = p.query_start[b + 1] - tokenBegin;
  const int firstSlot = len - numTokens;  // KV slot of the request's first new token
  const int keyBegin = split * p.keys_per_split;
  const int keyEnd = min(len, keyBegin + p.keys_per_split);
  const int numRows = numTokens * G;
  const T *q = static_cast<const T *>(p.q);
  const T *cache = static_cast<const T *>(p.kv_cache);
  const int *blocks = p.block_tables + static_cast<long long>(b) * p.max_blocks;
  const long long rowStride = static_cast<long long>(p.num_kv_heads) * D;  // one slot's row

  for (int rowBase = 0; rowBase < numRows; rowBase += kRows) {
    // Q rows of this pass as f32, 16-byte loads (rows past the end are zeros and never
    // written back).
    for (int e = tid * kVec; e < kRows * D; e += kThreads * kVec) {
      const int r = e / D, d = e % D, row = rowBase + r;
      float v[kVec];
      if (row < numRows) {
        const int token = tokenBegin + row / G, h = g * G + row % G;
        loadVec(q + (static_cast<long long>(token) * p.num_heads + h) * D + d, v);
      } else {
#pragma unroll
        for (int i = 0; i < kVec; ++i) v[i] = 0.0f;
      }
#pragma unroll
      for (int i = 0; i < kVec; ++i) sQ[r][d + i] = v[i];
    }
    // Running max and sum of the rows this warp owns (rows warp + kWarps * k), in every
    // lane; and the P.V accumulators of this thread's rows and columns.
    float runMax[kRowsPerWarp], runSum[kRowsPerWarp];
    #pragma unroll
    for (int k = 0; k < kRowsPerWarp; ++k) runMax[k] = negInf(), runSum[k] = 0.0f;
    float acc[kRowsPerThread][kCols];
    #pragma unroll
    for (int k = 0; k < kRowsPerThread; ++k)
      for (int c = 0; c < kCols; ++c) acc[k][c] = 0.0f;

    for (int tileStart = keyBegin; tileStart < keyEnd; tileStart += kKeys) {
      __syncthreads();  // the previous tile's K, V and P are consumed
      // Gather K and V rows of the tile's keys from their blocks, 16-byte loads; missing
      // keys are zeros (their weight is 0, and 0 * 0 keeps P.V finite).
      for (int e = tid * kKvVec; e < kKeys * D; e += kThreads * kKvVec) {
        const int j = e / D, d = e % D, kv = tileStart + j;
        long long base = 0, block = 0;
        if (kv < keyEnd) {
          block = blocks[kv / p.block_size];
          base = (((block * p.num_layers + p.layer) * 2) * p.block_size + kv % p.block_size) *
                     rowStride + static_cast<long long>(g) * D + d;
        }
        if constexpr (KvFp8) {
          // 16 codes each of K and V times their block-head's scales, decoded straight into
          // shared memory (holding 32 decoded floats per thread spills at D = 128): exactly
          // the CPU's decoded rows. Missing keys are zero codes times zero.
          uint4 kRaw = make_uint4(0u, 0u, 0u, 0u), vRaw = kRaw;
          float kScale = 0.0f, vScale = 0.0f;
          if (kv < keyEnd) {
            const unsigned char *codes = static_cast<const unsigned char *>(p.kv_cache) + base;
            const long long scale = ((block * p.num_layers + p.layer) * 2) * p.num_kv_heads + g;
            kRaw = *reinterpret_cast<const uint4 *>(codes);
            vRaw = *reinterpret_cast<const uint4 *>(codes + static_cast<long long>(p.block_size) * rowStride);
            kScale = p.kv_scales[scale];
            vScale = p.kv_scales[scale + p.num_kv_heads];
          }
          kvfp8::storeFp8Vec(kRaw, kScale, &sK[j][d]);
          kvfp8::storeFp8Vec(vRaw, vScale, &sV[j][d]);
        } else {
          float k[kVec], v[kVec];
          if (kv < keyEnd) {
            loadVec(cache + base, k);
            loadVec(cache + base + static_cast<long long>(p.block_size) * rowStride, v);
          } else {
#pragma unroll
            for (int i = 0; i < kVec; ++i) k[i] = v[i] = 0.0f;
          }
#pragma unroll
          for (int i = 0; i < kVec; ++i) {
            sK[j][d + i] = k[i];
            sV[j][d + i] = v[i];
          }
        }
      }
      __syncthreads();

      // Scores: lane = key, warp = rows warp, warp + kWarps, ...
      const int kv = tileStart + lane;
      float s[kRowsPerWarp];
      #pragma unroll
      for (int k = 0; k < kRowsPerWarp; ++k) s[k] = 0.0f;
      for (int d = 0; d < D; ++d) {
        const float kd = sK[lane][d];
        #pragma unroll
        for (int k = 0; k < kRowsPerWarp; ++k) s[k] = fmaf(sQ[warp + Tile::kWarps * k][d], kd, s[k]);
      }
      // The variant: mask, then the score region on visible keys only.
      #pragma unroll
      for (int k = 0; k < kRowsPerWarp; ++k) {
        const int row = rowBase + warp + Tile::kWarps * k;
        float score = negInf();
        if (row < numRows && kv < keyEnd) {
          const long long qSlot = firstSlot + row / G, h = g * G + row % G;
          bool visible = true;
          if constexpr (V::kHasMask) {
            // A mask of the form `kv <= q && ...` hides later keys without running (as the
            // CPU backend does, so neither evaluates it there).
            if (V::kMaskImpliesCausal && kv > qSlot) visible = false;
            else visible = V::mask(ops, b, h, qSlot, kv);
          }
          if (visible) {
            score = p.scale * s[k];
            if constexpr (V::kHasScore) score = V::score(ops, score, b, h, qSlot, kv);
          }
        }
        s[k] = score;
      }
      // Online softmax, a warp per row.
      #pragma unroll
      for (int k = 0; k < kRowsPerWarp; ++k) {
        const int r = warp + Tile::kWarps * k;
        const float newMax = fmaxf(runMax[k], warpMax(s[k]));
        float alpha = 1.0f, pr = 0.0f;
        if (newMax != negInf()) {
          alpha = runMax[k] == negInf() ? 0.0f : __expf(runMax[k] - newMax);
          pr = s[k] == negInf() ? 0.0f : __expf(s[k] - newMax);
          runMax[k] = newMax;
        }
        runSum[k] = runSum[k] * alpha + warpSum(pr);
        sP[r][lane] = pr;
        if (lane == 0) sAlpha[r] = alpha;
      }
      __syncthreads();
      // P.V for this thread's (rows, columns).
      #pragma unroll
      for (int k = 0; k < kRowsPerThread; ++k) {
        const int r = tid / (kThreads / kRowGroups) % kRowGroups + kRowGroups * k;
        #pragma unroll
        for (int c = 0; c < kCols; ++c) {
          const int d = (tid % (kThreads / kRowGroups)) * kCols + c;
          float a = acc[k][c] * sAlpha[r];
          #pragma unroll
          for (int j = 0; j < kKeys; ++j) a = fmaf(sP[r][j], sV[j][d], a);
          acc[k][c] = a;
        }
      }
    }

    // Row statistics to shared memory, then results: the output itself when there is one
    // split, else this split's normalized partial and its max and sum.
    __syncthreads();
    if (lane == 0) {
#pragma unroll
      for (int k = 0; k < kRowsPerWarp; ++k) {
        sMax[warp + Tile::kWarps * k] = runMax[k];
        sSum[warp + Tile::kWarps * k] = runSum[k];
      }
    }
    __syncthreads();
    #pragma unroll
    for (int k = 0; k < kRowsPerThread; ++k) {
      const int r = tid / (kThreads / kRowGroups) % kRowGroups + kRowGroups * k;
      const int row = rowBase + r;
      if (row >= numRows) continue;
      const int token = tokenBegin + row / G, h = g * G + row % G;
      const float sum = sSum[r];
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
      const long long th = static_cast<long long>(token) * p.num_heads + h;
      #pragma unroll
      for (int c = 0; c < kCols; ++c) {
        const int d = (tid % (kThreads / kRowGroups)) * kCols + c;
        if (p.num_splits == 1) {
          static_cast<T *>(p.out)[th * D + d] = fromFloat<T>(acc[k][c] * inv);
        } else {
          p.partial_out[(th * p.num_splits + split) * D + d] = acc[k][c] * inv;
        }
      }
      if (p.num_splits > 1 && tid % (kThreads / kRowGroups) == 0) {
        p.partial_max[th * p.num_splits + split] = sMax[r];
        p.partial_sum[th * p.num_splits + split] = sum;
      }
    }
    __syncthreads();  // sQ / sMax are rewritten by the next pass
  }
}

/// Merges the splits of one (token, head): out = sum_s w_s O_s / sum_s w_s with
/// w_s = sum_s * exp(max_s - max); splits that saw nothing have sum 0 and weight 0, and a
/// row no split saw is 0. One CTA per (token, head), D threads.
template <typename T, int D>
__device__ __forceinline__ void combineSplits(const PagedAttentionParams &p) {
  const int token = blockIdx.x, h = blockIdx.y, d = threadIdx.x;
  if (d >= D) return;
  const long long th = static_cast<long long>(token) * p.num_heads + h;
  const float *maxes = p.partial_max + th * p.num_splits;
  const float *sums = p.partial_sum + th * p.num_splits;
  float globalMax = negInf();
  for (int s = 0; s < p.num_splits; ++s)
    if (sums[s] > 0.0f) globalMax = fmaxf(globalMax, maxes[s]);
  float num = 0.0f, den = 0.0f;
  if (globalMax != negInf())
    for (int s = 0; s < p.num_splits; ++s) {
      if (!(sums[s] > 0.0f)) continue;
      const float w = sums[s] * __expf(maxes[s] - globalMax);
      num = fmaf(w, p.partial_out[(th * p.num_splits + s) * D + d], num);
      den += w;
    }
  static_cast<T *>(p.out)[th * D + d] = fromFloat<T>(den > 0.0f ? num / den : 0.0f);
}

}  // namespace attn
}  // namespace ingot
