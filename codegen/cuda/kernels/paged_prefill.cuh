// Paged prefill attention (FlashAttention-2 tiling, mma.sync bf16) with a FlexAttention-style block mask.
#pragma once

// One CTA per (tile of kM query rows, kv head g, request b); rows are (token i, group head j),
// r = i * G + j, as in the decode kernel, so a K/V tile serves all G heads. Four warps own
// 16 rows each. Per key tile of kN keys: K and V^T are gathered from the paged pool into
// shared memory (bf16), S = Q K^T with mma.sync.m16n8k16 (f32 accumulate), the variant's
// mask and score per element, an online-softmax step per row (a row lives in one quad of
// lanes), and O += P V with P re-packed from the S accumulators as the A operand (FA2).
// The block mask (blockMask below) gives each (row tile, key tile) a class: empty tiles are
// skipped without reading K/V, full tiles skip the mask. Semantics as the decode kernel and
// the CPU backend: score = scale * q.k, hidden keys weigh 0, the score region runs on visible
// keys only, a row that sees nothing is 0. Element type bf16 (sm_80 and newer).

#include <cuda_bf16.h>

#include "core/kernels/attention_params.h"
#include "codegen/cuda/kernels/paged_decode.cuh"
#include "codegen/cuda/kernels/ptx.cuh"
#include "codegen/cuda/kernels/region_ops.h"

namespace ingot {
namespace attn {

/// Prefill tile shapes by head dim: kM query rows (4 warps x 16) by kN keys. Static shared
/// memory per CTA is a K tile [kN][D + 8] and a V^T tile [D][kN + 8] of bf16 (Q is staged
/// through the K tile; the +8 padding staggers banks), under the 48 KiB static limit:
///   D = 64:  kM 64, kN 64: 9.0 + 9.0 KiB = 18 KiB -> 5 CTAs per SM on sm_86/89/120 (100 KiB),
///            more on sm_80/90/100 (164-228 KiB);
///   D = 128: kM 64, kN 64: 17 + 18 KiB = 35 KiB -> 2 CTAs per SM on 100 KiB parts, 4-6 on
///            sm_80/90/100.
/// Registers (Q fragments, S and O accumulators) bound occupancy before shared memory does.
template <int D> struct PrefillTile;
template <> struct PrefillTile<64> {
  static constexpr int kM = 64, kN = 64;
};
template <> struct PrefillTile<128> {
  static constexpr int kM = 64, kN = 64;
};
constexpr int kPrefillThreads = 128;

using ptx::mma16816;

__device__ __forceinline__ unsigned packBf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x = lo in the low half
  return *reinterpret_cast<unsigned *>(&v);
}
__device__ __forceinline__ unsigned load32(const __nv_bfloat16 *p) {
  return *reinterpret_cast<const unsigned *>(p);
}

/// Row range and KV geometry of one CTA, shared by the block-mask and prefill kernels.
template <int G, int kM>
struct PrefillRows {
  int b, g, rowBase, numRows, tokenBegin, firstSlot, len;
  __device__ PrefillRows(const PagedAttentionParams &p, int tile, int kvHead, int request) {
    b = request;
    g = kvHead;
    rowBase = tile * kM;
    len = p.seq_lens[b];
    tokenBegin = p.query_start[b];
    const int numTokens = p.query_start[b + 1] - tokenBegin;
    numRows = numTokens * G;
    firstSlot = len - numTokens;
  }
  /// One past the last key any row of the tile may see.
  template <class V>
  __device__ int keyEnd() const {
    if (V::kHasMask && V::kMaskImpliesCausal) {
      const int lastRow = min(numRows, rowBase + kM) - 1;
      return min(len, firstSlot + lastRow / G + 1);
    }
    return len;
  }
};

/// Block mask: the class of (row tile blockIdx.x, key tile blockIdx.y) of (request, kv head)
/// blockIdx.z = b * num_kv_heads + g, written to p.block_classes. The mask is evaluated for
/// every valid pair, with the causal shortcut the prefill kernel uses, so traps are reported
/// exactly where the prefill would meet them. Computed once per step and shared by all layers.
template <class V, int D, int G>
__device__ __forceinline__ void blockMask(const PagedAttentionParams &p,
                                          const rgn::RegionOperands &ops) {
  using Tile = PrefillTile<D>;
  const int b = blockIdx.z / p.num_kv_heads, g = blockIdx.z % p.num_kv_heads;
  const PrefillRows<G, Tile::kM> rows(p, blockIdx.x, g, b);
  const int keyBase = blockIdx.y * Tile::kN;
  bool anyVisible = false, allVisible = true;
  for (int e = threadIdx.x; e < Tile::kM * Tile::kN; e += blockDim.x) {
    const int row = rows.rowBase + e / Tile::kN, kv = keyBase + e % Tile::kN;
    if (row >= rows.numRows || kv >= rows.len) continue;
    const long long qSlot = rows.firstSlot + row / G, h = g * G + row % G;
    bool visible = true;
    if constexpr (V::kHasMask) {
      if (V::kMaskImpliesCausal && kv > qSlot) visible = false;
      else visible = V::mask(ops, b, h, qSlot, kv);
    }
    anyVisible |= visible;
    allVisible &= visible;
  }
  anyVisible = __syncthreads_or(anyVisible);
  allVisible = __syncthreads_and(allVisible);
  if (threadIdx.x == 0 && blockIdx.x < p.q_tiles && blockIdx.y < p.k_tiles)
    p.block_classes[((static_cast<long long>(b) * p.num_kv_heads + g) * p.q_tiles + blockIdx.x) *
                        p.k_tiles + blockIdx.y] =
        !anyVisible ? kTileEmpty : allVisible ? kTileFull : kTilePartial;
}

/// The prefill kernel's per-warp fragments and shared tiles for head dim D: a warp holds the
/// A fragments of its 16 Q rows (kKSteps k16 steps), the S accumulators of those rows over a
/// key tile (kNTiles n8 tiles) and the O accumulators (kDTiles n8 tiles).
template <int D>
struct PrefillLayout {
  using Tile = PrefillTile<D>;
  static constexpr int kKSteps = D / 16;        ///< k16 steps of Q K^T
  static constexpr int kNTiles = Tile::kN / 8;  ///< n8 tiles of S
  static constexpr int kDTiles = D / 8;         ///< n8 tiles of O
  using QFrags = unsigned[kKSteps][4];  ///< A fragments of Q
  using Scores = float[kNTiles][4];     ///< S accumulators, then P
  using Out = float[kDTiles][4];        ///< O accumulators
  using KTile = __nv_bfloat16[Tile::kN][D + 8];   ///< sK
  using VtTile = __nv_bfloat16[D][Tile::kN + 8];  ///< sVt
};

/// Stages the CTA's Q rows in sK (16-byte vectors; rows past the end are zeros).
template <int D, int G>
__device__ __forceinline__ void stagePrefillQuery(const PagedAttentionParams &p,
                                                  const PrefillRows<G, PrefillTile<D>::kM> &rows,
                                                  int tid, typename PrefillLayout<D>::KTile &sK) {
  const __nv_bfloat16 *q = static_cast<const __nv_bfloat16 *>(p.q);
  for (int e = tid * 8; e < PrefillTile<D>::kM * D; e += kPrefillThreads * 8) {
    const int r = e / D, d = e % D, row = rows.rowBase + r;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (row < rows.numRows) {
      const long long token = rows.tokenBegin + row / G, h = rows.g * G + row % G;
      v = *reinterpret_cast<const uint4 *>(q + (token * p.num_heads + h) * D + d);
    }
    *reinterpret_cast<uint4 *>(&sK[r][d]) = v;
  }
}

/// This warp's A fragments of Q (rows r0 and r0 + 8) from the staged rows.
template <int D>
__device__ __forceinline__ void loadQueryFragments(const typename PrefillLayout<D>::KTile &sK,
                                                   int r0, int tig,
                                                   typename PrefillLayout<D>::QFrags &qa) {
#pragma unroll
  for (int kk = 0; kk < PrefillLayout<D>::kKSteps; ++kk) {
    qa[kk][0] = load32(&sK[r0][kk * 16 + tig * 2]);
    qa[kk][1] = load32(&sK[r0 + 8][kk * 16 + tig * 2]);
    qa[kk][2] = load32(&sK[r0][kk * 16 + tig * 2 + 8]);
    qa[kk][3] = load32(&sK[r0 + 8][kk * 16 + tig * 2 + 8]);
  }
}

/// The block-mask class of (row tile blockIdx.x, key tile kt); partial without a block mask
/// or outside it.
__device__ __forceinline__ unsigned char prefillTileClass(const PagedAttentionParams &p, int b,
                                                          int g, int kt) {
  unsigned char cls = kTilePartial;
  if (p.block_classes != nullptr && blockIdx.x < p.q_tiles && kt < p.k_tiles)
    cls = p.block_classes[((static_cast<long long>(b) * p.num_kv_heads + g) * p.q_tiles +
                           blockIdx.x) * p.k_tiles + kt];
  return cls;
}

/// 8 codes each (8-byte loads) of key j's K and V rows (at `base` and `base + vOffset`)
/// times the block-head's scale, rounded to bf16 exactly, into sK[j][d..] and sVt[d..][j].
/// A missing key (`present` false) is zero codes times zero.
template <int D>
__device__ __forceinline__ void stagePrefillKvFp8(const PagedAttentionParams &p, bool present,
                                                  long long base, long long vOffset,
                                                  long long block, int g, int j, int d,
                                                  typename PrefillLayout<D>::KTile &sK,
                                                  typename PrefillLayout<D>::VtTile &sVt) {
  uint2 kc = make_uint2(0u, 0u), vc = kc;
  float ks = 0.0f, vsc = 0.0f;
  if (present) {
    const unsigned char *codes = static_cast<const unsigned char *>(p.kv_cache) + base;
    const long long scale = kvScaleIndex(p, block, g);
    kc = *reinterpret_cast<const uint2 *>(codes);
    vc = *reinterpret_cast<const uint2 *>(codes + vOffset);
    ks = p.kv_scales[scale];
    vsc = p.kv_scales[scale + p.num_kv_heads];
  }
  __align__(16) __nv_bfloat16 kb[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const unsigned kw = i < 4 ? kc.x : kc.y, vw = i < 4 ? vc.x : vc.y;
    kb[i] = __float2bfloat16_rn(kvfp8::kvFp8Value((kw >> (8 * (i % 4))) & 0xffu) * ks);
    sVt[d + i][j] = __float2bfloat16_rn(kvfp8::kvFp8Value((vw >> (8 * (i % 4))) & 0xffu) * vsc);
  }
  *reinterpret_cast<uint4 *>(&sK[j][d]) = *reinterpret_cast<const uint4 *>(kb);
}

/// 8 bf16 elements each of key j's K and V rows (at `base` and `base + vOffset`) into
/// sK[j][d..] and sVt[d..][j]; zeros for a missing key (`present` false).
template <int D>
__device__ __forceinline__ void stagePrefillKv(const __nv_bfloat16 *cache, bool present,
                                               long long base, long long vOffset, int j, int d,
                                               typename PrefillLayout<D>::KTile &sK,
                                               typename PrefillLayout<D>::VtTile &sVt) {
  uint4 kvec = make_uint4(0, 0, 0, 0), vvec = make_uint4(0, 0, 0, 0);
  if (present) {
    kvec = *reinterpret_cast<const uint4 *>(cache + base);
    vvec = *reinterpret_cast<const uint4 *>(cache + base + vOffset);
  }
  *reinterpret_cast<uint4 *>(&sK[j][d]) = kvec;
  const __nv_bfloat16 *vs = reinterpret_cast<const __nv_bfloat16 *>(&vvec);
#pragma unroll
  for (int i = 0; i < 8; ++i) sVt[d + i][j] = vs[i];
}

/// Gathers K rows and V^T of keys keyBase.. of kv head g from the paged pool; keys past
/// keyEnd are zeros.
template <int D, bool KvFp8>
__device__ __forceinline__ void gatherPrefillKv(const PagedAttentionParams &p, const int *blocks,
                                                long long rowStride, int g, int keyBase,
                                                int keyEnd, int tid,
                                                typename PrefillLayout<D>::KTile &sK,
                                                typename PrefillLayout<D>::VtTile &sVt) {
  const long long vOffset = p.block_size * rowStride;
  for (int e = tid * 8; e < PrefillTile<D>::kN * D; e += kPrefillThreads * 8) {
    const int j = e / D, d = e % D, kv = keyBase + j;
    const bool present = kv < keyEnd;
    long long block = 0, base = 0;
    if (present) base = kvRowOffset<D>(p, blocks, rowStride, g, kv, d, block);
    if constexpr (KvFp8)
      stagePrefillKvFp8<D>(p, present, base, vOffset, block, g, j, d, sK, sVt);
    else
      stagePrefillKv<D>(static_cast<const __nv_bfloat16 *>(p.kv_cache), present, base, vOffset,
                        j, d, sK, sVt);
  }
}

/// S = Q K^T for this warp's 16 rows and the tile's kN keys.
template <int D>
__device__ __forceinline__ void prefillScores(const typename PrefillLayout<D>::QFrags &qa,
                                              const typename PrefillLayout<D>::KTile &sK,
                                              int gid, int tig,
                                              typename PrefillLayout<D>::Scores &s) {
  using L = PrefillLayout<D>;
#pragma unroll
  for (int nt = 0; nt < L::kNTiles; ++nt) {
    s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < L::kKSteps; ++kk)
      mma16816(s[nt], qa[kk], load32(&sK[nt * 8 + gid][kk * 16 + tig * 2]),
               load32(&sK[nt * 8 + gid][kk * 16 + tig * 2 + 8]));
  }
}

/// Scale, mask, score in place (the mask skipped on a full tile); element c of n-tile nt is
/// row rowOf[c / 2], key keyBase + nt*8 + tig*2 + c%2. Hidden or missing pairs are -inf.
template <class V, int D, int G>
__device__ __forceinline__ void applyPrefillVariant(
    const PagedAttentionParams &p, const rgn::RegionOperands &ops,
    const PrefillRows<G, PrefillTile<D>::kM> &rows, unsigned char cls, int keyBase, int keyEnd,
    const int (&rowOf)[2], int tig, typename PrefillLayout<D>::Scores &s) {
#pragma unroll
  for (int nt = 0; nt < PrefillLayout<D>::kNTiles; ++nt)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int row = rowOf[c >> 1], kv = keyBase + nt * 8 + tig * 2 + (c & 1);
      float score = negInf();
      if (row < rows.numRows && kv < keyEnd) {
        const long long qSlot = rows.firstSlot + row / G, h = rows.g * G + row % G;
        bool visible = true;
        if constexpr (V::kHasMask) {
          if (V::kMaskImpliesCausal && kv > qSlot) visible = false;
          else if (cls != kTileFull) visible = V::mask(ops, rows.b, h, qSlot, kv);
        }
        if (visible) {
          score = p.scale * s[nt][c];
          if constexpr (V::kHasScore) score = V::score(ops, score, rows.b, h, qSlot, kv);
        }
      }
      s[nt][c] = score;
    }
}

/// Online softmax per row over the tile: a row's kN scores sit in the 4 lanes of one quad.
/// Turns s into P, updates the running max and sum of rows r0 and r0 + 8 and returns their
/// rescale factors in alpha.
template <int D>
__device__ __forceinline__ void prefillSoftmaxStep(typename PrefillLayout<D>::Scores &s,
                                                   float (&rowMax)[2], float (&rowSum)[2],
                                                   float (&alpha)[2]) {
  constexpr int kNTiles = PrefillLayout<D>::kNTiles;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float m = negInf();
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt)
      m = fmaxf(m, fmaxf(s[nt][2 * half], s[nt][2 * half + 1]));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
    const float newMax = fmaxf(rowMax[half], m);
    alpha[half] = 1.0f;
    float sum = 0.0f;
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
      for (int c = 2 * half; c < 2 * half + 2; ++c) {
        const float pr = s[nt][c] == negInf() ? 0.0f : __expf(s[nt][c] - newMax);
        s[nt][c] = pr;
        sum += pr;
      }
    if (newMax != negInf()) {
      alpha[half] = rowMax[half] == negInf() ? 0.0f : __expf(rowMax[half] - newMax);
      rowMax[half] = newMax;
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    rowSum[half] = rowSum[half] * alpha[half] + sum;
  }
}

/// O = alpha O + P V: P's A fragment for keys 16kk..16kk+15 is S n-tiles 2kk and 2kk+1.
template <int D>
__device__ __forceinline__ void accumulatePrefillPV(typename PrefillLayout<D>::Out &o,
                                                    const float (&alpha)[2],
                                                    const typename PrefillLayout<D>::Scores &s,
                                                    const typename PrefillLayout<D>::VtTile &sVt,
                                                    int gid, int tig) {
  constexpr int kDTiles = PrefillLayout<D>::kDTiles;
#pragma unroll
  for (int dt = 0; dt < kDTiles; ++dt) {
    o[dt][0] *= alpha[0];
    o[dt][1] *= alpha[0];
    o[dt][2] *= alpha[1];
    o[dt][3] *= alpha[1];
  }
#pragma unroll
  for (int kk = 0; kk < PrefillTile<D>::kN / 16; ++kk) {
    const unsigned pa[4] = {packBf16(s[2 * kk][0], s[2 * kk][1]),
                            packBf16(s[2 * kk][2], s[2 * kk][3]),
                            packBf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                            packBf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
    for (int dt = 0; dt < kDTiles; ++dt)
      mma16816(o[dt], pa, load32(&sVt[dt * 8 + gid][kk * 16 + tig * 2]),
               load32(&sVt[dt * 8 + gid][kk * 16 + tig * 2 + 8]));
  }
}

/// Normalizes and writes this thread's two rows.
template <int D, int G>
__device__ __forceinline__ void storePrefillRows(const PagedAttentionParams &p,
                                                 const PrefillRows<G, PrefillTile<D>::kM> &rows,
                                                 const int (&rowOf)[2], const float (&rowSum)[2],
                                                 const typename PrefillLayout<D>::Out &o,
                                                 int tig) {
  __nv_bfloat16 *out = static_cast<__nv_bfloat16 *>(p.out);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = rowOf[half];
    if (row >= rows.numRows) continue;
    const long long token = rows.tokenBegin + row / G, h = rows.g * G + row % G;
    const float inv = rowSum[half] > 0.0f ? 1.0f / rowSum[half] : 0.0f;
    __nv_bfloat16 *dst = out + (token * p.num_heads + h) * D;
#pragma unroll
    for (int dt = 0; dt < PrefillLayout<D>::kDTiles; ++dt)
      *reinterpret_cast<__nv_bfloat162 *>(dst + dt * 8 + tig * 2) =
          __floats2bfloat162_rn(o[dt][2 * half] * inv, o[dt][2 * half + 1] * inv);
  }
}

/// The prefill kernel body; `extern "C"` wrappers (AttentionKernelSource) instantiate it.
/// KvFp8: the pool holds E4M3 codes with per-block-head scales (p.kv_scales,
/// kernels/kv_fp8.cuh); the gather decodes them to bf16, exactly (an E4M3 value times a
/// power of two has 4 significant bits), so the kernel computes what it would on a bf16
/// pool holding the decoded values.
template <class V, int D, int G, bool KvFp8 = false>
__device__ __forceinline__ void pagedPrefill(const PagedAttentionParams &p,
                                             const rgn::RegionOperands &ops) {
  using Tile = PrefillTile<D>;
  using L = PrefillLayout<D>;
  constexpr int kM = Tile::kM, kN = Tile::kN, kThreads = kPrefillThreads;
  static_assert(kM == 16 * (kThreads / 32), "a warp owns 16 rows");
  __shared__ __align__(16) __nv_bfloat16 sK[kN][D + 8];  // also stages Q: kM <= kN
  __shared__ __align__(16) __nv_bfloat16 sVt[D][kN + 8];
  static_assert(kM <= kN, "Q is staged through the K tile");

  const PrefillRows<G, kM> rows(p, blockIdx.x, blockIdx.y, blockIdx.z);
  if (rows.rowBase >= rows.numRows) return;
  const int b = rows.b, g = rows.g;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int gid = lane >> 2, tig = lane & 3;  // mma fragment coordinates
  const int *blocks = p.block_tables + static_cast<long long>(b) * p.max_blocks;
  const long long rowStride = static_cast<long long>(p.num_kv_heads) * D;

  // Stage Q, then keep this warp's A fragments in registers.
  stagePrefillQuery<D, G>(p, rows, tid, sK);
  __syncthreads();
  unsigned qa[L::kKSteps][4];
  const int r0 = warp * 16 + gid;  // this thread's rows: r0 and r0 + 8
  loadQueryFragments<D>(sK, r0, tig, qa);

  float o[L::kDTiles][4];
#pragma unroll
  for (int dt = 0; dt < L::kDTiles; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  float rowMax[2] = {negInf(), negInf()}, rowSum[2] = {0.0f, 0.0f};
  const int rowOf[2] = {rows.rowBase + r0, rows.rowBase + r0 + 8};

  const int keyEnd = rows.template keyEnd<V>();
  for (int keyBase = 0, kt = 0; keyBase < keyEnd; keyBase += kN, ++kt) {
    const unsigned char cls = prefillTileClass(p, b, g, kt);
    if (cls == kTileEmpty) continue;  // uniform across the CTA
    __syncthreads();  // Q fragments loaded / the previous tile consumed
    gatherPrefillKv<D, KvFp8>(p, blocks, rowStride, g, keyBase, keyEnd, tid, sK, sVt);
    __syncthreads();
    float s[L::kNTiles][4];
    prefillScores<D>(qa, sK, gid, tig, s);
    applyPrefillVariant<V, D, G>(p, ops, rows, cls, keyBase, keyEnd, rowOf, tig, s);
    float alpha[2];
    prefillSoftmaxStep<D>(s, rowMax, rowSum, alpha);
    accumulatePrefillPV<D>(o, alpha, s, sVt, gid, tig);
  }
  storePrefillRows<D, G>(p, rows, rowOf, rowSum, o, tig);
}

}  // namespace attn
}  // namespace ingot
