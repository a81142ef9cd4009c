//===- WeightConversionTest.cpp - RoPE row order and dtype conversion -----===//
#include "compiler/import/WeightConversion.h"

#include <cmath>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

namespace ingot::importer {
namespace {

/// llama.cpp's converter permutation, written from its definition: view the rows of each
/// head as [2, headDim/2] and transpose to [headDim/2, 2].
std::vector<float> permuteLikeLlamaCpp(const std::vector<float> &hf, int64_t rows,
                                       int64_t cols, int32_t heads) {
  int64_t headDim = rows / heads, half = headDim / 2;
  std::vector<float> out(hf.size());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t i = 0; i < half; ++i)
        for (int64_t c = 0; c < cols; ++c)
          out[((h * headDim) + 2 * i + j) * cols + c] = hf[((h * headDim) + j * half + i) * cols + c];
  return out;
}

TEST(WeightConversionTest, UnpermuteUndoesLlamaCppRopePermutation) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (auto [heads, headDim, cols] : {std::tuple{9, 64, 5}, std::tuple{3, 8, 7}, std::tuple{1, 2, 1}}) {
    int64_t rows = int64_t(heads) * headDim;
    std::vector<float> hf(rows * cols);
    for (float &v : hf)
      v = dist(rng);
    std::vector<float> stored = permuteLikeLlamaCpp(hf, rows, cols, heads);
    ASSERT_TRUE(unpermuteRopeRows(stored, {rows, cols}, heads).ok());
    EXPECT_EQ(stored, hf) << heads << " heads of " << headDim;
  }
}

TEST(WeightConversionTest, UnpermutesRowsOfAnyByteWidthLikeFloatRows) {
  // Rows of quantized blocks (here 20-byte Q4_1 blocks) move exactly as float rows do.
  const int32_t heads = 3;
  const int64_t rows = 12, rowBytes = 40;
  std::vector<float> rowIds(rows);
  std::vector<uint8_t> bytes(rows * rowBytes);
  for (int64_t r = 0; r < rows; ++r) {
    rowIds[r] = static_cast<float>(r);
    for (int64_t b = 0; b < rowBytes; ++b)
      bytes[r * rowBytes + b] = static_cast<uint8_t>(r * 16 + b % 16);
  }
  ASSERT_TRUE(unpermuteRopeRows(rowIds, {rows, 1}, heads).ok());
  ASSERT_TRUE(unpermuteRopeRowBytes(bytes.data(), rows, rowBytes, heads).ok());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < rowBytes; ++b)
      ASSERT_EQ(bytes[r * rowBytes + b], static_cast<uint8_t>(rowIds[r] * 16 + b % 16)) << r;
  EXPECT_FALSE(unpermuteRopeRowBytes(bytes.data(), 10, rowBytes, 3).ok());
}

TEST(WeightConversionTest, UnpermuteRejectsShapesThatCannotBePermuted) {
  std::vector<float> v(30);
  EXPECT_FALSE(unpermuteRopeRows(v, {10, 3}, 3).ok()); // 10 rows do not split into 3 heads
  EXPECT_FALSE(unpermuteRopeRows(v, {30}, 1).ok());    // not a matrix
  EXPECT_FALSE(unpermuteRopeRows(v, {15, 2}, 5).ok()); // odd head dim
}

float bf16ToFloat(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

TEST(WeightConversionTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3F80);
  // 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties go to even (1.0).
  EXPECT_EQ(floatToBf16(1.0f + 0x1.0p-8f), 0x3F80);
  EXPECT_EQ(floatToBf16(1.0f + 0x1.8p-8f), 0x3F81);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(NAN))));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-100, 100);
  for (int i = 0; i < 10000; ++i) {
    float x = dist(rng);
    float y = bf16ToFloat(floatToBf16(x));
    EXPECT_LE(std::fabs(x - y), std::fabs(x) * 0x1.0p-8f) << x;
  }
}

TEST(WeightConversionTest, F16MatchesKnownEncodings) {
  EXPECT_EQ(floatToF16(0.0f), 0x0000);
  EXPECT_EQ(floatToF16(-0.0f), 0x8000);
  EXPECT_EQ(floatToF16(1.0f), 0x3C00);
  EXPECT_EQ(floatToF16(-2.0f), 0xC000);
  EXPECT_EQ(floatToF16(65504.0f), 0x7BFF);
  EXPECT_EQ(floatToF16(1e6f), 0x7C00);              // overflow -> infinity
  EXPECT_EQ(floatToF16(0x1.0p-24f), 0x0001);        // smallest subnormal
  EXPECT_EQ(floatToF16(0x1.0p-25f), 0x0000);        // ties to even: zero
  EXPECT_EQ(floatToF16(0x1.8p-24f), 0x0002);        // 1.5 ulp -> 2 (even)
  EXPECT_EQ(floatToF16(1.0f + 0x1.0p-11f), 0x3C00); // halfway: ties to even
  EXPECT_EQ(floatToF16(1.0f + 0x1.8p-11f), 0x3C01);
  EXPECT_EQ(floatToF16(NAN) & 0x7C00, 0x7C00);
}

TEST(WeightConversionTest, StreamsConvertedBytesInOrder) {
  std::vector<float> values(200000);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<float>(i % 1000) / 8.0f; // exact in bf16 and f16
  for (schema::DType dtype : {schema::DType::F32, schema::DType::BF16, schema::DType::F16}) {
    std::vector<uint8_t> out;
    Status s = writeConverted(values, dtype, [&](const void *data, uint64_t n) {
      const auto *p = static_cast<const uint8_t *>(data);
      out.insert(out.end(), p, p + n);
      return okStatus();
    });
    ASSERT_TRUE(s.ok()) << s.message();
    size_t width = dtype == schema::DType::F32 ? 4 : 2;
    ASSERT_EQ(out.size(), values.size() * width);
    uint16_t h;
    std::memcpy(&h, out.data() + 2 * 1001 / 2 * 2, 2);
    if (dtype == schema::DType::BF16) {
      std::memcpy(&h, out.data() + 2 * 1001, 2);
      EXPECT_EQ(bf16ToFloat(h), values[1001]);
    }
  }
  EXPECT_FALSE(writeConverted(values, schema::DType::I4, [](const void *, uint64_t) {
                 return okStatus();
               }).ok());
}

TEST(WeightConversionTest, FusedRowsSplitIntoPartsReadingTheSourceOnce) {
  // A [6, 4] fused tensor (Phi-3's qkv: 2 + 2 + 2 rows) whose values are their index, and
  // blocks of 3 bytes per row.
  ImportedTensor fused;
  fused.name = "model.layers.0.self_attn.qkv_proj.weight";
  fused.shape = {6, 4};
  fused.dtype = schema::DType::F32;
  int valueReads = 0, blockReads = 0;
  fused.readF32 = [&](std::vector<float> &v) {
    ++valueReads;
    v.resize(24);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
    return okStatus();
  };
  fused.readBlocks = [&](std::vector<uint8_t> &b) {
    ++blockReads;
    b.resize(18);
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i);
    return okStatus();
  };
  StatusOr<std::vector<ImportedTensor>> parts =
      splitFusedRows(fused, {{"q", 2}, {"k", 2}, {"v", 2}});
  ASSERT_TRUE(parts.ok()) << parts.status().message();
  ASSERT_EQ(parts->size(), 3u);
  for (int round = 0; round < 2; ++round)
    for (size_t p = 0; p < 3; ++p) {
      std::vector<float> v;
      std::vector<uint8_t> b;
      ASSERT_TRUE((*parts)[p].readF32(v).ok());
      ASSERT_TRUE((*parts)[p].readBlocks(b).ok());
      EXPECT_EQ((*parts)[p].shape, (std::vector<int64_t>{2, 4}));
      ASSERT_EQ(v.size(), 8u);
      ASSERT_EQ(b.size(), 6u);
      EXPECT_EQ(v.front(), static_cast<float>(8 * p));
      EXPECT_EQ(b.front(), static_cast<uint8_t>(6 * p));
    }
  EXPECT_EQ(valueReads, 2) << "once per pass over the three parts";
  EXPECT_EQ(blockReads, 2);
  EXPECT_FALSE(splitFusedRows(fused, {{"q", 2}, {"k", 2}}).ok()) << "rows must add up";
}

} // namespace
} // namespace ingot::importer
