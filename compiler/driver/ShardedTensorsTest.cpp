//===- ShardedTensorsTest.cpp - slices cut from a streamed source, against index arithmetic -===//
#include "compiler/driver/ShardedTensors.h"

#include <random>

#include <gtest/gtest.h>

namespace ingot::compiler {
namespace {

/// A producer streaming `bytes` in random-sized chunks (1 byte up to the whole tensor).
TensorProducer chunkedSource(const std::vector<uint8_t> &bytes, uint64_t seed) {
  return [&bytes, seed](const TensorByteSink &sink) -> Status {
    std::mt19937_64 rng(seed);
    uint64_t at = 0;
    while (at < bytes.size()) {
      uint64_t left = bytes.size() - at;
      uint64_t chunk = std::uniform_int_distribution<uint64_t>(1, left)(rng);
      if (rng() % 3 == 0)
        chunk = std::min<uint64_t>(left, 1 + rng() % 7); // many tiny chunks too
      INGOT_RETURN_IF_ERROR(sink(bytes.data() + at, chunk));
      at += chunk;
    }
    return okStatus();
  };
}

/// The slice by index arithmetic: element by element over the sliced shape.
std::vector<uint8_t> referenceSlice(const std::vector<uint8_t> &bytes, size_t elementBytes,
                                    const std::vector<int64_t> &shape, const ShardSlice &s) {
  std::vector<int64_t> out = slicedShape(shape, s);
  int64_t count = 1;
  for (int64_t d : out)
    count *= d;
  std::vector<uint8_t> result;
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t e = 0; e < count; ++e) {
    int64_t rem = e, flat = 0;
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      index[d] = rem % out[d];
      rem /= out[d];
    }
    for (size_t d = 0; d < shape.size(); ++d)
      flat = flat * shape[d] + index[d] + (static_cast<int64_t>(d) == s.dim ? s.offset : 0);
    const uint8_t *p = bytes.data() + flat * elementBytes;
    result.insert(result.end(), p, p + elementBytes);
  }
  return result;
}

TEST(ShardedTensors, SliceMatchesIndexArithmeticForRandomShapesAndChunks) {
  std::mt19937_64 rng(std::random_device{}());
  const schema::DType dtypes[] = {schema::DType::F32, schema::DType::BF16, schema::DType::F16};
  const size_t widths[] = {4, 2, 2};
  for (int trial = 0; trial < 300; ++trial) {
    const int which = static_cast<int>(rng() % 3);
    const int rank = 1 + static_cast<int>(rng() % 3);
    std::vector<int64_t> shape;
    uint64_t elements = 1;
    for (int d = 0; d < rank; ++d) {
      shape.push_back(1 + static_cast<int64_t>(rng() % 9));
      elements *= static_cast<uint64_t>(shape.back());
    }
    ShardSlice s;
    s.dim = static_cast<int64_t>(rng() % rank);
    s.offset = static_cast<int64_t>(rng() % shape[s.dim]);
    s.size = 1 + static_cast<int64_t>(rng() % (shape[s.dim] - s.offset));
    std::vector<uint8_t> source(elements * widths[which]);
    for (uint8_t &b : source)
      b = static_cast<uint8_t>(rng());
    StatusOr<TensorProducer> producer =
        sliceProducer(chunkedSource(source, rng()), dtypes[which], shape, s);
    ASSERT_TRUE(producer.ok()) << producer.status().message();
    std::vector<uint8_t> got;
    Status status = (*producer)([&](const void *data, uint64_t size) {
      const uint8_t *p = static_cast<const uint8_t *>(data);
      got.insert(got.end(), p, p + size);
      return okStatus();
    });
    ASSERT_TRUE(status.ok()) << status.message();
    EXPECT_EQ(got, referenceSlice(source, widths[which], shape, s))
        << "trial " << trial << " dim " << s.dim << " offset " << s.offset << " size " << s.size;
  }
}

TEST(ShardedTensors, SinkErrorsStopTheSlice) {
  std::vector<uint8_t> source(64, 1);
  StatusOr<TensorProducer> producer =
      sliceProducer(chunkedSource(source, 7), schema::DType::F32, {4, 4}, {1, 1, 2});
  ASSERT_TRUE(producer.ok());
  Status status = (*producer)([](const void *, uint64_t) { return ioError("disk full"); });
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.message(), "disk full");
}

TEST(ShardedTensors, RejectsSlicesOutsideTheSourceAndPackedTypes) {
  std::vector<uint8_t> source(64, 0);
  auto message = [&](schema::DType dtype, std::vector<int64_t> shape, ShardSlice s) {
    StatusOr<TensorProducer> p = sliceProducer(chunkedSource(source, 1), dtype, shape, s);
    EXPECT_FALSE(p.ok());
    return p.ok() ? std::string() : p.status().message();
  };
  EXPECT_EQ(message(schema::DType::F32, {4, 4}, {2, 0, 1}),
            "shard dim 2 is out of range for a 2-d tensor");
  EXPECT_EQ(message(schema::DType::F32, {4, 4}, {0, 3, 2}),
            "shard [3, 5) does not fit the source's 4 along dim 0");
  EXPECT_EQ(message(schema::DType::F32, {4, 4}, {1, 0, 0}),
            "shard [0, 0) does not fit the source's 4 along dim 1");
  EXPECT_EQ(message(schema::DType::U4, {4, 4}, {1, 1, 2}),
            "shard [1, 3) along dim 1 cuts a byte of packed 4-bit elements");
  EXPECT_EQ(message(schema::DType::F4E2M1FN, {4, 6}, {1, 2, 3}),
            "shard [2, 5) along dim 1 cuts a byte of packed 4-bit elements");
  EXPECT_EQ(message(schema::DType::U4, {3, 5}, {0, 0, 1}),
            "shard [0, 1) along dim 0 cuts a byte of packed 4-bit elements");
}

/// Nibble `i` of packed 4-bit data (element 2j in the low nibble of byte j).
int nibble(const std::vector<uint8_t> &bytes, int64_t i) {
  return (bytes[i / 2] >> (4 * (i % 2))) & 0xF;
}

TEST(ShardedTensors, PackedFourBitSlicesMatchNibbleArithmetic) {
  std::mt19937_64 rng(0x5eed4b17);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t rows = 1 + rng() % 9, cols = 2 * (1 + rng() % 12);
    std::vector<uint8_t> bytes(rows * cols / 2);
    for (uint8_t &b : bytes)
      b = static_cast<uint8_t>(rng());
    const int64_t dim = rng() % 2;
    const int64_t extent = dim == 0 ? rows : cols, step = dim == 0 ? 1 : 2;
    const int64_t offset = step * (rng() % (extent / step));
    const int64_t size = step * (1 + rng() % ((extent - offset) / step));
    const ShardSlice s{dim, offset, size};
    const schema::DType dtype = trial % 2 ? schema::DType::U4 : schema::DType::F4E2M1FN;
    StatusOr<TensorProducer> p = sliceProducer(chunkedSource(bytes, trial), dtype, {rows, cols}, s);
    ASSERT_TRUE(p.ok()) << p.status().message();
    std::vector<uint8_t> got;
    ASSERT_TRUE((*p)([&got](const void *data, uint64_t n) {
                  const uint8_t *d = static_cast<const uint8_t *>(data);
                  got.insert(got.end(), d, d + n);
                  return okStatus();
                }).ok());
    const int64_t outRows = dim == 0 ? size : rows, outCols = dim == 0 ? cols : size;
    ASSERT_EQ(static_cast<int64_t>(got.size()), outRows * outCols / 2);
    for (int64_t r = 0; r < outRows; ++r)
      for (int64_t c = 0; c < outCols; ++c) {
        const int64_t sr = r + (dim == 0 ? offset : 0), sc = c + (dim == 1 ? offset : 0);
        ASSERT_EQ(nibble(got, r * outCols + c), nibble(bytes, sr * cols + sc))
            << rows << "x" << cols << " dim " << dim << " [" << offset << ", +" << size
            << ") at " << r << "," << c;
      }
  }
}

} // namespace
} // namespace ingot::compiler
