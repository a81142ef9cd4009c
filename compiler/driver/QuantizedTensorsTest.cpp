//===- QuantizedTensorsTest.cpp - weights quantized at write time, from real GGUF files -===//
#include "compiler/driver/QuantizedTensors.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "compiler/import/GgufImporter.h"

namespace ingot::compiler {
namespace {

using quant::WeightEncoding;

/// Runs a producer and returns the bytes it streams.
std::vector<uint8_t> produce(const StatusOr<TensorProducer> &producer) {
  EXPECT_TRUE(producer.ok()) << producer.status().message();
  std::vector<uint8_t> bytes;
  if (!producer.ok())
    return bytes;
  Status status = (*producer)([&](const void *data, uint64_t size) {
    const uint8_t *p = static_cast<const uint8_t *>(data);
    bytes.insert(bytes.end(), p, p + size);
    return okStatus();
  });
  EXPECT_TRUE(status.ok()) << status.message();
  return bytes;
}

uint32_t bitsOf(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}

/// Quantizes every Q4 tensor of `path` to int4/32 through QuantizedTensors (the path
/// `ingot compile --quant int4` takes) and checks the decoded artifact tensors against the
/// importer's f32 values (ggml's dequantization, Q/K rows un-permuted) bit for bit.
void expectExactInt4Import(const std::string &path, size_t minTensors) {
  StatusOr<importer::ImportedModel> model = importer::importGguf(path, {});
  ASSERT_TRUE(model.ok()) << model.status().message();
  QuantizedTensors quantized(*model);
  size_t checked = 0;
  for (uint64_t handle = 0; handle < model->tensors.size(); ++handle) {
    const importer::ImportedTensor &t = model->tensors[handle];
    if (t.sourceQuant == importer::SourceQuant::None)
      continue;
    WeightEncoding encoding = t.sourceQuant == importer::SourceQuant::GgufQ4_1
                                  ? WeightEncoding::Int4Min
                                  : WeightEncoding::Int4Zero;
    const int64_t n = t.shape[0], k = t.shape[1];
    ASSERT_TRUE(QuantizedTensors::isExact(t, encoding, 32)) << t.name;
    auto weight = quantized.producer(handle, encoding, 32, EncodedPart::Weight,
                                     schema::DType::U4, {n, k});
    auto scale = quantized.producer(handle, encoding, 32, EncodedPart::Scale,
                                    schema::DType::F16, {n, k / 32});
    auto offset = quantized.producer(handle, encoding, 32, EncodedPart::Offset,
                                     schema::DType::F16, {n, k / 32});
    quant::EncodedWeight e;
    e.weight = produce(weight);
    e.scale = produce(scale);
    e.offset = produce(offset);
    std::vector<float> decoded(static_cast<size_t>(n * k), NAN), expected;
    ASSERT_TRUE(quant::decodeWeight(e, n, k, encoding, 32, decoded.data()).ok()) << t.name;
    ASSERT_TRUE(t.readF32(expected).ok()) << t.name;
    ASSERT_EQ(expected.size(), decoded.size());
    for (size_t i = 0; i < decoded.size(); ++i)
      ASSERT_EQ(bitsOf(decoded[i]), bitsOf(expected[i])) << t.name << " element " << i;
    ++checked;
  }
  EXPECT_GE(checked, minTensors);
  EXPECT_EQ(quantized.numExact(), checked);
}

TEST(QuantizedTensorsTest, TinyQ4GgufInt4DecodesExactlyAsGgml) {
  expectExactInt4Import(std::string(INGOT_GGUF_TEST_DATA_DIR) + "/tiny_q4.gguf", 14);
}

TEST(QuantizedTensorsTest, SmolLM2Int4DecodesExactlyAsGgml) {
  const char *path = std::getenv("INGOT_SMOLLM2_GGUF");
  if (!path || !*path)
    GTEST_SKIP() << "set INGOT_SMOLLM2_GGUF to SmolLM2-135M-Instruct.Q4_1.gguf to run this test";
  expectExactInt4Import(path, 210);
}

TEST(QuantizedTensorsTest, EncodesOtherSourcesFromFloatsInAnyPartOrder) {
  StatusOr<importer::ImportedModel> model =
      importer::importGguf(std::string(INGOT_GGUF_TEST_DATA_DIR) + "/tiny_q4.gguf", {});
  ASSERT_TRUE(model.ok()) << model.status().message();
  int32_t down = model->find("model.layers.1.mlp.down_proj.weight"); // Q8_0: not exact
  ASSERT_GE(down, 0);
  const importer::ImportedTensor &t = model->tensors[down];
  ASSERT_EQ(t.sourceQuant, importer::SourceQuant::None);
  QuantizedTensors quantized(*model);
  const int64_t n = t.shape[0], k = t.shape[1];
  auto global = quantized.producer(down, WeightEncoding::Nvfp4, 0, EncodedPart::GlobalScale,
                                   schema::DType::F32, {1});
  auto scale = quantized.producer(down, WeightEncoding::Nvfp4, 0, EncodedPart::Scale,
                                  schema::DType::F8E4M3FN, {n, k / 16});
  auto weight = quantized.producer(down, WeightEncoding::Nvfp4, 0, EncodedPart::Weight,
                                   schema::DType::F4E2M1FN, {n, k});
  quant::EncodedWeight e;
  e.scale = produce(scale); // written out of order: the entry lives until its last part
  e.weight = produce(weight);
  e.globalScale = produce(global);
  EXPECT_EQ(quantized.numExact(), 0u);
  std::vector<float> decoded(static_cast<size_t>(n * k)), values;
  ASSERT_TRUE(quant::decodeWeight(e, n, k, WeightEncoding::Nvfp4, 0, decoded.data()).ok());
  ASSERT_TRUE(t.readF32(values).ok());
  float absmax = 0, worst = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    absmax = std::max(absmax, std::fabs(values[i]));
    worst = std::max(worst, std::fabs(values[i] - decoded[i]));
  }
  EXPECT_GT(absmax, 0.0f);
  EXPECT_LT(worst, absmax / 6.0f); // at most one E2M1 step of the largest block scale
}

/// `--calib` hands per-channel importance to QuantizedTensors: a weight that has it is
/// encoded with activation-weighted block scales (exactly encodeWeight with MinError and
/// those column weights), a weight without it as before; a length mismatch is an error.
// Tensor-parallel users: each rank's parts get an encoding of their own (identical bytes,
// so every rank's slices cut the same whole part), interleaving users is fine, and exact
// copies are counted once per source weight.
TEST(QuantizedTensorsTest, EachUserGetsTheSameWholePartAndExactWeightsCountOnce) {
  StatusOr<importer::ImportedModel> model =
      importer::importGguf(std::string(INGOT_GGUF_TEST_DATA_DIR) + "/tiny_q4.gguf", {});
  ASSERT_TRUE(model.ok()) << model.status().message();
  const int32_t down = model->find("model.layers.1.mlp.down_proj.weight"); // from floats
  const int32_t q = model->find("model.layers.0.self_attn.q_proj.weight");  // Q4: exact
  ASSERT_GE(down, 0);
  ASSERT_GE(q, 0);
  const int64_t n = model->tensors[down].shape[0], k = model->tensors[down].shape[1];
  QuantizedTensors quantized(*model);
  std::vector<StatusOr<TensorProducer>> weights, scales;
  for (int32_t user : {0, 1, -1}) {
    weights.push_back(quantized.producer(down, WeightEncoding::Nvfp4, 0, EncodedPart::Weight,
                                         schema::DType::F4E2M1FN, {n, k}, user));
    scales.push_back(quantized.producer(down, WeightEncoding::Nvfp4, 0, EncodedPart::Scale,
                                        schema::DType::F8E4M3FN, {n, k / 16}, user));
  }
  auto global = quantized.producer(down, WeightEncoding::Nvfp4, 0, EncodedPart::GlobalScale,
                                   schema::DType::F32, {1}, -1);
  const std::vector<int64_t> qShape = model->tensors[q].shape;
  for (int32_t user : {0, 1})
    ASSERT_TRUE(quantized
                    .producer(q, WeightEncoding::Int4Min, 32, EncodedPart::Weight,
                              schema::DType::U4, qShape, user)
                    .ok());
  EXPECT_EQ(quantized.numExact(), 1u);
  // Rank 1's weight before rank 0's scale: both entries alive at once, then dropped.
  const std::vector<uint8_t> w1 = produce(weights[1]), w0 = produce(weights[0]);
  const std::vector<uint8_t> s0 = produce(scales[0]), s1 = produce(scales[1]);
  const std::vector<uint8_t> g = produce(global), s = produce(scales[2]), w = produce(weights[2]);
  ASSERT_EQ(w0.size(), static_cast<size_t>(n * k / 2));
  EXPECT_EQ(w0, w1);
  EXPECT_EQ(w0, w);
  EXPECT_EQ(s0, s1);
  EXPECT_EQ(s0, s);
  EXPECT_EQ(g.size(), 4u);
}

TEST(QuantizedTensorsTest, ColumnImportanceSelectsWeightedBlockScales) {
  StatusOr<importer::ImportedModel> model =
      importer::importGguf(std::string(INGOT_GGUF_TEST_DATA_DIR) + "/tiny_q4.gguf", {});
  ASSERT_TRUE(model.ok()) << model.status().message();
  const std::string name = "model.layers.1.mlp.down_proj.weight";
  const int32_t down = model->find(name);
  ASSERT_GE(down, 0);
  const importer::ImportedTensor &t = model->tensors[down];
  const int64_t n = t.shape[0], k = t.shape[1];
  std::vector<float> values;
  ASSERT_TRUE(t.readF32(values).ok());
  std::vector<float> importance(static_cast<size_t>(k), 1.0f);
  for (int64_t c = 0; c < k; c += 7)
    importance[c] = 300.0f;
  std::map<std::string, std::vector<float>> byName{{name, importance}};
  auto scalesOf = [&](QuantizedTensors &quantized) {
    return produce(quantized.producer(down, WeightEncoding::Nvfp4, 0, EncodedPart::Scale,
                                      schema::DType::F8E4M3FN, {n, k / 16}));
  };
  QuantizedTensors weighted(*model, quant::ScaleChoice::Absmax, &byName), plain(*model);
  StatusOr<quant::EncodedWeight> expected =
      quant::encodeWeight(values.data(), n, k, WeightEncoding::Nvfp4, 0,
                          quant::ScaleChoice::MinError, importance.data());
  StatusOr<quant::EncodedWeight> absmax =
      quant::encodeWeight(values.data(), n, k, WeightEncoding::Nvfp4, 0);
  ASSERT_TRUE(expected.ok() && absmax.ok());
  ASSERT_NE(expected->scale, absmax->scale) << "the weights should change some block scale";
  EXPECT_EQ(scalesOf(weighted), expected->scale);
  EXPECT_EQ(scalesOf(plain), absmax->scale);

  std::map<std::string, std::vector<float>> wrong{{name, std::vector<float>(3, 1.0f)}};
  QuantizedTensors mismatched(*model, quant::ScaleChoice::Absmax, &wrong);
  auto producer = mismatched.producer(down, WeightEncoding::Nvfp4, 0, EncodedPart::Scale,
                                      schema::DType::F8E4M3FN, {n, k / 16});
  ASSERT_TRUE(producer.ok());
  Status status = (*producer)([](const void *, uint64_t) { return okStatus(); });
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find(name), std::string::npos) << status.message();
}

TEST(QuantizedTensorsTest, RejectsPartsOfTheWrongTypeOrShape) {
  StatusOr<importer::ImportedModel> model =
      importer::importGguf(std::string(INGOT_GGUF_TEST_DATA_DIR) + "/tiny_q4.gguf", {});
  ASSERT_TRUE(model.ok()) << model.status().message();
  QuantizedTensors quantized(*model);
  int32_t q = model->find("model.layers.0.self_attn.q_proj.weight"); // [64, 64]
  int32_t norm = model->find("model.norm.weight");
  EXPECT_FALSE(quantized.producer(q, WeightEncoding::Int4Min, 32, EncodedPart::Weight,
                                  schema::DType::I4, {64, 64}).ok());
  EXPECT_FALSE(quantized.producer(q, WeightEncoding::Int4Min, 32, EncodedPart::Scale,
                                  schema::DType::F16, {64, 1}).ok());
  EXPECT_FALSE(quantized.producer(q, WeightEncoding::Mxfp4, 32, EncodedPart::Offset,
                                  schema::DType::F16, {64, 2}).ok());
  EXPECT_FALSE(quantized.producer(q, WeightEncoding::Int4Min, 48, EncodedPart::Weight,
                                  schema::DType::U4, {64, 64}).ok());
  EXPECT_FALSE(quantized.producer(norm, WeightEncoding::Fp8PerChannel, 0, EncodedPart::Weight,
                                  schema::DType::F8E4M3FN, {64}).ok());
  EXPECT_FALSE(quantized.producer(9999, WeightEncoding::Fp8PerChannel, 0, EncodedPart::Weight,
                                  schema::DType::F8E4M3FN, {64, 64}).ok());
  EXPECT_TRUE(quantized.producer(q, WeightEncoding::Int4Min, 64, EncodedPart::Scale,
                                 schema::DType::F16, {64, 1}).ok());
}

} // namespace
} // namespace ingot::compiler
