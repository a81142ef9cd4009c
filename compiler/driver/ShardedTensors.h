//===- ShardedTensors.h - tensor-parallel slices cut while the artifact is written -*- C++ -*-===//
//
// The bytes of a sharded weight (an `ingot.weight` with an `#ingot.shard`): the slice
// [offset, offset + size) along one dimension of its source tensor, cut from the source's
// byte stream as the artifact writer writes it. Nothing but the slice's current chunk is
// held, so sharding a model never copies it in memory; each rank's slice re-reads the
// source. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <vector>

#include "core/artifact/artifact_writer.h"

namespace ingot::compiler {

/// Which part of a source tensor a shard is.
struct ShardSlice {
  int64_t dim = 0;
  int64_t offset = 0;
  int64_t size = 0;
};

/// The shape of `slice` of a tensor of `sourceShape`.
std::vector<int64_t> slicedShape(const std::vector<int64_t> &sourceShape, const ShardSlice &slice);

/// A producer of `slice` of the tensor of `sourceShape` x `dtype` whose bytes `source`
/// streams (in any chunking). Fails when the slice does not fit the shape, or when `dtype`
/// is packed below a byte and the cut falls inside a byte (an odd offset or size along the
/// last dimension, or rows of an odd number of elements).
StatusOr<TensorProducer> sliceProducer(TensorProducer source, schema::DType dtype,
                                       const std::vector<int64_t> &sourceShape,
                                       const ShardSlice &slice);

/// `slice` of the in-memory tensor `bytes` of `sourceShape` x `dtype` (same checks).
StatusOr<std::vector<uint8_t>> sliceBytes(const std::vector<uint8_t> &bytes,
                                          schema::DType dtype,
                                          const std::vector<int64_t> &sourceShape,
                                          const ShardSlice &slice);

} // namespace ingot::compiler
