//===- WeightEncodersTest.cpp - quantized weight encoders and the exact Q4 import -===//
#include "compiler/quant/WeightEncoders.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "compiler/import/WeightConversion.h"
#include "compiler/import/gguf/Dequantize.h"
#include "compiler/import/gguf/GgufFile.h"
#include "compiler/quant/FloatFormats.h"

namespace ingot::quant {
namespace {

/// [n, k] weights with rows of different magnitudes, like trained linears.
std::vector<float> randomWeights(int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> rowScale(0.01f, 0.5f);
  std::vector<float> w(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r) {
    float s = rowScale(rng);
    for (int64_t c = 0; c < k; ++c)
      w[r * k + c] = normal(rng) * s;
  }
  return w;
}

std::vector<float> decode(const EncodedWeight &e, int64_t n, int64_t k, WeightEncoding encoding,
                          int64_t group = 32) {
  std::vector<float> out(static_cast<size_t>(n * k), NAN); // poisoned
  Status status = decodeWeight(e, n, k, encoding, group, out.data());
  EXPECT_TRUE(status.ok()) << status.message();
  return out;
}

uint32_t bitsOf(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}

float f16At(const std::vector<uint8_t> &bytes, int64_t i) {
  uint16_t h;
  std::memcpy(&h, bytes.data() + 2 * i, 2);
  return gguf::halfToFloat(h);
}

TEST(WeightEncodersTest, Int4MinErrorIsWithinHalfAStepPerGroup) {
  const int64_t n = 6, k = 384;
  std::vector<float> w = randomWeights(n, k, 11);
  for (int64_t group : {32, 64, 128}) {
    StatusOr<EncodedWeight> e = encodeWeight(w.data(), n, k, WeightEncoding::Int4Min, group);
    ASSERT_TRUE(e.ok()) << e.status().message();
    EXPECT_EQ(e->weight.size(), static_cast<size_t>(n * k / 2));
    EXPECT_EQ(e->scale.size(), static_cast<size_t>(n * k / group * 2));
    EXPECT_EQ(e->offset.size(), e->scale.size());
    std::vector<float> back = decode(*e, n, k, WeightEncoding::Int4Min, group);
    for (int64_t g = 0; g < n * k / group; ++g) {
      auto [lo, hi] = std::minmax_element(w.begin() + g * group, w.begin() + (g + 1) * group);
      float scale = f16At(e->scale, g), min = f16At(e->offset, g);
      EXPECT_NEAR(min, *lo, std::fabs(*lo) * 0x1p-11f);
      EXPECT_NEAR(scale, (*hi - *lo) / 15, (*hi - *lo) / 15 * 0x1p-11f);
      // Half a step, plus what rounding scale and min to f16 can add at the ends.
      float bound = 0.5f * scale + std::fabs(*lo) * 0x1p-11f + (*hi - *lo) * 0x1p-11f + 1e-7f;
      for (int64_t i = g * group; i < (g + 1) * group; ++i)
        ASSERT_LE(std::fabs(back[i] - w[i]), bound) << "group " << group << " element " << i;
    }
  }
}

TEST(WeightEncodersTest, Int4ZeroErrorIsWithinOneStepPerGroup) {
  const int64_t n = 4, k = 128;
  std::vector<float> w = randomWeights(n, k, 12);
  StatusOr<EncodedWeight> e = encodeWeight(w.data(), n, k, WeightEncoding::Int4Zero, 32);
  ASSERT_TRUE(e.ok()) << e.status().message();
  std::vector<float> back = decode(*e, n, k, WeightEncoding::Int4Zero);
  for (int64_t g = 0; g < n * k / 32; ++g) {
    EXPECT_EQ(f16At(e->offset, g), 8.0f);
    float step = std::fabs(f16At(e->scale, g));
    for (int64_t i = g * 32; i < (g + 1) * 32; ++i) // q - 8 spans [-8, 7]: one end clamps
      ASSERT_LE(std::fabs(back[i] - w[i]), step * 1.001f) << i;
  }
}

TEST(WeightEncodersTest, Fp8PerChannelKeepsThreeMantissaBits) {
  const int64_t n = 8, k = 96;
  std::vector<float> w = randomWeights(n, k, 13);
  w[5] = 0.0f;
  StatusOr<EncodedWeight> e = encodeWeight(w.data(), n, k, WeightEncoding::Fp8PerChannel, 0);
  ASSERT_TRUE(e.ok()) << e.status().message();
  ASSERT_EQ(e->scale.size(), static_cast<size_t>(n * 4));
  std::vector<float> back = decode(*e, n, k, WeightEncoding::Fp8PerChannel);
  for (int64_t r = 0; r < n; ++r) {
    float absmax = 0;
    for (int64_t c = 0; c < k; ++c)
      absmax = std::max(absmax, std::fabs(w[r * k + c]));
    float scale;
    std::memcpy(&scale, e->scale.data() + 4 * r, 4);
    EXPECT_EQ(scale, absmax / 448.0f);
    for (int64_t c = 0; c < k; ++c) {
      float x = w[r * k + c];
      // Relative half-ulp of 3 mantissa bits, or half the smallest subnormal step.
      float bound = std::max(std::fabs(x) * 0x1p-4f, scale * 0x1p-10f) * 1.0001f;
      ASSERT_LE(std::fabs(back[r * k + c] - x), bound) << r << "," << c;
      if (std::fabs(x) == absmax) // the largest element lands on 448 exactly
        EXPECT_EQ(e->weight[r * k + c] & 0x7F, 0x7E);
    }
  }
  EXPECT_EQ(back[5], 0.0f);
}

TEST(WeightEncodersTest, Nvfp4ScalesBlocksOf16UnderOneGlobalScale) {
  const int64_t n = 4, k = 64;
  std::vector<float> w = randomWeights(n, k, 14);
  StatusOr<EncodedWeight> e = encodeWeight(w.data(), n, k, WeightEncoding::Nvfp4, 0);
  ASSERT_TRUE(e.ok()) << e.status().message();
  ASSERT_EQ(e->weight.size(), static_cast<size_t>(n * k / 2));
  ASSERT_EQ(e->scale.size(), static_cast<size_t>(n * k / 16));
  ASSERT_EQ(e->globalScale.size(), 4u);
  float absmax = 0;
  for (float x : w)
    absmax = std::max(absmax, std::fabs(x));
  float global;
  std::memcpy(&global, e->globalScale.data(), 4);
  EXPECT_EQ(global, absmax / (448.0f * 6.0f));
  std::vector<float> back = decode(*e, n, k, WeightEncoding::Nvfp4);
  bool sawMaxScale = false;
  for (int64_t b = 0; b < n * k / 16; ++b) {
    float blockMax = 0;
    for (int64_t i = b * 16; i < (b + 1) * 16; ++i)
      blockMax = std::max(blockMax, std::fabs(w[i]));
    float s = e4m3ToFloat(e->scale[b]);
    EXPECT_EQ(e->scale[b], floatToE4M3(blockMax / (6.0f * global)));
    sawMaxScale |= s == 448.0f; // the block holding the tensor's absmax
    // E2M1 steps are at most 2 units of s*g (between 4 and 6); s itself is rounded to
    // 3 mantissa bits, which can push the block maximum past 6 (saturated).
    float bound = s * global * 1.0f + blockMax * 0x1p-4f + 1e-7f;
    for (int64_t i = b * 16; i < (b + 1) * 16; ++i)
      ASSERT_LE(std::fabs(back[i] - w[i]), bound) << i;
  }
  EXPECT_TRUE(sawMaxScale);
}

TEST(WeightEncodersTest, Mxfp4UsesPowerOfTwoScalesFromTheBlockMaximum) {
  const int64_t n = 3, k = 128;
  std::vector<float> w = randomWeights(n, k, 15);
  std::fill(w.begin() + 32, w.begin() + 64, 0.0f); // an all-zero block
  StatusOr<EncodedWeight> e = encodeWeight(w.data(), n, k, WeightEncoding::Mxfp4, 0);
  ASSERT_TRUE(e.ok()) << e.status().message();
  ASSERT_EQ(e->scale.size(), static_cast<size_t>(n * k / 32));
  std::vector<float> back = decode(*e, n, k, WeightEncoding::Mxfp4);
  for (int64_t b = 0; b < n * k / 32; ++b) {
    float blockMax = 0;
    for (int64_t i = b * 32; i < (b + 1) * 32; ++i)
      blockMax = std::max(blockMax, std::fabs(w[i]));
    if (blockMax == 0) {
      EXPECT_EQ(e->scale[b], 0); // 2^-127
      continue;
    }
    int exponent = floorLog2(blockMax) - 2;
    EXPECT_EQ(e->scale[b], exponent + 127);
    // blockMax / 2^e lies in [4, 8): steps are 2^(e+1) at most, the top saturates at 6.
    float bound = std::ldexp(2.0f, exponent);
    for (int64_t i = b * 32; i < (b + 1) * 32; ++i)
      ASSERT_LE(std::fabs(back[i] - w[i]), bound) << i;
  }
  for (int64_t i = 32; i < 64; ++i)
    EXPECT_EQ(back[i], 0.0f);
}

/// Sum of squared errors of each block of `block` elements.
std::vector<double> blockErrors(const std::vector<float> &w, const std::vector<float> &back,
                                int64_t block) {
  std::vector<double> errors(w.size() / block, 0.0);
  for (size_t i = 0; i < w.size(); ++i)
    errors[i / block] += (double(w[i]) - back[i]) * (double(w[i]) - back[i]);
  return errors;
}

TEST(WeightEncodersTest, MinErrorScalesNeverLoseToAbsmaxPerBlock) {
  const int64_t n = 16, k = 256;
  std::vector<float> w = randomWeights(n, k, 16);
  for (auto [encoding, block] : {std::pair{WeightEncoding::Nvfp4, int64_t{16}},
                                 std::pair{WeightEncoding::Mxfp4, int64_t{32}}}) {
    auto absmax = encodeWeight(w.data(), n, k, encoding, 0, ScaleChoice::Absmax);
    auto search = encodeWeight(w.data(), n, k, encoding, 0, ScaleChoice::MinError);
    ASSERT_TRUE(absmax.ok() && search.ok());
    EXPECT_EQ(search->globalScale, absmax->globalScale); // only block scales move
    std::vector<double> a = blockErrors(w, decode(*absmax, n, k, encoding), block);
    std::vector<double> m = blockErrors(w, decode(*search, n, k, encoding), block);
    double totalA = 0, totalM = 0;
    int moved = 0;
    for (size_t b = 0; b < a.size(); ++b) {
      ASSERT_LE(m[b], a[b] * (1 + 1e-6)) << "block " << b;
      totalA += a[b];
      totalM += m[b];
      moved += search->scale[b] != absmax->scale[b];
    }
    EXPECT_GT(moved, 0);
    EXPECT_LT(totalM, totalA);
  }
}

TEST(WeightEncodersTest, PacksElementTwoIInTheLowNibble) {
  // One MXFP4 block whose maximum 6 gives e = 0: the codes are the E2M1 values themselves.
  std::vector<float> w(32, 0.0f);
  w[0] = 0.5f; // code 1
  w[1] = 6.0f; // code 7
  w[2] = -1.0f; // code 0xA
  w[31] = 3.0f; // code 5 (high nibble of the last byte)
  StatusOr<EncodedWeight> e = encodeWeight(w.data(), 1, 32, WeightEncoding::Mxfp4, 0);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->scale[0], 127);
  EXPECT_EQ(e->weight[0], 0x71);
  EXPECT_EQ(e->weight[1], 0x0A);
  EXPECT_EQ(e->weight[15], 0x50);
}

TEST(WeightEncodersTest, RejectsShapesTheBlocksDoNotTile) {
  std::vector<float> w(48 * 2, 0.1f);
  EXPECT_FALSE(encodeWeight(w.data(), 2, 48, WeightEncoding::Int4Min, 32).ok());
  EXPECT_FALSE(encodeWeight(w.data(), 2, 48, WeightEncoding::Int4Min, 48).ok()); // group
  EXPECT_FALSE(encodeWeight(w.data(), 2, 48, WeightEncoding::Mxfp4, 0).ok());
  EXPECT_TRUE(encodeWeight(w.data(), 2, 48, WeightEncoding::Nvfp4, 0).ok());
  EXPECT_TRUE(encodeWeight(w.data(), 2, 48, WeightEncoding::Fp8PerChannel, 0).ok());
  w[3] = NAN;
  EXPECT_FALSE(encodeWeight(w.data(), 2, 48, WeightEncoding::Fp8PerChannel, 0).ok());
}

/// Random but well-formed Q4_1 (or Q4_0) blocks: sane f16 scales, any nibbles.
std::vector<uint8_t> randomQ4Blocks(int64_t numBlocks, bool hasMin, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> scale(1e-4f, 0.05f), min(-0.5f, 0.0f);
  const int64_t blockBytes = hasMin ? 20 : 18;
  std::vector<uint8_t> blocks(static_cast<size_t>(numBlocks * blockBytes));
  for (int64_t b = 0; b < numBlocks; ++b) {
    uint8_t *block = blocks.data() + b * blockBytes;
    uint16_t d = importer::floatToF16(scale(rng)), m = importer::floatToF16(min(rng));
    std::memcpy(block, &d, 2);
    if (hasMin)
      std::memcpy(block + 2, &m, 2);
    for (int i = 0; i < 16; ++i)
      block[blockBytes - 16 + i] = static_cast<uint8_t>(rng());
  }
  return blocks;
}

TEST(WeightEncodersTest, Q4RepackDecodesBitForBitAsGgmlDequantizes) {
  const int64_t n = 5, k = 96;
  for (bool hasMin : {true, false}) {
    std::vector<uint8_t> blocks = randomQ4Blocks(n * k / 32, hasMin, hasMin ? 21 : 22);
    StatusOr<EncodedWeight> e = repackGgmlQ4(blocks.data(), n, k, hasMin);
    ASSERT_TRUE(e.ok()) << e.status().message();
    WeightEncoding encoding = hasMin ? WeightEncoding::Int4Min : WeightEncoding::Int4Zero;
    std::vector<float> back = decode(*e, n, k, encoding);
    std::vector<float> ggml(static_cast<size_t>(n * k), NAN);
    gguf::GgmlType type = hasMin ? gguf::GgmlType::Q4_1 : gguf::GgmlType::Q4_0;
    ASSERT_TRUE(gguf::dequantizeRows(type, blocks.data(), n * k, ggml.data()).ok());
    for (int64_t i = 0; i < n * k; ++i)
      ASSERT_EQ(bitsOf(back[i]), bitsOf(ggml[i])) << (hasMin ? "Q4_1" : "Q4_0") << " " << i;
    // The f16 scale (and min) bits are the block's own.
    const int64_t blockBytes = hasMin ? 20 : 18;
    for (int64_t b = 0; b < n * k / 32; ++b) {
      EXPECT_EQ(std::memcmp(e->scale.data() + 2 * b, blocks.data() + b * blockBytes, 2), 0);
      if (hasMin)
        EXPECT_EQ(std::memcmp(e->offset.data() + 2 * b, blocks.data() + b * blockBytes + 2, 2), 0);
      else
        EXPECT_EQ(f16At(e->offset, b), 8.0f);
    }
  }
}

TEST(WeightEncodersTest, Q4RepackMovesNibblesFromGgmlOrder) {
  // ggml: element j is the low nibble of qs[j], element j + 16 its high nibble.
  std::vector<uint8_t> block(20, 0);
  for (int j = 0; j < 16; ++j)
    block[4 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  StatusOr<EncodedWeight> e = repackGgmlQ4(block.data(), 1, 32, true);
  ASSERT_TRUE(e.ok());
  for (int i = 0; i < 32; ++i) {
    int expected = i < 16 ? i : 15 - (i - 16);
    EXPECT_EQ((e->weight[i / 2] >> (4 * (i % 2))) & 0xF, expected) << i;
  }
}

/// Re-packs every Q4_0 / Q4_1 tensor of a GGUF file and checks that decoding it gives
/// exactly the reference dequantizer's values.
void expectQ4TensorsRepackExactly(const std::string &path, int minTensors) {
  StatusOr<gguf::GgufFile> file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  int checked = 0;
  for (const gguf::GgufTensorInfo &t : file->tensors()) {
    if (t.type != gguf::GgmlType::Q4_0 && t.type != gguf::GgmlType::Q4_1)
      continue;
    bool hasMin = t.type == gguf::GgmlType::Q4_1;
    int64_t n = t.shape()[0], k = t.shape()[1];
    StatusOr<EncodedWeight> e = repackGgmlQ4(file->tensorData(t), n, k, hasMin);
    ASSERT_TRUE(e.ok()) << t.name << ": " << e.status().message();
    std::vector<float> back =
        decode(*e, n, k, hasMin ? WeightEncoding::Int4Min : WeightEncoding::Int4Zero);
    std::vector<float> ggml(t.numElements, NAN);
    ASSERT_TRUE(file->dequantizeTensor(t, ggml.data()).ok());
    for (size_t i = 0; i < ggml.size(); ++i)
      ASSERT_EQ(bitsOf(back[i]), bitsOf(ggml[i])) << t.name << " element " << i;
    ++checked;
  }
  EXPECT_GE(checked, minTensors);
}

TEST(WeightEncodersTest, TinyQ4GgufRepacksExactly) {
  expectQ4TensorsRepackExactly(std::string(INGOT_GGUF_TEST_DATA_DIR) + "/tiny_q4.gguf", 14);
}

TEST(WeightEncodersTest, SmolLM2Q4_1RepacksExactly) {
  const char *path = std::getenv("INGOT_SMOLLM2_GGUF");
  if (!path || !*path)
    GTEST_SKIP() << "set INGOT_SMOLLM2_GGUF to SmolLM2-135M-Instruct.Q4_1.gguf to run this test";
  expectQ4TensorsRepackExactly(path, 210);
}

} // namespace
} // namespace ingot::quant
