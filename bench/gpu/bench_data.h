// Inputs of the GPU attention benchmarks on the host: random bf16 values, a paged KV layout
// with shuffled blocks, and a single-row causal attention reference for spot checks.
#pragma once

#include <cstdint>
#include <vector>

#include "core/base/status.h"

namespace ingot::bench {

/// KV slots per block of the benchmark's pool (the runtime's default block size).
constexpr int kBenchBlockSize = 16;

/// bf16 bits of `f` (round to nearest even) and the f32 value of bf16 bits.
uint16_t toBf16(float f);
float fromBf16(uint16_t bits);

/// Fills `out` with bf16 values uniform in [-amplitude, amplitude), reproducibly for `seed`
/// (threads split the work; the result does not depend on their number).
void fillRandomBf16(std::vector<uint16_t> &out, uint64_t seed, float amplitude = 1.0f);

/// A step over `requests` requests of `seqLen` KV slots each, the last `newTokens` of which
/// are this step's query tokens, with every request's blocks drawn from a shuffled pool
/// (one layer): kv_cache [numBlocks, 1, 2, kBenchBlockSize, kvHeads, headDim].
struct PagedLayout {
  int requests = 0, seqLen = 0, newTokens = 0, maxBlocks = 0, numBlocks = 0;
  std::vector<int32_t> blockTables;  ///< [requests, maxBlocks]
  std::vector<int32_t> seqLens;      ///< [requests]
  std::vector<int32_t> queryStart;   ///< [requests + 1]
  int tokens() const { return requests * newTokens; }
};

/// The layout above with `spareBlocks` unused blocks in the pool, shuffled by `seed`.
/// Fails unless requests >= 1, seqLen >= 1, newTokens in 1..seqLen and spareBlocks >= 0.
StatusOr<PagedLayout> makePagedLayout(int requests, int seqLen, int newTokens, int spareBlocks,
                                      uint64_t seed);

/// Elements of the pool of `layout` for `kvHeads` x `headDim`.
int64_t poolElements(const PagedLayout &layout, int kvHeads, int headDim);

/// Causal attention of query token `token` (0-based among the request's new tokens) of
/// request `request`, head `head`, over the request's KV slots up to its own, in f32 from
/// bf16 q [tokens, heads, headDim] and pool: the reference the kernels' outputs are checked
/// against (score = q.k / sqrt(headDim), GQA: head h reads kv head h / (heads / kvHeads)).
std::vector<float> causalAttentionRow(const PagedLayout &layout, const std::vector<uint16_t> &q,
                                      const std::vector<uint16_t> &pool, int heads, int kvHeads,
                                      int headDim, int request, int token, int head);

}  // namespace ingot::bench
