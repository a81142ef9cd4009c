//===- TensorParallelLayout.cpp - which rank gets which heads and rows -----===//
#include "compiler/transforms/TensorParallelLayout.h"

#include <algorithm>

namespace ingot::compiler {

RankSlice evenBlock(int64_t total, int64_t parts, int64_t index) {
  int64_t base = total / parts, extra = total % parts;
  return {index * base + std::min(index, extra), base + (index < extra ? 1 : 0)};
}

RankSlice alignedBlock(int64_t total, int64_t unit, int64_t parts, int64_t index) {
  RankSlice units = evenBlock(total / unit, parts, index);
  return {units.start * unit, units.count * unit};
}

HeadAssignment assignHeads(int64_t numHeads, int64_t numKvHeads, int64_t ranks, int64_t rank) {
  const int64_t group = numHeads / numKvHeads;
  HeadAssignment out;
  if (numKvHeads >= ranks) {
    out.kv = evenBlock(numKvHeads, ranks, rank);
    out.q = {out.kv.start * group, out.kv.count * group};
    return out;
  }
  const int64_t kvHead = rank * numKvHeads / ranks;
  // The ranks serving kvHead are the contiguous r with floor(r * Hkv / N) == kvHead:
  // r in [ceil(kvHead * N / Hkv), ceil((kvHead + 1) * N / Hkv)).
  const int64_t first = (kvHead * ranks + numKvHeads - 1) / numKvHeads;
  const int64_t end = ((kvHead + 1) * ranks + numKvHeads - 1) / numKvHeads;
  RankSlice local = evenBlock(group, end - first, rank - first);
  out.kv = {kvHead, 1};
  out.q = {kvHead * group + local.start, local.count};
  return out;
}

} // namespace ingot::compiler
