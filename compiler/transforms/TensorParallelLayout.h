//===- TensorParallelLayout.h - which rank gets which heads and rows -*- C++ -*-===//
//
// The arithmetic of docs/tensor-parallel.md: contiguous blocks whose sizes differ by at
// most one, and the kv-head-granular assignment of attention heads to ranks (with kv heads
// replicated when there are fewer than ranks). Plain C++, no MLIR.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

namespace ingot::compiler {

/// Items [start, start + count) of a split dimension.
struct RankSlice {
  int64_t start = 0;
  int64_t count = 0;
};

/// Block `index` of `total` items dealt out in `parts` contiguous blocks whose sizes
/// differ by at most one (the larger blocks first). Needs parts >= 1, 0 <= index < parts.
RankSlice evenBlock(int64_t total, int64_t parts, int64_t index);

/// Block `index` of `total` items dealt out in `parts` contiguous blocks of whole `unit`s
/// (the units in even blocks, as evenBlock): every block starts and ends on a multiple of
/// `unit`. A quantized down projection's K is split this way so that no rank's range cuts a
/// quantization block. Needs unit >= 1, total a multiple of unit, total / unit >= parts.
RankSlice alignedBlock(int64_t total, int64_t unit, int64_t parts, int64_t index);

/// The query heads and kv heads one rank runs.
struct HeadAssignment {
  RankSlice q;
  RankSlice kv;
};

/// Heads of rank `rank` of `ranks` for `numHeads` query heads grouped over `numKvHeads`
/// kv heads. numKvHeads >= ranks: kv heads in even blocks, each with its whole query group.
/// numKvHeads < ranks: rank r serves kv head floor(r * numKvHeads / ranks), and the group's
/// query heads are dealt out in even blocks over the ranks that serve it. Needs
/// 1 <= ranks <= numHeads and numHeads a multiple of numKvHeads.
HeadAssignment assignHeads(int64_t numHeads, int64_t numKvHeads, int64_t ranks, int64_t rank);

} // namespace ingot::compiler
