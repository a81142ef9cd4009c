// Random bf16 inputs, shuffled paged layouts and the causal reference row of the GPU benches.
#include "bench/gpu/bench_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <thread>

namespace ingot::bench {

uint16_t toBf16(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  b += 0x7fffu + ((b >> 16) & 1u);
  return static_cast<uint16_t>(b >> 16);
}

float fromBf16(uint16_t bits) {
  const uint32_t b = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

namespace {
/// SplitMix64 of a counter: element i's value depends on (seed, i) only, so any split of the
/// work among threads gives the same array.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace

void fillRandomBf16(std::vector<uint16_t> &out, uint64_t seed, float amplitude) {
  const size_t n = out.size();
  const uint64_t base = mix(seed);
  const unsigned threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  const size_t chunk = (n + threads - 1) / threads;
  auto fill = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      // 24 random bits -> [-1, 1), exactly representable before the bf16 rounding.
      const float u = static_cast<float>(mix(base + i) >> 40) * (2.0f / 16777216.0f) - 1.0f;
      out[i] = toBf16(amplitude * u);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    const size_t begin = t * chunk, end = std::min(n, begin + chunk);
    if (begin < end) pool.emplace_back(fill, begin, end);
  }
  for (std::thread &t : pool) t.join();
}

StatusOr<PagedLayout> makePagedLayout(int requests, int seqLen, int newTokens, int spareBlocks,
                                      uint64_t seed) {
  if (requests < 1 || seqLen < 1 || newTokens < 1 || newTokens > seqLen || spareBlocks < 0)
    return invalidArgument("paged layout: need requests >= 1 (got " + std::to_string(requests) +
                           "), seqLen >= 1 (got " + std::to_string(seqLen) +
                           "), newTokens in 1..seqLen (got " + std::to_string(newTokens) +
                           ") and spareBlocks >= 0 (got " + std::to_string(spareBlocks) + ")");
  PagedLayout l;
  l.requests = requests;
  l.seqLen = seqLen;
  l.newTokens = newTokens;
  l.maxBlocks = (seqLen + kBenchBlockSize - 1) / kBenchBlockSize;
  l.numBlocks = requests * l.maxBlocks + spareBlocks;
  std::vector<int32_t> perm(l.numBlocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(perm.begin(), perm.end(), rng);
  l.blockTables.assign(perm.begin(), perm.begin() + static_cast<size_t>(requests) * l.maxBlocks);
  l.seqLens.assign(requests, seqLen);
  l.queryStart.resize(requests + 1);
  for (int b = 0; b <= requests; ++b) l.queryStart[b] = b * newTokens;
  return l;
}

int64_t poolElements(const PagedLayout &layout, int kvHeads, int headDim) {
  return int64_t{layout.numBlocks} * 2 * kBenchBlockSize * kvHeads * headDim;
}

std::vector<float> causalAttentionRow(const PagedLayout &l, const std::vector<uint16_t> &q,
                                      const std::vector<uint16_t> &pool, int heads, int kvHeads,
                                      int headDim, int request, int token, int head) {
  const int group = heads / kvHeads, g = head / group;
  const int qSlot = l.seqLens[request] - l.newTokens + token;
  const int64_t qRow = (int64_t{l.queryStart[request] + token} * heads + head) * headDim;
  const int64_t slotStride = int64_t{kvHeads} * headDim;  // one slot's row of K (or V)
  auto kvRow = [&](int slot, int kv) {
    const int64_t block = l.blockTables[int64_t{request} * l.maxBlocks + slot / kBenchBlockSize];
    return ((block * 2 + kv) * kBenchBlockSize + slot % kBenchBlockSize) * slotStride +
           int64_t{g} * headDim;
  };
  const float scale = 1.0f / std::sqrt(static_cast<float>(headDim));
  std::vector<double> scores(qSlot + 1);
  double maxScore = -INFINITY;
  for (int s = 0; s <= qSlot; ++s) {
    const int64_t k = kvRow(s, 0);
    double dot = 0.0;
    for (int d = 0; d < headDim; ++d) dot += double{fromBf16(q[qRow + d])} * fromBf16(pool[k + d]);
    scores[s] = scale * dot;
    maxScore = std::max(maxScore, scores[s]);
  }
  std::vector<double> acc(headDim, 0.0);
  double sum = 0.0;
  for (int s = 0; s <= qSlot; ++s) {
    const double p = std::exp(scores[s] - maxScore);
    sum += p;
    const int64_t v = kvRow(s, 1);
    for (int d = 0; d < headDim; ++d) acc[d] += p * fromBf16(pool[v + d]);
  }
  std::vector<float> out(headDim);
  for (int d = 0; d < headDim; ++d) out[d] = static_cast<float>(acc[d] / sum);
  return out;
}

}  // namespace ingot::bench
