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

/// Tile shape of the decode kernel for head dim D and G query heads per kv head. kRows, the
/// (token, head) rows a pass scores, follows G so that single-token decode wastes few rows
/// (the scoring and P.V work is per row, whether the row exists or not): 4 rows for G <= 4
/// (GQA 1, 3, 4: one token per pass), 8 for G <= 8, 16 above; longer row lists (speculative
/// trees, chunk tails) take several passes over the same keys, which then come from L2.
/// Shared memory: K and V tiles of kKeys rows of f32 (K padded by one float per row
/// against bank conflicts), Q and P for kRows rows:
///   4 * (kKeys * (2D + 1) + kRows * (D + 1) + kRows * kKeys + 3 kRows) bytes
/// at most (kRows 16) 42.4 KiB for D = 128 and 22.4 KiB for D = 64: under the 48 KiB of
/// static shared memory every target since sm_80 grants a CTA, leaving room for 2 (D = 128)
/// or 4 (D = 64) CTAs per SM on sm_86/89/120 (100 KiB) and 3-5 on sm_80/90/100 (164-228 KiB).
/// D = 256 (Gemma) halves the key tile to 16 keys (lanes 16..31 score nothing) so that it
/// stays static: 37.2 KiB at kRows 4 and 41.6 KiB at kRows 8, hence G <= 8 there (every
/// Gemma 3 size has G <= 4). Its idle half-warps cost scoring throughput, not bytes; a tile
/// of its own in dynamic shared memory is the CUDA fast path's work.
template <int D, int G>
struct DecodeTile {
  static constexpr int kThreads = 128;  ///< four warps
  static constexpr int kRows = G <= 4 ? 4 : G <= 8 ? 8 : 16;  ///< rows per pass
  static constexpr int kKeys = D > 128 ? 16 : 32;  ///< keys per tile: one per lane when scoring
  static constexpr int kWarps = kThreads / 32;
  static_assert(D <= 128 || G <= 8, "head dim 256 takes at most 8 query heads per kv head");
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

/// How the decode kernel's threads share a pass of kRows rows over a tile of kKeys keys:
/// warp w scores rows w, w + kWarps, ... (kRowsPerWarp of them, lane = key), and for P.V
/// thread tid owns kCols columns of kRowsPerThread rows. Also the types of the per-thread
/// register arrays of those shares and of the shared tiles (pagedDecode declares the tiles).
/// The counts are enumerators: static constexpr members would be emitted as PTX globals.
template <int D, int G>
struct DecodeLayout {
  using Tile = DecodeTile<D, G>;
  enum : int {
    kRowsPerWarp = Tile::kRows / Tile::kWarps,
    kCols = D > Tile::kThreads ? D / Tile::kThreads : 1,
    kRowGroups = Tile::kThreads > D ? Tile::kThreads / D : 1,
    kRowsPerThread = Tile::kRows / kRowGroups,
  };
  static_assert(Tile::kThreads % D == 0 || D % Tile::kThreads == 0, "columns map onto threads");

  using WarpRows = float[kRowsPerWarp];           ///< one value per row of the warp
  using Acc = float[kRowsPerThread][kCols];       ///< P.V accumulators of a thread
  using QTile = float[Tile::kRows][D + 1];        ///< sQ
  using KTile = float[Tile::kKeys][D + 1];        ///< sK
  using VTile = float[Tile::kKeys][D];            ///< sV
  using PTile = float[Tile::kRows][Tile::kKeys];  ///< sP
  using RowStats = float[Tile::kRows];            ///< sAlpha, sMax, sSum

  /// The pass row of warp `warp`'s k-th score row.
  static __device__ int warpRow(int warp, int k) { return warp + Tile::kWarps * k; }
  /// The pass row of thread `tid`'s k-th P.V row.
  static __device__ int pvRow(int tid, int k) {
    return tid / (Tile::kThreads / kRowGroups) % kRowGroups + kRowGroups * k;
  }
  /// The column of thread `tid`'s c-th P.V column.
  static __device__ int pvCol(int tid, int c) {
    return (tid % (Tile::kThreads / kRowGroups)) * kCols + c;
  }
};

/// The rows and keys of one decode CTA: kv head g = blockIdx.x of request b = blockIdx.y,
/// keys [keyBegin, keyEnd) of split blockIdx.z, rows r = i * G + j of the request's tokens.
template <int G>
struct DecodeRows {
  int g, b, split, len, tokenBegin, firstSlot, keyBegin, keyEnd, numRows;
  __device__ explicit DecodeRows(const PagedAttentionParams &p) {
    g = blockIdx.x;
    b = blockIdx.y;
    split = blockIdx.z;
    len = p.seq_lens[b];
    tokenBegin = p.query_start[b];
    const int numTokens = p.query_start[b + 1] - tokenBegin;
    firstSlot = len - numTokens;  // KV slot of the request's first new token
    keyBegin = split * p.keys_per_split;
    keyEnd = min(len, keyBegin + p.keys_per_split);
    numRows = numTokens * G;
  }
};

/// Offset (in elements) in the paged pool of column d of key slot kv's K row for kv head g
/// of layer p.layer; its V row is block_size rows further. `block` receives the slot's block.
template <int D>
__device__ __forceinline__ long long kvRowOffset(const PagedAttentionParams &p,
                                                 const int *blocks, long long rowStride,
                                                 int g, int kv, int d, long long &block) {
  block = blocks[kv / p.block_size];
  return (((block * p.num_layers + p.layer) * 2) * p.block_size + kv % p.block_size) *
             rowStride + static_cast<long long>(g) * D + d;
}

/// Index in p.kv_scales of the K scale of (block, p.layer, kv head g); V's is num_kv_heads
/// further.
__device__ __forceinline__ long long kvScaleIndex(const PagedAttentionParams &p,
                                                  long long block, int g) {
  return ((block * p.num_layers + p.layer) * 2) * p.num_kv_heads + g;
}

/// Q rows rowBase.. of the pass into sQ as f32, 16-byte loads (rows past the end are zeros
/// and never written back).
template <typename T, int D, int G>
__device__ __forceinline__ void loadDecodeQuery(const PagedAttentionParams &p, const T *q,
                                                const DecodeRows<G> &rows, int rowBase,
                                                int tid,
                                                typename DecodeLayout<D, G>::QTile &sQ) {
  using Tile = DecodeTile<D, G>;
  constexpr int kVec = kVecOf<T>;
  for (int e = tid * kVec; e < Tile::kRows * D; e += Tile::kThreads * kVec) {
    const int r = e / D, d = e % D, row = rowBase + r;
    float v[kVec];
    if (row < rows.numRows) {
      const int token = rows.tokenBegin + row / G, h = rows.g * G + row % G;
      loadVec(q + (static_cast<long long>(token) * p.num_heads + h) * D + d, v);
    } else {
#pragma unroll
      for (int i = 0; i < kVec; ++i) v[i] = 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kVec; ++i) sQ[r][d + i] = v[i];
  }
}

/// Gathers K and V rows of keys tileStart.. from their blocks into sK / sV as f32, 16-byte
/// loads; missing keys are zeros (their weight is 0, and 0 * 0 keeps P.V finite). `cache`
/// is p.kv_cache as T, read by pagedDecode before its loops.
///
/// This body and pagedDecode's are shaped so that NVRTC emits the same PTX and cubins as the
/// kernel had when it was one function: the T path inline here (a helper of its own, or
/// `cache` cast inside the loop, moves loads and blocks) and V's registers declared first.
template <typename T, int D, int G, bool KvFp8>
__device__ __forceinline__ void gatherDecodeKv(const PagedAttentionParams &p, const T *cache,
                                               const DecodeRows<G> &rows, const int *blocks,
                                               long long rowStride, int tileStart, int tid,
                                               typename DecodeLayout<D, G>::KTile &sK,
                                               typename DecodeLayout<D, G>::VTile &sV) {
  using Tile = DecodeTile<D, G>;
  constexpr int kKvVec = KvFp8 ? 16 : kVecOf<T>;  // pool elements per 16-byte load
  for (int e = tid * kKvVec; e < Tile::kKeys * D; e += Tile::kThreads * kKvVec) {
    const int j = e / D, d = e % D, kv = tileStart + j;
    long long base = 0, block = 0;
    if (kv < rows.keyEnd) base = kvRowOffset<D>(p, blocks, rowStride, rows.g, kv, d, block);
    if constexpr (KvFp8) {
      // 16 codes each of K and V times their block-head's scales, decoded straight into
      // shared memory (holding 32 decoded floats per thread spills at D = 128): exactly
      // the CPU's decoded rows. Missing keys are zero codes times zero.
      uint4 kRaw = make_uint4(0u, 0u, 0u, 0u), vRaw = kRaw;
      float kScale = 0.0f, vScale = 0.0f;
      if (kv < rows.keyEnd) {
        const unsigned char *codes = static_cast<const unsigned char *>(p.kv_cache) + base;
        const long long scale = kvScaleIndex(p, block, rows.g);
        kRaw = *reinterpret_cast<const uint4 *>(codes);
        vRaw = *reinterpret_cast<const uint4 *>(
            codes + static_cast<long long>(p.block_size) * rowStride);
        kScale = p.kv_scales[scale];
        vScale = p.kv_scales[scale + p.num_kv_heads];
      }
      kvfp8::storeFp8Vec(kRaw, kScale, &sK[j][d]);
      kvfp8::storeFp8Vec(vRaw, vScale, &sV[j][d]);
    } else {
      constexpr int kVec = kVecOf<T>;
      float v[kVec], k[kVec];  // this order: see above
      if (kv < rows.keyEnd) {
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
}

/// Scores of this warp's rows against key tileStart + lane: q.k over the staged tiles, then
/// the variant (mask, then the score region on visible keys only); -inf where hidden.
template <class V, int D, int G>
__device__ __forceinline__ void scoreDecodeTile(
    const PagedAttentionParams &p, const rgn::RegionOperands &ops, const DecodeRows<G> &rows,
    int rowBase, int tileStart, int lane, int warp, const typename DecodeLayout<D, G>::QTile &sQ,
    const typename DecodeLayout<D, G>::KTile &sK, typename DecodeLayout<D, G>::WarpRows &s) {
  using L = DecodeLayout<D, G>;
  constexpr int kKeys = DecodeTile<D, G>::kKeys;
  // With a 16-key tile, lanes past it read the tile's last row and score nothing.
  const int key = kKeys < 32 && lane >= kKeys ? kKeys - 1 : lane;
  const bool inTile = kKeys == 32 || lane < kKeys;
  const int kv = tileStart + lane;
#pragma unroll
  for (int k = 0; k < L::kRowsPerWarp; ++k) s[k] = 0.0f;
  for (int d = 0; d < D; ++d) {
    const float kd = sK[key][d];
#pragma unroll
    for (int k = 0; k < L::kRowsPerWarp; ++k) s[k] = fmaf(sQ[L::warpRow(warp, k)][d], kd, s[k]);
  }
#pragma unroll
  for (int k = 0; k < L::kRowsPerWarp; ++k) {
    const int row = rowBase + L::warpRow(warp, k);
    float score = negInf();
    if (inTile && row < rows.numRows && kv < rows.keyEnd) {
      const long long qSlot = rows.firstSlot + row / G, h = rows.g * G + row % G;
      bool visible = true;
      if constexpr (V::kHasMask) {
        // A mask of the form `kv <= q && ...` hides later keys without running (as the
        // CPU backend does, so neither evaluates it there).
        if (V::kMaskImpliesCausal && kv > qSlot) visible = false;
        else visible = V::mask(ops, rows.b, h, qSlot, kv);
      }
      if (visible) {
        score = p.scale * s[k];
        if constexpr (V::kHasScore) score = V::score(ops, score, rows.b, h, qSlot, kv);
      }
    }
    s[k] = score;
  }
}

/// The online-softmax step of this warp's rows over one tile, a warp per row: the running
/// max and sum (in every lane), P to sP and each row's rescale factor to sAlpha.
template <int D, int G>
__device__ __forceinline__ void decodeSoftmaxStep(
    const typename DecodeLayout<D, G>::WarpRows &s, typename DecodeLayout<D, G>::WarpRows &runMax,
    typename DecodeLayout<D, G>::WarpRows &runSum, int lane, int warp,
    typename DecodeLayout<D, G>::PTile &sP, typename DecodeLayout<D, G>::RowStats &sAlpha) {
  using L = DecodeLayout<D, G>;
#pragma unroll
  for (int k = 0; k < L::kRowsPerWarp; ++k) {
    const int r = L::warpRow(warp, k);
    const float newMax = fmaxf(runMax[k], warpMax(s[k]));
    float alpha = 1.0f, pr = 0.0f;
    if (newMax != negInf()) {
      alpha = runMax[k] == negInf() ? 0.0f : __expf(runMax[k] - newMax);
      pr = s[k] == negInf() ? 0.0f : __expf(s[k] - newMax);
      runMax[k] = newMax;
    }
    runSum[k] = runSum[k] * alpha + warpSum(pr);
    if (DecodeTile<D, G>::kKeys == 32 || lane < DecodeTile<D, G>::kKeys) sP[r][lane] = pr;
    if (lane == 0) sAlpha[r] = alpha;
  }
}

/// acc = alpha acc + P V for this thread's (rows, columns).
template <int D, int G>
__device__ __forceinline__ void accumulateDecodePV(
    typename DecodeLayout<D, G>::Acc &acc, int tid, const typename DecodeLayout<D, G>::PTile &sP,
    const typename DecodeLayout<D, G>::VTile &sV,
    const typename DecodeLayout<D, G>::RowStats &sAlpha) {
  using L = DecodeLayout<D, G>;
#pragma unroll
  for (int k = 0; k < L::kRowsPerThread; ++k) {
    const int r = L::pvRow(tid, k);
#pragma unroll
    for (int c = 0; c < L::kCols; ++c) {
      const int d = L::pvCol(tid, c);
      float a = acc[k][c] * sAlpha[r];
#pragma unroll
      for (int j = 0; j < DecodeTile<D, G>::kKeys; ++j) a = fmaf(sP[r][j], sV[j][d], a);
      acc[k][c] = a;
    }
  }
}

/// Results of this thread's rows from the row statistics in sMax / sSum: the output itself
/// when there is one split, else this split's normalized partial and its max and sum.
template <typename T, int D, int G>
__device__ __forceinline__ void storeDecodeRows(
    const PagedAttentionParams &p, const DecodeRows<G> &rows, int rowBase, int tid,
    const typename DecodeLayout<D, G>::Acc &acc, const typename DecodeLayout<D, G>::RowStats &sMax,
    const typename DecodeLayout<D, G>::RowStats &sSum) {
  using L = DecodeLayout<D, G>;
  const int split = rows.split;
#pragma unroll
  for (int k = 0; k < L::kRowsPerThread; ++k) {
    const int r = L::pvRow(tid, k);
    const int row = rowBase + r;
    if (row >= rows.numRows) continue;
    const int token = rows.tokenBegin + row / G, h = rows.g * G + row % G;
    const float sum = sSum[r];
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    const long long th = static_cast<long long>(token) * p.num_heads + h;
#pragma unroll
    for (int c = 0; c < L::kCols; ++c) {
      const int d = L::pvCol(tid, c);
      if (p.num_splits == 1) {
        static_cast<T *>(p.out)[th * D + d] = fromFloat<T>(acc[k][c] * inv);
      } else {
        p.partial_out[(th * p.num_splits + split) * D + d] = acc[k][c] * inv;
      }
    }
    if (p.num_splits > 1 && tid % (DecodeTile<D, G>::kThreads / L::kRowGroups) == 0) {
      p.partial_max[th * p.num_splits + split] = sMax[r];
      p.partial_sum[th * p.num_splits + split] = sum;
    }
  }
}

/// The decode kernel body; `extern "C"` wrappers (AttentionKernelSource) instantiate it.
/// T: element type of q, the KV pool and out (float or __nv_bfloat16); D: head dim; G: query
/// heads per kv head. KvFp8: the pool holds E4M3 codes with per-block-head scales
/// (p.kv_scales, kernels/kv_fp8.cuh) instead of T, decoded to f32 as the tile is gathered.
template <class V, typename T, int D, int G, bool KvFp8 = false>
__device__ __forceinline__ void pagedDecode(const PagedAttentionParams &p,
                                            const rgn::RegionOperands &ops) {
  using Tile = DecodeTile<D, G>;
  using L = DecodeLayout<D, G>;
  constexpr int kRows = Tile::kRows, kKeys = Tile::kKeys;
  static_assert(D == 32 || D == 64 || D == 128 || D == 256,
                "head dim: 32, 64, 128 or 256 (shared memory)");

  __shared__ float sK[kKeys][D + 1];
  __shared__ float sV[kKeys][D];
  __shared__ float sQ[kRows][D + 1];
  __shared__ float sP[kRows][kKeys];
  __shared__ float sAlpha[kRows];
  __shared__ float sMax[kRows];
  __shared__ float sSum[kRows];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  DecodeRows<G> rows(p);
  // A sliding window (V::kMaskWindow): keys before the first query's window are hidden from
  // every row, so they are neither loaded nor scored (a split wholly before it does nothing
  // and the combine gives it no weight), as the CPU skips their blocks.
  if constexpr (V::kMaskWindow > 0)
    rows.keyBegin = max(rows.keyBegin, rows.firstSlot - static_cast<int>(V::kMaskWindow - 1));
  const T *q = static_cast<const T *>(p.q);
  const T *cache = static_cast<const T *>(p.kv_cache);
  const int *blocks = p.block_tables + static_cast<long long>(rows.b) * p.max_blocks;
  const long long rowStride = static_cast<long long>(p.num_kv_heads) * D;  // one slot's row

  for (int rowBase = 0; rowBase < rows.numRows; rowBase += kRows) {
    loadDecodeQuery<T, D, G>(p, q, rows, rowBase, tid, sQ);
    // Running max and sum of the rows this warp owns, in every lane; and the P.V
    // accumulators of this thread's rows and columns.
    float runMax[L::kRowsPerWarp], runSum[L::kRowsPerWarp];
#pragma unroll
    for (int k = 0; k < L::kRowsPerWarp; ++k) runMax[k] = negInf(), runSum[k] = 0.0f;
    float acc[L::kRowsPerThread][L::kCols];
#pragma unroll
    for (int k = 0; k < L::kRowsPerThread; ++k)
      for (int c = 0; c < L::kCols; ++c) acc[k][c] = 0.0f;

    for (int tileStart = rows.keyBegin; tileStart < rows.keyEnd; tileStart += kKeys) {
      __syncthreads();  // the previous tile's K, V and P are consumed
      gatherDecodeKv<T, D, G, KvFp8>(p, cache, rows, blocks, rowStride, tileStart, tid, sK, sV);
      __syncthreads();
      float s[L::kRowsPerWarp];
      scoreDecodeTile<V, D, G>(p, ops, rows, rowBase, tileStart, lane, warp, sQ, sK, s);
      decodeSoftmaxStep<D, G>(s, runMax, runSum, lane, warp, sP, sAlpha);
      __syncthreads();  // P and alpha of every row are written
      accumulateDecodePV<D, G>(acc, tid, sP, sV, sAlpha);
    }

    // Row statistics to shared memory, then results.
    __syncthreads();
    if (lane == 0) {
#pragma unroll
      for (int k = 0; k < L::kRowsPerWarp; ++k) {
        sMax[L::warpRow(warp, k)] = runMax[k];
        sSum[L::warpRow(warp, k)] = runSum[k];
      }
    }
    __syncthreads();
    storeDecodeRows<T, D, G>(p, rows, rowBase, tid, acc, sMax, sSum);
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
