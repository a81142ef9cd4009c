// Token sampling of logit rows (greedy, temperature, top-k/p, min-p): one algorithm for host and GPU.
#pragma once
#include "core/kernels/sampling_params.h"

// Semantics are those of the CPU Sampler (runtime/generate/sampler.cc, Sampler::filter and
// Sampler::draw, argmax) for a row without penalties, given the uniform the request's
// Sampler drew (Sampler::nextUniform):
//   greedy (temperature <= 0), a row without a candidate, or a +inf maximum: argmax (ties
//     to the lowest id, NaN never chosen, 0 for an all-NaN/-inf row);
//   candidates: x > -inf (not NaN); top-k (0 < k < #candidates) keeps the k best under
//     (logit desc, id asc); weights w = exp((x - max) / T) in double; top-p (< 1) keeps the
//     smallest best-first prefix whose weight reaches top_p * total (all when rounding
//     leaves it short); min-p (> 0) keeps w >= min_p;
//   draw: the first kept token in id order whose running weight sum exceeds u * (sum of the
//     kept weights); the last kept one when rounding runs past the end.
// No element is sorted: each element has a unique 64-bit key (order-preserving logit bits
// << 32 | ~id), so "the k best" and "the top-p prefix" are "every key >= a threshold", and
// the thresholds are found by search over key space with counts (top-k) and weight sums
// (top-p), kSearchProbes thresholds per pass over the row. The algorithm (sampleRowWith) is
// written once over a reduction policy: the host runs it sequentially (sampleRowHost), the
// kernel with one CTA of kSampleThreads per row, reducing over the CTA. Counts, maxima and the selection are exact on both; double
// sums are taken in another order on the GPU (strided partial sums, a tree over the CTA;
// the draw over contiguous per-thread chunks), so the GPU may differ from the host and the
// CPU only where a sum lands within rounding of a top-p target or a draw boundary, and
// where its exp() differs from the host's in the last place (CUDA: 1 ulp at most).

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define INGOT_SAMPLING_HD __host__ __device__ __forceinline__
#define INGOT_SAMPLING_UNROLL _Pragma("unroll")
#else
#include <cmath>
#include <cstring>
#define INGOT_SAMPLING_HD inline
#define INGOT_SAMPLING_UNROLL
#endif

namespace ingot {
namespace sampling {


// ---- keys (host and device) ---------------------------------------------------------------

/// A total order on the candidates: larger key = larger logit, or the same logit and a
/// smaller id. 0 is below every key (a non-candidate's key).
using SampleKey = unsigned long long;

/// The bit pattern of x (host and device spell it differently).
INGOT_SAMPLING_HD unsigned floatBits(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  unsigned b;
  std::memcpy(&b, &x, sizeof(b));
  return b;
#endif
}

/// The float of bit pattern b.
INGOT_SAMPLING_HD float floatFromBits(unsigned b) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(b);
#else
  float x;
  std::memcpy(&x, &b, sizeof(x));
  return x;
#endif
}

/// x > -inf and not NaN: a token filter() may keep.
INGOT_SAMPLING_HD bool isCandidate(float x) { return x > floatFromBits(0xff800000u); }

/// The bits of a non-NaN float, mapped so that unsigned order is float order; -0 and +0
/// map alike (they are equal logits: the lower id wins).
INGOT_SAMPLING_HD unsigned orderedBits(float x) {
  const unsigned b = x == 0.0f ? 0u : floatBits(x);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

/// The key of element `id` with logit x, 0 when it is not a candidate.
INGOT_SAMPLING_HD SampleKey candidateKey(float x, int id) {
  if (!isCandidate(x)) return 0;
  return (static_cast<SampleKey>(orderedBits(x)) << 32) | static_cast<unsigned>(~id);
}

/// The token id of a candidate's key.
INGOT_SAMPLING_HD int keyId(SampleKey key) {
  return static_cast<int>(~static_cast<unsigned>(key & 0xffffffffu));
}

/// Thresholds one pass over the row tries in the searches below: they split the interval
/// left into kSearchProbes + 1 parts, so a pass settles 3 bits of the key, not 1 (a third
/// of the passes and barriers of a binary search for a few compares more per element;
/// counts and sums stay exact per threshold, so the result is that of a binary search).
/// 7 uses about 80 registers, no spills (entry point __launch_bounds__(256, 1)).
constexpr int kSearchProbes = 7;

/// The largest key T in [lo, hi] for which holds(T) is true, where holds(lo) is true and
/// holds(T) depends only on the set {elements with key >= T}, true while that set is large
/// enough (a count or a weight sum reaching a bound). holds(t, ok) sets ok[j] = holds(t[j])
/// for kSearchProbes ascending keys in one pass. Searches the logit half of the key first,
/// then the id half over the row's ids only (~(vocab - 1) and up): about
/// (32 + log2(vocab)) / 3 passes.
template <class Holds>
INGOT_SAMPLING_HD SampleKey largestKeyWhere(SampleKey lo, SampleKey hi, int vocab, Holds holds) {
  // One loop with one call of `holds` (the kernel inlines a whole pass over the row there).
  // Invariant: holds at (the key of) a; the answer is in [a, b].
  SampleKey a = lo >> 32, b = hi >> 32, base = 0;
  bool idHalf = false;
  for (;;) {
    if (a >= b) {
      if (idHalf) break;
      idHalf = true;
      base = a << 32;
      // No key's low half is below ~(vocab - 1): starting there keeps the set (and holds)
      // of `base`; lo and hi still bound the search within their own logit half.
      const SampleKey firstLow = ~static_cast<unsigned>(vocab - 1);
      a = (lo >> 32) == (base >> 32) && (lo & 0xffffffffu) > firstLow ? (lo & 0xffffffffu)
                                                                        : firstLow;
      b = (hi >> 32) == (base >> 32) ? (hi & 0xffffffffu) : 0xffffffffu;
      continue;
    }
    SampleKey probe[kSearchProbes], key[kSearchProbes];
    bool ok[kSearchProbes];
    INGOT_SAMPLING_UNROLL
    for (int j = 0; j < kSearchProbes; ++j) {  // in (a, b], ascending
      probe[j] = a + ((b - a) * (j + 1) + kSearchProbes) / (kSearchProbes + 1);
      key[j] = idHalf ? base | probe[j] : probe[j] << 32;
    }
    holds(key, ok);
    // ok is true up to some probe and false after it: keep the part in between.
    SampleKey na = a, nb = b;
    INGOT_SAMPLING_UNROLL
    for (int j = 0; j < kSearchProbes; ++j) {
      if (ok[j]) na = probe[j];
      if (!ok[kSearchProbes - 1 - j]) nb = probe[kSearchProbes - 1 - j] - 1;
    }
    a = na;
    b = nb;
  }
  return base | a;
}

/// The token of row `x` (vocab values) under `p`, with the row-wide reductions of `r`:
///   SampleKey r.maxKey(f)   max over ids i of f(i) (a SampleKey; 0 when the row is empty)
///   int r.count(f)          number of ids i with f(i)
///   double r.sum(f)         sum over ids of f(i)
///   void r.sumEach(f, out)  out[j] = sum over ids of acc[j] after f(i, acc) for each id, per
///                           probe j (T out[kSearchProbes], T = int or double)
///   int r.drawIdOrder(w, u) the draw over weights w(i) (< 0: not kept), in id order;
///                           -1 when nothing is kept
/// Every thread that calls it gets the token.
#ifdef __CUDACC__
#pragma nv_exec_check_disable  // instantiated with host or device reductions, not both
#endif
template <class Reduce>
INGOT_SAMPLING_HD int sampleRowWith(const float *x, int vocab, const RowParams &p, Reduce &r) {
  if (vocab <= 0) return 0;
  const SampleKey best = r.maxKey([&](int i) { return candidateKey(x[i], i); });
  if (best == 0) return 0;  // no candidate: argmax of an all-NaN/-inf row
  const float maxLogit = x[keyId(best)];
  if (p.temperature <= 0.0f || maxLogit == floatFromBits(0x7f800000u)) return keyId(best);

  // Top-k: the k best keys are those >= the largest T that k keys reach.
  SampleKey threshold = 1;  // every candidate
  if (p.top_k > 0 && p.top_k < vocab) {
    const int k = p.top_k;
    const int candidates = r.count([&](int i) { return isCandidate(x[i]); });
    if (k < candidates)
      threshold = largestKeyWhere(1, best, vocab, [&](const SampleKey(&t)[kSearchProbes],
                                                      bool(&ok)[kSearchProbes]) {
        int n[kSearchProbes];
        r.sumEach(
            [&](int i, int(&acc)[kSearchProbes]) {
              const SampleKey key = candidateKey(x[i], i);
              INGOT_SAMPLING_UNROLL
              for (int j = 0; j < kSearchProbes; ++j) acc[j] += key >= t[j] ? 1 : 0;
            },
            n);
        INGOT_SAMPLING_UNROLL
        for (int j = 0; j < kSearchProbes; ++j) ok[j] = n[j] >= k;
      });
  }

  const double invT = 1.0 / static_cast<double>(p.temperature);
  const double maxD = static_cast<double>(maxLogit);
  auto weight = [&](float v) { return exp((static_cast<double>(v) - maxD) * invT); };

  // Top-p: the best-first prefix reaching top_p * total ends at the largest key T whose
  // mass (weights of keys >= T) reaches it; T = threshold (keep all) when rounding leaves
  // every prefix short.
  if (p.top_p < 1.0f) {
    const SampleKey from = threshold;
    const double total =
        r.sum([&](int i) { return candidateKey(x[i], i) >= from ? weight(x[i]) : 0.0; });
    const double target = static_cast<double>(p.top_p) * total;
    threshold = largestKeyWhere(from, best, vocab, [&](const SampleKey(&t)[kSearchProbes],
                                                       bool(&ok)[kSearchProbes]) {
      double mass[kSearchProbes];
      r.sumEach(
          [&](int i, double(&acc)[kSearchProbes]) {
            const SampleKey key = candidateKey(x[i], i);
            if (key < t[0]) return;  // below every probe (the probes ascend)
            const double w = weight(x[i]);
            INGOT_SAMPLING_UNROLL
            for (int j = 0; j < kSearchProbes; ++j) acc[j] += key >= t[j] ? w : 0.0;
          },
          mass);
      INGOT_SAMPLING_UNROLL
      for (int j = 0; j < kSearchProbes; ++j) ok[j] = mass[j] >= target;
    });
  }

  const double minP = static_cast<double>(p.min_p);
  const int token = r.drawIdOrder(
      [&](int i) {
        if (candidateKey(x[i], i) < threshold) return -1.0;
        const double w = weight(x[i]);
        return p.min_p > 0.0f && w < minP ? -1.0 : w;
      },
      p.u);
  return token >= 0 ? token : keyId(best);  // nothing kept: only for min_p > 1 (invalid)
}

#if !defined(__CUDACC_RTC__)

// ---- host ---------------------------------------------------------------------------------

/// Sequential reductions in id order: the CPU Sampler's own order for the draw.
struct SequentialRow {
  int n;
  template <class F> SampleKey maxKey(F f) const {
    SampleKey m = 0;
    for (int i = 0; i < n; ++i) {
      const SampleKey k = f(i);
      if (k > m) m = k;
    }
    return m;
  }
  template <class F> int count(F f) const {
    int c = 0;
    for (int i = 0; i < n; ++i) c += f(i) ? 1 : 0;
    return c;
  }
  template <class F> double sum(F f) const {
    double s = 0;
    for (int i = 0; i < n; ++i) s += f(i);
    return s;
  }
  template <class T, class F> void sumEach(F f, T (&out)[kSearchProbes]) const {
    for (int j = 0; j < kSearchProbes; ++j) out[j] = 0;
    for (int i = 0; i < n; ++i) f(i, out);
  }
  template <class W> int drawIdOrder(W w, double u) const {
    double total = 0;
    int last = -1;
    for (int i = 0; i < n; ++i) {
      const double wi = w(i);
      if (wi >= 0) total += wi, last = i;
    }
    double left = u * total;
    for (int i = 0; i < n; ++i) {
      const double wi = w(i);
      if (wi < 0) continue;
      if (left < wi) return i;
      left -= wi;
    }
    return last;  // rounding ran past the end
  }
};

/// The same algorithm on the host, sequentially (tests, and a CPU fallback).
inline int sampleRowHost(const float *x, int vocab, const RowParams &p) {
  SequentialRow r{vocab};
  return sampleRowWith(x, vocab, p, r);
}

#endif  // !__CUDACC_RTC__

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)

// ---- device ---------------------------------------------------------------------------------

/// Reductions over one row by the kSampleThreads threads of a CTA, every thread taking the
/// ids i = threadIdx.x + j * kSampleThreads (coalesced); every thread gets each result.
/// Each reduction ends with a barrier after which its shared slots may be reused.
struct CtaRow {
  int n;

  /// op over every thread's v; `identity` fills the unused slots of the last step.
  template <class T, class Op>
  __device__ __forceinline__ static T reduce(T v, Op op, T identity) {
    __shared__ T partial[kSampleThreads / 32];
    __shared__ T result;
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
      T s = lane < kSampleThreads / 32 ? partial[lane] : identity;
      for (int o = 16; o > 0; o >>= 1) s = op(s, __shfl_xor_sync(0xffffffffu, s, o));
      if (lane == 0) result = s;
    }
    __syncthreads();
    return result;
  }
  struct Max {
    __device__ SampleKey operator()(SampleKey a, SampleKey b) const { return a > b ? a : b; }
  };
  struct Plus {
    template <class T> __device__ T operator()(T a, T b) const { return a + b; }
  };

  template <class F> __device__ SampleKey maxKey(F f) const {
    SampleKey m = 0;
    for (int i = threadIdx.x; i < n; i += kSampleThreads) {
      const SampleKey k = f(i);
      m = k > m ? k : m;
    }
    return reduce(m, Max(), SampleKey(0));
  }
  template <class F> __device__ int count(F f) const {
    int c = 0;
    for (int i = threadIdx.x; i < n; i += kSampleThreads) c += f(i) ? 1 : 0;
    return reduce(c, Plus(), 0);
  }
  template <class F> __device__ double sum(F f) const {
    double s = 0;
    for (int i = threadIdx.x; i < n; i += kSampleThreads) s += f(i);
    return reduce(s, Plus(), 0.0);
  }
  /// Per-probe sums of every thread's accumulators, all probes at once through shared
  /// memory: each of kSearchProbes x 8 threads adds up 32 threads' values in order, then one
  /// thread per probe the 8 group sums (three barriers, no shuffles: a pass's reduction
  /// costs about as much as one reduce() per probe would, and the order is fixed).
  template <class T, class F> __device__ void sumEach(F f, T (&out)[kSearchProbes]) const {
    constexpr int kGroups = kSampleThreads / 32;
    __shared__ T partial[kSearchProbes][kSampleThreads];
    __shared__ T groups[kSearchProbes][kGroups];
    __shared__ T result[kSearchProbes];
    T acc[kSearchProbes];
#pragma unroll
    for (int j = 0; j < kSearchProbes; ++j) acc[j] = 0;
    for (int i = threadIdx.x; i < n; i += kSampleThreads) f(i, acc);
#pragma unroll
    for (int j = 0; j < kSearchProbes; ++j) partial[j][threadIdx.x] = acc[j];
    __syncthreads();
    if (threadIdx.x < kSearchProbes * kGroups) {
      const int j = threadIdx.x / kGroups, g = threadIdx.x % kGroups;
      T s = 0;
      for (int t = g * 32; t < g * 32 + 32; ++t) s += partial[j][t];
      groups[j][g] = s;
    }
    __syncthreads();
    if (threadIdx.x < kSearchProbes) {
      T s = 0;
      for (int g = 0; g < kGroups; ++g) s += groups[threadIdx.x][g];
      result[threadIdx.x] = s;
    }
    __syncthreads();  // the next call writes result only after two barriers: no race
#pragma unroll
    for (int j = 0; j < kSearchProbes; ++j) out[j] = result[j];
  }

  /// Thread t owns the contiguous ids [t * chunk, (t + 1) * chunk): chunk sums, an
  /// inclusive scan of them over the CTA, then the thread whose interval
  /// [scan before it, its scan) holds u * total walks its chunk. Past the end (rounding):
  /// the last kept token of the row, or of the owner's chunk.
  template <class W> __device__ int drawIdOrder(W w, double u) const {
    __shared__ double warpTotals[kSampleThreads / 32];
    __shared__ int token;
    const int chunk = (n + kSampleThreads - 1) / kSampleThreads;
    const int begin = min(n, static_cast<int>(threadIdx.x) * chunk);
    const int end = min(n, begin + chunk);
    double own = 0;
    int lastKept = -1;
    for (int i = begin; i < end; ++i) {
      const double wi = w(i);
      if (wi >= 0) own += wi, lastKept = i;
    }
    // Inclusive scan: within each warp, then the warps' totals.
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    double incl = own;
    for (int o = 1; o < 32; o <<= 1) {
      const double v = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += v;
    }
    if (lane == 31) warpTotals[warp] = incl;
    if (threadIdx.x == 0) token = -1;
    __syncthreads();
    double before = 0, total = 0;
    for (int k = 0; k < kSampleThreads / 32; ++k) {
      before += k < warp ? warpTotals[k] : 0.0;
      total += warpTotals[k];
    }
    incl += before;
    double excl = __shfl_up_sync(0xffffffffu, incl, 1);
    if (lane == 0) excl = before;
    const double target = u * total;
    if (own > 0 && excl <= target && target < incl) {
      double left = target - excl;
      int pick = lastKept;
      for (int i = begin; i < end; ++i) {
        const double wi = w(i);
        if (wi < 0) continue;
        if (left < wi) {
          pick = i;
          break;
        }
        left -= wi;
      }
      token = pick;  // the intervals are disjoint: one writer at most
    }
    __syncthreads();
    if (token >= 0) return token;
    // Nobody owns the target (it rounded up to the total): the last kept token.
    return reduce(lastKept, [](int a, int b) { return a > b ? a : b; }, -1);
  }
};

/// Row blockIdx.x of p: its token into p.tokens.
__device__ __forceinline__ void sampleRows(const SampleParams &p) {
  const int row = blockIdx.x;
  if (row >= p.rows) return;
  const float *x = p.logits + static_cast<long>(row) * p.row_stride;
  const RowParams params = p.params[row];
  CtaRow r{p.vocab};
  const int token = sampleRowWith(x, p.vocab, params, r);
  if (threadIdx.x == 0) p.tokens[row] = token;
}

#endif  // __CUDACC__ || __CUDACC_RTC__

}  // namespace sampling
}  // namespace ingot
