//===- SamplingCtaEmulationTest.cpp - the sampling kernel's device code on host threads ---===//
//
// Runs the device half of kernels/sampling.cuh (CtaRow's block reductions, the chunked
// id-order draw, sampleRows) on a CTA emulated by kSampleThreads host threads: barriers for
// __syncthreads, per-warp exchanges for the shuffles, function statics for __shared__. The
// tokens must equal sampleRowHost's on fresh random rows and parameters, so the kernel's
// logic is checked on a machine without a GPU (the GPU test checks the compiled kernel).
// Small rows only: a barrier over 256 threads costs a context switch per thread.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

// ---- a CUDA CTA on host threads ---------------------------------------------------------------
namespace emulated {

/// A reusable barrier for `count` threads (std::barrier is C++20).
class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  void arriveAndWait() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t generation = generation_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != generation; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int count_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
};

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};
thread_local Dim3 threadIdx, blockIdx;

constexpr int kThreads = 256;  // checked against sampling::kSampleThreads below
Barrier cta(kThreads);
struct Warp {
  Barrier barrier{32};
  uint64_t slot[32];
};
Warp warps[kThreads / 32];

/// One exchange among the 32 lanes of the calling thread's warp: every lane publishes v and
/// reads lane `src(lane)`'s value (its own when src is out of range).
template <class T, class Src> T exchange(T v, Src src) {
  static_assert(sizeof(T) <= sizeof(uint64_t), "a shuffle moves at most 8 bytes");
  Warp &w = warps[threadIdx.x / 32];
  const int lane = static_cast<int>(threadIdx.x % 32);
  std::memcpy(&w.slot[lane], &v, sizeof(T));
  w.barrier.arriveAndWait();
  const int from = src(lane);
  T r = v;
  if (from >= 0 && from < 32) std::memcpy(&r, &w.slot[from], sizeof(T));
  w.barrier.arriveAndWait();
  return r;
}

}  // namespace emulated

using emulated::blockIdx;
using emulated::threadIdx;
inline void __syncthreads() { emulated::cta.arriveAndWait(); }
template <class T> T __shfl_xor_sync(unsigned, T v, int mask) {
  return emulated::exchange(v, [&](int lane) { return lane ^ mask; });
}
template <class T> T __shfl_up_sync(unsigned, T v, unsigned delta) {
  return emulated::exchange(v, [&](int lane) { return lane - static_cast<int>(delta); });
}
inline int min(int a, int b) { return a < b ? a : b; }

#define __CUDACC__ 1  // compile the device half, with the qualifiers below
#define __host__
#define __device__
#define __forceinline__ inline
#define __shared__ static  // one CTA at a time: a function static is the CTA's shared memory
#include "codegen/cuda/kernels/sampling.cuh"
#undef __shared__
#undef __forceinline__
#undef __device__
#undef __host__
#undef __CUDACC__

namespace ingot {
namespace {

using sampling::RowParams;
static_assert(emulated::kThreads == sampling::kSampleThreads, "the emulated CTA's size");

/// Runs body() as CTA `block` of the emulated grid: kSampleThreads threads.
template <class Body> void runCta(unsigned block, Body body) {
  std::vector<std::thread> threads;
  for (int t = 0; t < emulated::kThreads; ++t)
    threads.emplace_back([&, t] {
      threadIdx.x = static_cast<unsigned>(t);
      blockIdx.x = block;
      body();
    });
  for (std::thread &t : threads) t.join();
}

/// sampleRows (the kernel's body) over every row, one emulated CTA after another.
std::vector<int> runKernel(const std::vector<float> &logits, long stride, int vocab,
                           const std::vector<RowParams> &params) {
  const int rows = static_cast<int>(params.size());
  std::vector<int> tokens(rows, -7);  // poison
  sampling::SampleParams p{logits.data(), stride, vocab, rows, params.data(), tokens.data()};
  for (int row = 0; row < rows; ++row) runCta(static_cast<unsigned>(row), [&] { sampling::sampleRows(p); });
  return tokens;
}

TEST(SamplingCtaEmulationTest, BlockReductionsCoverEveryElementOnce) {
  // maxKey, count and sumEach of CtaRow against sequential loops: counts and maxima exact,
  // double sums to rounding (their order differs); every thread gets the same results.
  std::mt19937_64 rng(std::random_device{}());
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int n : {1, 37, 256, 257, 1000, 4099}) {
    std::vector<float> x(n);
    for (float &v : x) v = normal(rng);
    sampling::SampleKey t[sampling::kSearchProbes];
    for (int j = 0; j < sampling::kSearchProbes; ++j)
      t[j] = sampling::candidateKey(-2.0f + 0.6f * static_cast<float>(j), 0);
    std::vector<sampling::SampleKey> maxes(emulated::kThreads);
    std::vector<int> counts(emulated::kThreads);
    std::vector<std::vector<int>> probeCounts(emulated::kThreads);
    std::vector<std::vector<double>> probeSums(emulated::kThreads);
    runCta(0, [&] {
      const sampling::CtaRow r{n};
      const int me = static_cast<int>(threadIdx.x);
      maxes[me] = r.maxKey([&](int i) { return sampling::candidateKey(x[i], i); });
      counts[me] = r.count([&](int i) { return x[i] > 0.5f; });
      int c[sampling::kSearchProbes];
      double m[sampling::kSearchProbes];
      r.sumEach([&](int i, int(&acc)[sampling::kSearchProbes]) {
        for (int j = 0; j < sampling::kSearchProbes; ++j)
          acc[j] += sampling::candidateKey(x[i], i) >= t[j] ? 1 : 0;
      }, c);
      r.sumEach([&](int i, double(&acc)[sampling::kSearchProbes]) {
        for (int j = 0; j < sampling::kSearchProbes; ++j)
          acc[j] += sampling::candidateKey(x[i], i) >= t[j] ? std::exp(double(x[i])) : 0.0;
      }, m);
      probeCounts[me].assign(c, c + sampling::kSearchProbes);
      probeSums[me].assign(m, m + sampling::kSearchProbes);
    });
    sampling::SampleKey maxKey = 0;
    int count = 0;
    std::vector<int> wantCounts(sampling::kSearchProbes, 0);
    std::vector<double> wantSums(sampling::kSearchProbes, 0.0);
    for (int i = 0; i < n; ++i) {
      maxKey = std::max(maxKey, sampling::candidateKey(x[i], i));
      count += x[i] > 0.5f;
      for (int j = 0; j < sampling::kSearchProbes; ++j)
        if (sampling::candidateKey(x[i], i) >= t[j]) {
          ++wantCounts[j];
          wantSums[j] += std::exp(double(x[i]));
        }
    }
    for (int me = 0; me < emulated::kThreads; ++me) {
      ASSERT_EQ(maxes[me], maxKey) << "n " << n << " thread " << me;
      ASSERT_EQ(counts[me], count) << "n " << n << " thread " << me;
      ASSERT_EQ(probeCounts[me], wantCounts) << "n " << n << " thread " << me;
      for (int j = 0; j < sampling::kSearchProbes; ++j)
        ASSERT_NEAR(probeSums[me][j], wantSums[j], 1e-12 * wantSums[j] + 1e-300)
            << "n " << n << " thread " << me << " probe " << j;
    }
  }
}

TEST(SamplingCtaEmulationTest, DeviceCodeMatchesTheHostAlgorithm) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  // Vocabularies around the chunk and warp boundaries of 256 threads, and one with more
  // than one element per thread of every stride.
  for (int vocab : {1, 31, 256, 300, 2000}) {
    const long stride = vocab + 5;  // padding the kernel must not read as logits
    const int rows = 9;
    std::vector<float> logits(static_cast<size_t>(rows) * stride, NAN);
    std::vector<RowParams> params(rows);
    for (int r = 0; r < rows; ++r) {
      std::normal_distribution<float> normal(0.0f, 0.5f + 4.0f * unit(rng));
      for (int i = 0; i < vocab; ++i) {
        float v = normal(rng);
        if (r == 4) v = std::round(v);  // ties
        if (r == 5 && unit(rng) < 0.3f) v = unit(rng) < 0.5f ? -INFINITY : NAN;
        logits[static_cast<size_t>(r) * stride + i] = v;
      }
      const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
      const int k = 1 + static_cast<int>(rng() % (vocab + 2));
      switch (r) {
        case 0: params[r] = {0.0f, 0, 1.0f, 0.0f, u}; break;                 // greedy
        case 1: params[r] = {1.0f, 0, 1.0f, 0.0f, u}; break;                 // plain
        case 2: params[r] = {0.7f, k, 1.0f, 0.0f, u}; break;                 // top-k
        case 3: params[r] = {0.9f, 0, 0.1f + 0.8f * unit(rng), 0.0f, u}; break;  // top-p
        case 4: params[r] = {1.0f, 3, 0.8f, 0.0f, u}; break;                 // ties
        case 5: params[r] = {1.3f, k, 0.9f, 0.05f, u}; break;                // masked
        case 6: params[r] = {0.5f, 0, 1.0f, 0.3f * unit(rng), u}; break;     // min-p
        case 7: params[r] = {1.0f, 0, 1.0f, 0.0f, 1.0 - 0x1.0p-53}; break;   // largest u
        default: params[r] = {1.0f, 0, 1.0f, 0.0f, 0.0}; break;              // u = 0
      }
    }
    const std::vector<int> tokens = runKernel(logits, stride, vocab, params);
    for (int r = 0; r < rows; ++r) {
      const RowParams &p = params[r];
      EXPECT_EQ(tokens[r], sampling::sampleRowHost(&logits[static_cast<size_t>(r) * stride],
                                                   vocab, p))
          << "vocab " << vocab << " row " << r << ": T " << p.temperature << " top_k "
          << p.top_k << " top_p " << p.top_p << " min_p " << p.min_p << " u " << p.u;
    }
  }
}

TEST(SamplingCtaEmulationTest, DegenerateRowsTakeTheArgmax) {
  const int vocab = 40;
  std::vector<float> logits(3 * vocab, NAN);  // row 0: all NaN
  for (int i = 0; i < vocab; ++i) {
    logits[vocab + i] = -INFINITY;          // row 1: all -inf
    logits[2 * vocab + i] = static_cast<float>(i % 7);
  }
  logits[2 * vocab + 33] = INFINITY;        // row 2: +inf wins
  logits[2 * vocab + 35] = INFINITY;
  const std::vector<RowParams> params(3, RowParams{1.0f, 5, 0.5f, 0.1f, 0.7});
  EXPECT_EQ(runKernel(logits, vocab, vocab, params), (std::vector<int>{0, 0, 33}));
}

}  // namespace
}  // namespace ingot
