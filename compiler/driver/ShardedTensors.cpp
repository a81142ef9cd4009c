//===- ShardedTensors.cpp - tensor-parallel slices cut while the artifact is written -===//
#include "compiler/driver/ShardedTensors.h"

#include <algorithm>
#include <memory>
#include <string>

#include "core/artifact/dtype_info.h"

namespace ingot::compiler {

std::vector<int64_t> slicedShape(const std::vector<int64_t> &sourceShape,
                                 const ShardSlice &slice) {
  std::vector<int64_t> shape = sourceShape;
  if (slice.dim >= 0 && static_cast<size_t>(slice.dim) < shape.size())
    shape[slice.dim] = slice.size;
  return shape;
}

StatusOr<TensorProducer> sliceProducer(TensorProducer source, schema::DType dtype,
                                       const std::vector<int64_t> &sourceShape,
                                       const ShardSlice &slice) {
  const int64_t rank = static_cast<int64_t>(sourceShape.size());
  if (slice.dim < 0 || slice.dim >= rank)
    return invalidArgument("shard dim " + std::to_string(slice.dim) + " is out of range for a " +
                           std::to_string(rank) + "-d tensor");
  const int64_t extent = sourceShape[slice.dim];
  if (slice.offset < 0 || slice.size <= 0 || slice.offset > extent ||
      slice.size > extent - slice.offset)
    return invalidArgument("shard [" + std::to_string(slice.offset) + ", " +
                           std::to_string(slice.offset + slice.size) +
                           ") does not fit the source's " + std::to_string(extent) +
                           " along dim " + std::to_string(slice.dim));
  const int bits = dtypeBits(dtype);
  // The source is `outer` runs of `extent * inner` bits; the slice takes bits
  // [offset * inner, (offset + size) * inner) of each run. Packed sub-byte elements (two
  // per byte, along the last dimension) can be cut only where those bounds fall on bytes.
  uint64_t inner = static_cast<uint64_t>(bits);
  for (int64_t d = slice.dim + 1; d < rank; ++d)
    inner *= static_cast<uint64_t>(sourceShape[d]);
  const uint64_t beginBits = static_cast<uint64_t>(slice.offset) * inner;
  const uint64_t sizeBits = static_cast<uint64_t>(slice.size) * inner;
  if (beginBits % 8 != 0 || sizeBits % 8 != 0 || (extent * inner) % 8 != 0)
    return invalidArgument("shard [" + std::to_string(slice.offset) + ", " +
                           std::to_string(slice.offset + slice.size) + ") along dim " +
                           std::to_string(slice.dim) + " cuts a byte of packed " +
                           std::to_string(bits) + "-bit elements");
  const uint64_t run = static_cast<uint64_t>(extent) * inner / 8;
  const uint64_t begin = beginBits / 8;
  const uint64_t end = begin + sizeBits / 8;
  return TensorProducer([source = std::move(source), run, begin,
                         end](const TensorByteSink &sink) -> Status {
    uint64_t position = 0; // byte offset in the source stream
    return source([&](const void *data, uint64_t size) -> Status {
      if (run == 0) // an empty tensor: nothing to keep
        return okStatus();
      const uint8_t *bytes = static_cast<const uint8_t *>(data);
      const uint64_t chunkEnd = position + size;
      while (position < chunkEnd) {
        const uint64_t runStart = position - position % run;
        const uint64_t keepFrom = std::max(position, runStart + begin);
        const uint64_t keepTo = std::min(chunkEnd, runStart + end);
        if (keepFrom < keepTo)
          INGOT_RETURN_IF_ERROR(sink(bytes + (keepFrom - (chunkEnd - size)), keepTo - keepFrom));
        position = std::min(chunkEnd, runStart + run);
      }
      return okStatus();
    });
  });
}

StatusOr<std::vector<uint8_t>> sliceBytes(const std::vector<uint8_t> &bytes,
                                          schema::DType dtype,
                                          const std::vector<int64_t> &sourceShape,
                                          const ShardSlice &slice) {
  TensorProducer whole = [&bytes](const TensorByteSink &sink) {
    return sink(bytes.data(), bytes.size());
  };
  StatusOr<TensorProducer> producer = sliceProducer(whole, dtype, sourceShape, slice);
  if (!producer.ok())
    return producer.status();
  std::vector<uint8_t> out;
  INGOT_RETURN_IF_ERROR((*producer)([&out](const void *data, uint64_t size) {
    const uint8_t *p = static_cast<const uint8_t *>(data);
    out.insert(out.end(), p, p + size);
    return okStatus();
  }));
  return out;
}

} // namespace ingot::compiler
