//===- PackedInt4LinearTest.cpp - GPTQ / AWQ layers unpacked bit for bit ---===//
#include "compiler/import/hf/PackedInt4Linear.h"

#include <cmath>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "compiler/import/hf/HfCheckpoint.h"

namespace ingot::importer::hf {
namespace {

/// f16 bits -> float, written independently of the importer's decoder (by ldexp).
float halfValue(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  const float sign = (h & 0x8000) ? -1.0f : 1.0f;
  if (exponent == 0)
    return sign * std::ldexp(static_cast<float>(mantissa), -24);
  if (exponent == 31)
    return mantissa ? NAN : sign * INFINITY;
  return sign * std::ldexp(static_cast<float>(1024 + mantissa), exponent - 25);
}

uint32_t bitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

/// A random int4 layer: codes, zeros, finite f16 scales and a group per input.
struct RandomLayer {
  int64_t n, k, group;
  std::vector<uint8_t> q;     // [n, k]
  std::vector<uint8_t> zero;  // [n, groups]
  std::vector<uint16_t> scale; // [n, groups]
  std::vector<int32_t> groupOf; // [k]
  int64_t groups() const { return k / group; }
};

RandomLayer randomLayer(std::mt19937 &rng, int64_t n, int64_t k, int64_t group, bool shuffle) {
  RandomLayer l{n, k, group, {}, {}, {}, {}};
  std::uniform_int_distribution<int> nib(0, 15), exp(1, 30), man(0, 1023), sign(0, 1);
  for (int64_t i = 0; i < n * k; ++i)
    l.q.push_back(static_cast<uint8_t>(nib(rng)));
  for (int64_t i = 0; i < n * l.groups(); ++i) {
    l.zero.push_back(static_cast<uint8_t>(nib(rng)));
    l.scale.push_back(static_cast<uint16_t>((sign(rng) << 15) | (exp(rng) << 10) | man(rng)));
  }
  for (int64_t kk = 0; kk < k; ++kk)
    l.groupOf.push_back(static_cast<int32_t>(kk / group));
  if (shuffle)
    std::shuffle(l.groupOf.begin(), l.groupOf.end(), rng);
  return l;
}

/// Sets bits 4*slot.. of word `w` to `v` (the layouts' packing, written from their docs).
void put(std::vector<int32_t> &words, size_t w, int slot, uint8_t v) {
  uint32_t u = static_cast<uint32_t>(words[w]);
  u |= uint32_t(v & 0xF) << (4 * slot);
  words[w] = static_cast<int32_t>(u);
}

void expectUnpacked(const RandomLayer &l, const UnpackedInt4 &u) {
  ASSERT_EQ(u.q, l.q);
  ASSERT_EQ(u.zero, l.zero);
  ASSERT_EQ(u.scale, l.scale);
  ASSERT_EQ(u.groupOf, l.groupOf);
  std::vector<float> w(static_cast<size_t>(l.n * l.k), NAN);
  dequantizeInt4(u, w.data());
  for (int64_t r = 0; r < l.n; ++r)
    for (int64_t c = 0; c < l.k; ++c) {
      size_t g = static_cast<size_t>(r * l.groups() + l.groupOf[static_cast<size_t>(c)]);
      double exact = static_cast<double>(halfValue(l.scale[g])) *
                     (int(l.q[static_cast<size_t>(r * l.k + c)]) - int(l.zero[g]));
      ASSERT_EQ(static_cast<double>(w[static_cast<size_t>(r * l.k + c)]), exact)
          << "row " << r << " input " << c;
    }
}

TEST(PackedInt4Linear, GptqUnpacksRandomLayersExactly) {
  std::random_device device;
  const unsigned seed = device();
  std::mt19937 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (bool v1 : {true, false})
    for (bool shuffle : {false, true})
      for (auto [n, k, group] : {std::tuple<int64_t, int64_t, int64_t>{16, 64, 32},
                                 {24, 128, 64}, {8, 256, 128}, {40, 32, 32}, {16, 48, 48}}) {
        RandomLayer l = randomLayer(rng, n, k, group, shuffle);
        std::vector<int32_t> qweight(static_cast<size_t>(k / 8 * n), 0);
        std::vector<int32_t> qzeros(static_cast<size_t>(l.groups() * n / 8), 0);
        std::vector<uint16_t> scales(static_cast<size_t>(l.groups() * n));
        for (int64_t r = 0; r < n; ++r)
          for (int64_t c = 0; c < k; ++c) // input c: word row c / 8, slot c % 8, column r
            put(qweight, static_cast<size_t>((c / 8) * n + r), static_cast<int>(c % 8),
                l.q[static_cast<size_t>(r * k + c)]);
        for (int64_t r = 0; r < n; ++r)
          for (int64_t g = 0; g < l.groups(); ++g) {
            uint8_t z = l.zero[static_cast<size_t>(r * l.groups() + g)];
            put(qzeros, static_cast<size_t>(g * (n / 8) + r / 8), static_cast<int>(r % 8),
                v1 ? static_cast<uint8_t>((z + 15) & 0xF) : z);
            scales[static_cast<size_t>(g * n + r)] =
                l.scale[static_cast<size_t>(r * l.groups() + g)];
          }
        UnpackedInt4 u;
        u.q.assign(3, 0xEE); // poison: the unpacker must size and fill everything
        ASSERT_TRUE(unpackGptq(qweight.data(), qzeros.data(), scales.data(), l.groupOf.data(), n,
                               k, group, v1, u)
                        .ok());
        expectUnpacked(l, u);
        EXPECT_EQ(hasContiguousGroups(u, group), !shuffle || l.groups() == 1);
      }
}

TEST(PackedInt4Linear, GptqRefusesAGroupIndexOutsideTheGroups) {
  std::vector<int32_t> qweight(8 * 16, 0), qzeros(2 * 2, 0), gIdx(64, 0);
  std::vector<uint16_t> scales(2 * 16, 0x3c00);
  gIdx[17] = 2; // only groups 0 and 1 exist for K = 64, group 32
  UnpackedInt4 u;
  Status status = unpackGptq(qweight.data(), qzeros.data(), scales.data(), gIdx.data(), 16, 64,
                             32, true, u);
  EXPECT_NE(status.message().find("g_idx[17] = 2 is not a group in [0, 2)"), std::string::npos)
      << status.message();
}

TEST(PackedInt4Linear, AwqUnpacksRandomLayersExactly) {
  std::random_device device;
  const unsigned seed = device();
  std::mt19937 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  // AutoAWQ packs outputs 0, 2, 4, 6, 1, 3, 5, 7 of each 8 into nibbles 0..7.
  const int outputOfNibble[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  int nibbleOfOutput[8];
  for (int i = 0; i < 8; ++i)
    nibbleOfOutput[outputOfNibble[i]] = i;
  for (auto [n, k, group] : {std::tuple<int64_t, int64_t, int64_t>{16, 64, 32},
                             {64, 128, 128}, {24, 64, 64}}) {
    RandomLayer l = randomLayer(rng, n, k, group, false);
    std::vector<int32_t> qweight(static_cast<size_t>(k * n / 8), 0);
    std::vector<int32_t> qzeros(static_cast<size_t>(l.groups() * n / 8), 0);
    std::vector<uint16_t> scales(static_cast<size_t>(l.groups() * n));
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t c = 0; c < k; ++c)
        put(qweight, static_cast<size_t>(c * (n / 8) + r / 8), nibbleOfOutput[r % 8],
            l.q[static_cast<size_t>(r * k + c)]);
      for (int64_t g = 0; g < l.groups(); ++g) {
        put(qzeros, static_cast<size_t>(g * (n / 8) + r / 8), nibbleOfOutput[r % 8],
            l.zero[static_cast<size_t>(r * l.groups() + g)]);
        scales[static_cast<size_t>(g * n + r)] = l.scale[static_cast<size_t>(r * l.groups() + g)];
      }
    }
    UnpackedInt4 u;
    unpackAwq(qweight.data(), qzeros.data(), scales.data(), n, k, group, u);
    expectUnpacked(l, u);
  }
}

TEST(PackedInt4Linear, Int4ZeroPartsHoldCodesScalesAndIntegerZeros) {
  std::random_device device;
  const unsigned seed = device();
  std::mt19937 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  RandomLayer l = randomLayer(rng, 16, 96, 32, false);
  for (int z = 0; z < 16; ++z) // every zero point appears
    l.zero[static_cast<size_t>(z)] = static_cast<uint8_t>(z);
  UnpackedInt4 u{l.n, l.k, l.groups(), l.q, l.zero, l.scale, l.groupOf};
  Int4ZeroParts parts;
  parts.weight.assign(7, 0xEE);
  ASSERT_TRUE(toInt4ZeroParts(u, l.group, parts).ok());
  ASSERT_EQ(parts.weight.size(), static_cast<size_t>(l.n * l.k / 2));
  ASSERT_EQ(parts.scale.size(), static_cast<size_t>(2 * l.n * l.groups()));
  ASSERT_EQ(parts.zero.size(), parts.scale.size());
  for (int64_t i = 0; i < l.n * l.k; ++i) // element 2i in the low nibble
    ASSERT_EQ((parts.weight[static_cast<size_t>(i / 2)] >> (4 * (i % 2))) & 0xF,
              l.q[static_cast<size_t>(i)]);
  for (int64_t i = 0; i < l.n * l.groups(); ++i) {
    uint16_t s = uint16_t(parts.scale[2 * i] | (parts.scale[2 * i + 1] << 8));
    uint16_t z = uint16_t(parts.zero[2 * i] | (parts.zero[2 * i + 1] << 8));
    ASSERT_EQ(s, l.scale[static_cast<size_t>(i)]);
    ASSERT_EQ(halfValue(z), static_cast<float>(l.zero[static_cast<size_t>(i)])) << "zero " << i;
  }
  std::shuffle(u.groupOf.begin(), u.groupOf.end(), rng);
  Status refused = toInt4ZeroParts(u, l.group, parts);
  EXPECT_NE(refused.message().find("not contiguous runs of 32 inputs"), std::string::npos)
      << refused.message();
}

/// The script's tiny checkpoints: each packed layer dequantizes to the script's f32
/// reference bit for bit, and its int4 parts decode to the same values.
void checkTinyCheckpoint(const std::string &name, bool actOrder) {
  const std::string dir = std::string(INGOT_TINY_DATA_DIR) + "/" + name;
  StatusOr<HfCheckpoint> packed = readHfCheckpoint(dir);
  ASSERT_TRUE(packed.ok()) << packed.status().message();
  StatusOr<HfCheckpoint> reference = readHfCheckpoint(dir + "/dequantized");
  ASSERT_TRUE(reference.ok()) << reference.status().message();
  ASSERT_TRUE(packed->packed);
  ASSERT_EQ(packed->packedLinears.size(), 2u);
  EXPECT_EQ(packed->packedConfig.descAct, actOrder);
  for (const PackedLinear &layer : packed->packedLinears) {
    SCOPED_TRACE(layer.name);
    const HfTensorRef *ref = nullptr;
    for (const HfTensorRef &r : reference->tensors)
      if (r.tensor->name == layer.name)
        ref = &r;
    ASSERT_NE(ref, nullptr);
    ASSERT_EQ(ref->tensor->dtype, SafetensorsDtype::F32);
    std::vector<float> expected(static_cast<size_t>(layer.n * layer.k));
    ref->shard->toFloat(*ref->tensor, expected.data());

    UnpackedInt4 u;
    ASSERT_TRUE(unpackPackedLinear(layer, u).ok());
    std::vector<float> w(expected.size(), NAN);
    dequantizeInt4(u, w.data());
    for (size_t i = 0; i < w.size(); ++i)
      ASSERT_EQ(bitsOf(w[i]), bitsOf(expected[i])) << "element " << i;

    Int4ZeroParts parts;
    Status status = toInt4ZeroParts(u, layer.groupSize(), parts);
    ASSERT_EQ(status.ok(), !actOrder) << status.message();
    if (actOrder)
      continue;
    const int64_t groups = layer.k / layer.groupSize();
    for (int64_t i = 0; i < layer.n * layer.k; ++i) {
      const int64_t g = (i / layer.k) * groups + (i % layer.k) / layer.groupSize();
      const uint8_t byte = parts.weight[static_cast<size_t>(i / 2)];
      const float q = static_cast<float>((byte >> (4 * (i % 2))) & 0xF);
      const float s = halfValue(uint16_t(parts.scale[2 * g] | (parts.scale[2 * g + 1] << 8)));
      const float z = halfValue(uint16_t(parts.zero[2 * g] | (parts.zero[2 * g + 1] << 8)));
      ASSERT_EQ(bitsOf(s * (q - z)), bitsOf(expected[static_cast<size_t>(i)])) << "element " << i;
    }
  }
}

TEST(PackedInt4Linear, TinyGptqMatchesTheScriptsDequantizationBitForBit) {
  checkTinyCheckpoint("gptq", false);
}
TEST(PackedInt4Linear, TinyAwqWithOneGroupOverKMatchesTheScriptsDequantizationBitForBit) {
  checkTinyCheckpoint("awq", false);
}
TEST(PackedInt4Linear, TinyGptqActOrderDequantizesExactlyButHasNoContiguousGroups) {
  checkTinyCheckpoint("gptq-act-order", true);
}

TEST(PackedInt4Linear, TinyGptqV1StoresAZeroOfZeroAsFifteen) {
  StatusOr<HfCheckpoint> packed = readHfCheckpoint(std::string(INGOT_TINY_DATA_DIR) + "/gptq");
  ASSERT_TRUE(packed.ok()) << packed.status().message();
  const PackedLinear &layer = packed->packedLinears.front();
  ASSERT_EQ(layer.name, "model.layers.0.mlp.down_proj.weight");
  int32_t word;
  std::memcpy(&word, layer.qzeros.shard->bytes(*layer.qzeros.tensor), 4);
  EXPECT_EQ(word & 0xF, 0xF); // row 0, group 0: zero 0 stored as 0 - 1
  UnpackedInt4 u;
  ASSERT_TRUE(unpackPackedLinear(layer, u).ok());
  EXPECT_EQ(u.zero[0], 0);
}

std::string configError(const std::string &quantizationConfig) {
  bool present = false;
  PackedQuantConfig config;
  Status status = parsePackedQuantConfig(
      R"({"model_type": "llama", "quantization_config": )" + quantizationConfig + "}",
      "config.json", present, config);
  return status.ok() ? "" : status.message();
}

TEST(PackedInt4Linear, ParsesGptqAndAwqConfigs) {
  bool present = true;
  PackedQuantConfig c;
  ASSERT_TRUE(parsePackedQuantConfig(R"({"model_type": "llama"})", "config.json", present, c).ok());
  EXPECT_FALSE(present);
  ASSERT_TRUE(parsePackedQuantConfig(
                  R"({"quantization_config": {"quant_method": "gptq", "bits": 4,
                      "group_size": 128, "desc_act": true}})",
                  "config.json", present, c)
                  .ok());
  EXPECT_TRUE(present);
  EXPECT_EQ(c.format, PackedFormat::Gptq);
  EXPECT_EQ(c.groupSize, 128);
  EXPECT_TRUE(c.zerosMinusOne); // checkpoint_format defaults to v1 "gptq"
  EXPECT_TRUE(c.descAct);
  ASSERT_TRUE(parsePackedQuantConfig(
                  R"({"quantization_config": {"quant_method": "gptq", "bits": 4,
                      "group_size": -1, "checkpoint_format": "gptq_v2"}})",
                  "config.json", present, c)
                  .ok());
  EXPECT_FALSE(c.zerosMinusOne);
  EXPECT_EQ(c.groupSize, -1);
  ASSERT_TRUE(parsePackedQuantConfig(
                  R"({"quantization_config": {"quant_method": "awq", "w_bit": 4,
                      "q_group_size": 64, "version": "GEMM"}})",
                  "config.json", present, c)
                  .ok());
  EXPECT_EQ(c.format, PackedFormat::Awq);
  EXPECT_EQ(c.groupSize, 64);
  EXPECT_FALSE(c.zerosMinusOne);
}

TEST(PackedInt4Linear, RefusesWhatItCannotImportExactly) {
  EXPECT_NE(configError(R"({"quant_method": "gptq", "bits": 8, "group_size": 128})")
                .find("GPTQ with bits 8 is not supported"),
            std::string::npos);
  EXPECT_NE(configError(R"({"quant_method": "awq", "bits": 4, "version": "gemv"})")
                .find("AWQ version 'gemv' is not supported"),
            std::string::npos);
  EXPECT_NE(configError(R"({"quant_method": "gptq", "bits": 4, "checkpoint_format": "marlin"})")
                .find("checkpoint_format 'marlin' is not supported"),
            std::string::npos);
  EXPECT_NE(configError(R"({"quant_method": "bitsandbytes", "load_in_4bit": true})")
                .find("quant_method 'bitsandbytes' is not supported"),
            std::string::npos);
  EXPECT_NE(configError(R"({"quant_method": "gptq", "bits": 4, "group_size": 12})")
                .find("group_size 12 is not -1 or a positive multiple of 8"),
            std::string::npos);
  EXPECT_NE(configError(R"({"quant_method": "awq", "bits": 4, "zero_point": false})")
                .find("zero_point false"),
            std::string::npos);
}

TEST(PackedInt4Linear, ValidationNamesTheTensorAndTheExpectedShape) {
  SafetensorsTensor qweight{"m.qweight", SafetensorsDtype::I32, {8, 16}, 0, 512};
  SafetensorsTensor qzeros{"m.qzeros", SafetensorsDtype::I32, {2, 2}, 0, 16};
  SafetensorsTensor scales{"m.scales", SafetensorsDtype::BF16, {2, 16}, 0, 64};
  PackedLinear layer;
  layer.name = "m.weight";
  layer.n = 16, layer.k = 64;
  layer.config.groupSize = 32;
  layer.qweight.tensor = &qweight;
  layer.qzeros.tensor = &qzeros;
  std::string missing = validatePackedLinear(layer).message();
  EXPECT_NE(missing.find("GPTQ layer 'm.weight': tensor 'm.scales' is missing"), std::string::npos)
      << missing;
  layer.scales.tensor = &scales;
  std::string dtype = validatePackedLinear(layer).message();
  EXPECT_NE(dtype.find("tensor 'm.scales' has dtype BF16, expected F16"), std::string::npos)
      << dtype;
  scales.dtype = SafetensorsDtype::F16;
  EXPECT_TRUE(validatePackedLinear(layer).ok());
  layer.config.format = PackedFormat::Awq; // [K, N/8] expected now
  std::string shape = validatePackedLinear(layer).message();
  EXPECT_NE(shape.find("tensor 'm.qweight' has shape [8, 16], expected [64, 2]"),
            std::string::npos)
      << shape;
}

} // namespace
} // namespace ingot::importer::hf
