//===- DequantizeTest.cpp - ggml block formats to f32 ------------------------===//
#include "compiler/import/gguf/Dequantize.h"

#include <cmath>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "compiler/import/gguf/GgufFile.h"
#include "compiler/import/gguf/GgufTestFile.h"

namespace ingot::gguf {
namespace {

using namespace ingot::gguf::testing;

uint32_t bitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

constexpr float kPoison = 1234567.0f;

// gguf-py's dequantization of every tensor of the reference file (scripts/
// make_gguf_test_data.py) computes in f32 like ggml; ours must match bit for bit,
// NaN payloads, signed zeros and subnormals included.
TEST(DequantizeTest, MatchesGgufPyBitForBit) {
  StatusOr<GgufFile> file = GgufFile::open(testDataPath(kAllTypesFile));
  ASSERT_TRUE(file.ok()) << file.status().message();
  std::vector<uint8_t> expectedBytes = readFileBytes(testDataPath(kAllTypesExpected));
  uint64_t total = 0;
  for (const GgufTensorInfo &t : file->tensors())
    total += t.numElements;
  ASSERT_EQ(expectedBytes.size(), total * sizeof(float));
  std::vector<float> expected(total);
  std::memcpy(expected.data(), expectedBytes.data(), expectedBytes.size());

  uint64_t at = 0;
  for (const GgufTensorInfo &t : file->tensors()) {
    std::vector<float> out(t.numElements, kPoison);
    ASSERT_TRUE(file->dequantizeTensor(t, out.data()).ok()) << t.name;
    uint64_t mismatches = 0;
    for (uint64_t i = 0; i < t.numElements; ++i) {
      if (bitsOf(out[i]) != bitsOf(expected[at + i]) && mismatches++ < 5)
        ADD_FAILURE() << t.name << " (" << ggmlTypeName(t.type) << ") element " << i << ": got "
                      << out[i] << ", expected " << expected[at + i];
    }
    EXPECT_EQ(mismatches, 0u) << t.name;
    at += t.numElements;
  }
}

// Independent definition: (-1)^s * 2^(e-15) * (1 + m/1024), subnormals 2^-14 * m/1024.
TEST(DequantizeTest, HalfToFloatIsExactForEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint32_t sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    float got = halfToFloat(static_cast<uint16_t>(h));
    if (e == 31) {
      if (m == 0) {
        EXPECT_TRUE(std::isinf(got)) << h;
      } else {
        ASSERT_TRUE(std::isnan(got)) << h;
        EXPECT_EQ(bitsOf(got) & 0x7FFFFF, m << 13) << "NaN payload of " << h;
      }
      EXPECT_EQ(std::signbit(got), sign == 1) << h;
      continue;
    }
    double magnitude = e == 0 ? std::ldexp(m / 1024.0, -14) : std::ldexp(1.0 + m / 1024.0, e - 15);
    float want = static_cast<float>(sign ? -magnitude : magnitude);
    EXPECT_EQ(bitsOf(got), bitsOf(want)) << "half bits " << h;
  }
}

TEST(DequantizeTest, BFloat16IsTheUpperHalfOfF32) {
  std::mt19937 rng(7);
  for (int i = 0; i < 1000; ++i) {
    uint16_t b = static_cast<uint16_t>(rng());
    EXPECT_EQ(bitsOf(bfloat16ToFloat(b)), static_cast<uint32_t>(b) << 16);
  }
}

// Random blocks with finite f16 scales; other bytes arbitrary.
std::vector<uint8_t> randomBlocks(GgmlType type, uint32_t numBlocks, std::mt19937 &rng) {
  const uint32_t blockBytes = ggmlBlockBytes(type);
  std::vector<uint8_t> bytes(size_t{numBlocks} * blockBytes);
  for (uint8_t &b : bytes)
    b = static_cast<uint8_t>(rng());
  std::uniform_int_distribution<int> exponent(5, 20); // f16 exponent field: finite, moderate
  auto putHalf = [&](uint8_t *p) {
    uint16_t h = static_cast<uint16_t>((rng() & 0x8000) | (exponent(rng) << 10) | (rng() & 0x3FF));
    p[0] = static_cast<uint8_t>(h);
    p[1] = static_cast<uint8_t>(h >> 8);
  };
  for (uint32_t k = 0; k < numBlocks; ++k) {
    uint8_t *block = bytes.data() + size_t{k} * blockBytes;
    switch (type) {
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: putHalf(block); putHalf(block + 2); break;
    case GgmlType::Q6_K: putHalf(block + blockBytes - 2); break;
    default: putHalf(block); break;
    }
  }
  return bytes;
}

float half(const uint8_t *p) { return halfToFloat(static_cast<uint16_t>(p[0] | (p[1] << 8))); }

// The 6-bit scale and min of sub-block j of a Q4_K / Q5_K super-block, bit by bit from
// the packing described in ggml-common.h.
void scaleMinOf(const uint8_t *packed, int j, int *scale, int *min) {
  auto bits = [&](int byte, int lo, int count) { return (packed[byte] >> lo) & ((1 << count) - 1); };
  if (j < 4) {
    *scale = bits(j, 0, 6);
    *min = bits(j + 4, 0, 6);
  } else {
    *scale = bits(j + 4, 0, 4) | (bits(j - 4, 6, 2) << 4);
    *min = bits(j + 4, 4, 4) | (bits(j, 6, 2) << 4);
  }
}

// Element i of a block, written per element from the format definition (the library
// loops per block); same f32 operations in the same order as ggml.
float referenceElement(GgmlType type, const uint8_t *block, int i) {
  auto nibble = [](const uint8_t *qs, int k) { return k < 16 ? qs[k] & 15 : qs[k - 16] >> 4; };
  switch (type) {
  case GgmlType::Q8_0: return static_cast<float>(static_cast<int8_t>(block[2 + i])) * half(block);
  case GgmlType::Q4_0: return static_cast<float>(nibble(block + 2, i) - 8) * half(block);
  case GgmlType::Q4_1: return static_cast<float>(nibble(block + 4, i)) * half(block) + half(block + 2);
  case GgmlType::Q5_0:
  case GgmlType::Q5_1: {
    const bool withMin = type == GgmlType::Q5_1;
    const uint8_t *high = block + (withMin ? 4 : 2);
    const int q = nibble(high + 4, i) + 16 * ((high[i / 8] >> (i % 8)) & 1);
    if (withMin) return static_cast<float>(q) * half(block) + half(block + 2);
    return static_cast<float>(q - 16) * half(block);
  }
  case GgmlType::Q4_K:
  case GgmlType::Q5_K: {
    const int sub = i / 32, chunk = i / 64, l = i % 32;
    int sc, m;
    scaleMinOf(block + 4, sub, &sc, &m);
    const uint8_t *qs = block + 16 + (type == GgmlType::Q5_K ? 32 : 0);
    int q = (qs[32 * chunk + l] >> (4 * (sub % 2))) & 15;
    if (type == GgmlType::Q5_K)
      q += ((block[16 + l] >> sub) & 1) * 16;
    return (half(block) * static_cast<float>(sc)) * static_cast<float>(q) -
           half(block + 2) * static_cast<float>(m);
  }
  case GgmlType::Q6_K: {
    const int h = i / 128, j = i % 128, k = j / 32, l = j % 32;
    const uint8_t *ql = block + 64 * h, *qh = block + 128 + 32 * h;
    const int low = (ql[l + 32 * (k & 1)] >> (4 * (k >> 1))) & 15;
    const int high = (qh[l] >> (2 * k)) & 3;
    const auto scale = static_cast<int8_t>(block[192 + i / 16]);
    return half(block + 208) * static_cast<float>(scale) * static_cast<float>((low | (high << 4)) - 32);
  }
  default: return NAN;
  }
}

TEST(DequantizeTest, RandomBlocksMatchPerElementDefinition) {
  std::mt19937 rng(1234);
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
                        GgmlType::Q5_1, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    const uint32_t numBlocks = 37, blockSize = ggmlBlockSize(type);
    std::vector<uint8_t> src = randomBlocks(type, numBlocks, rng);
    std::vector<float> out(size_t{numBlocks} * blockSize + 1, kPoison);
    ASSERT_TRUE(dequantizeRows(type, src.data(), size_t{numBlocks} * blockSize, out.data()).ok());
    EXPECT_EQ(out.back(), kPoison) << ggmlTypeName(type) << " wrote past the end";
    for (uint32_t k = 0; k < numBlocks; ++k)
      for (uint32_t i = 0; i < blockSize; ++i) {
        float want = referenceElement(type, src.data() + size_t{k} * ggmlBlockBytes(type), i);
        ASSERT_EQ(bitsOf(out[size_t{k} * blockSize + i]), bitsOf(want))
            << ggmlTypeName(type) << " block " << k << " element " << i;
      }
  }
}

TEST(DequantizeTest, DecodedQ4AndQ8BlocksReproduceDequantization) {
  std::mt19937 rng(99);
  const uint32_t numBlocks = 16;
  std::vector<float> out(numBlocks * 32);
  std::vector<uint8_t> q4_1 = randomBlocks(GgmlType::Q4_1, numBlocks, rng);
  ASSERT_TRUE(dequantizeRows(GgmlType::Q4_1, q4_1.data(), out.size(), out.data()).ok());
  for (uint32_t k = 0; k < numBlocks; ++k) {
    float scale = 0, min = 0;
    uint8_t q[32];
    decodeQ4_1Block(q4_1.data() + k * kQ4_1BlockBytes, &scale, &min, q);
    for (int i = 0; i < 32; ++i) {
      ASSERT_LE(q[i], 15);
      ASSERT_EQ(bitsOf(static_cast<float>(q[i]) * scale + min), bitsOf(out[k * 32 + i]));
    }
  }
  std::vector<uint8_t> q4_0 = randomBlocks(GgmlType::Q4_0, numBlocks, rng);
  ASSERT_TRUE(dequantizeRows(GgmlType::Q4_0, q4_0.data(), out.size(), out.data()).ok());
  for (uint32_t k = 0; k < numBlocks; ++k) {
    float scale = 0;
    uint8_t q[32];
    decodeQ4_0Block(q4_0.data() + k * kQ4_0BlockBytes, &scale, q);
    for (int i = 0; i < 32; ++i)
      ASSERT_EQ(bitsOf(static_cast<float>(q[i] - 8) * scale), bitsOf(out[k * 32 + i]));
  }
  std::vector<uint8_t> q8_0 = randomBlocks(GgmlType::Q8_0, numBlocks, rng);
  ASSERT_TRUE(dequantizeRows(GgmlType::Q8_0, q8_0.data(), out.size(), out.data()).ok());
  for (uint32_t k = 0; k < numBlocks; ++k) {
    float scale = 0;
    int8_t q[32];
    decodeQ8_0Block(q8_0.data() + k * kQ8_0BlockBytes, &scale, q);
    for (int i = 0; i < 32; ++i)
      ASSERT_EQ(bitsOf(static_cast<float>(q[i]) * scale), bitsOf(out[k * 32 + i]));
  }
}

TEST(DequantizeTest, RejectsUnsupportedTypesAndPartialBlocks) {
  uint8_t src[64] = {};
  float dst[64];
  Status unsupported = dequantizeRows(GgmlType::Q3_K, src, 256, dst);
  EXPECT_EQ(unsupported.code(), StatusCode::kUnimplemented);
  EXPECT_NE(unsupported.message().find("Q3_K"), std::string::npos) << unsupported.message();
  Status partial = dequantizeRows(GgmlType::Q4_0, src, 33, dst);
  EXPECT_EQ(partial.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(partial.message().find("Q4_0 blocks of 32"), std::string::npos) << partial.message();
}

TEST(DequantizeTest, AcceptsZeroElementsWithoutTouchingPointers) {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q4_1, GgmlType::Q6_K})
    EXPECT_TRUE(dequantizeRows(t, nullptr, 0, nullptr).ok()) << ggmlTypeName(t);
}

TEST(DequantizeTest, BytesForElementsFollowsBlockLayouts) {
  EXPECT_EQ(*bytesForElements(GgmlType::F32, 10), 40u);
  EXPECT_EQ(*bytesForElements(GgmlType::BF16, 10), 20u);
  EXPECT_EQ(*bytesForElements(GgmlType::Q8_0, 64), 68u);
  EXPECT_EQ(*bytesForElements(GgmlType::Q4_0, 64), 36u);
  EXPECT_EQ(*bytesForElements(GgmlType::Q4_1, 32), 20u);
  EXPECT_EQ(*bytesForElements(GgmlType::Q5_0, 64), 44u);
  EXPECT_EQ(*bytesForElements(GgmlType::Q5_1, 32), 24u);
  EXPECT_EQ(*bytesForElements(GgmlType::Q4_K, 512), 288u);
  EXPECT_EQ(*bytesForElements(GgmlType::Q5_K, 256), 176u);
  EXPECT_EQ(*bytesForElements(GgmlType::Q6_K, 256), 210u);
  EXPECT_EQ(*bytesForElements(GgmlType::Q2_K, 256), 84u);
  EXPECT_FALSE(bytesForElements(GgmlType::Q4_K, 100).ok());
  EXPECT_FALSE(bytesForElements(GgmlType::F32, uint64_t{1} << 63).ok()); // 2^65 bytes
  EXPECT_FALSE(bytesForElements(static_cast<GgmlType>(4), 32).ok());
}

TEST(DequantizeTest, NamesAndKnowsTypes) {
  EXPECT_STREQ(ggmlTypeName(GgmlType::Q4_1), "Q4_1");
  EXPECT_STREQ(ggmlTypeName(GgmlType::BF16), "BF16");
  EXPECT_STREQ(ggmlTypeName(static_cast<GgmlType>(1000)), "unknown");
  EXPECT_TRUE(isKnownGgmlType(30));
  EXPECT_FALSE(isKnownGgmlType(4));
  EXPECT_FALSE(isKnownGgmlType(31));
  EXPECT_FALSE(isKnownGgmlType(1000));
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
                     GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q4_K,
                     GgmlType::Q5_K, GgmlType::Q6_K})
    EXPECT_TRUE(canDequantize(t)) << ggmlTypeName(t);
  EXPECT_FALSE(canDequantize(GgmlType::Q3_K));
  EXPECT_FALSE(canDequantize(GgmlType::I32));
}

} // namespace
} // namespace ingot::gguf
