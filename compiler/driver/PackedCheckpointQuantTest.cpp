//===- PackedCheckpointQuantTest.cpp - GPTQ / AWQ layers written as int4, exactly -===//
#include "compiler/driver/QuantizedTensors.h"

#include <cmath>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "compiler/import/HfImporter.h"

namespace ingot::compiler {
namespace {

using quant::WeightEncoding;

std::vector<uint8_t> produce(const StatusOr<TensorProducer> &producer, Status &status) {
  std::vector<uint8_t> bytes;
  if (!producer.ok()) {
    status = producer.status();
    return bytes;
  }
  status = (*producer)([&](const void *data, uint64_t size) {
    const uint8_t *p = static_cast<const uint8_t *>(data);
    bytes.insert(bytes.end(), p, p + size);
    return okStatus();
  });
  return bytes;
}

uint32_t bitsOf(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}

/// Every GPTQ / AWQ layer of a tiny checkpoint through QuantizedTensors as int4 with the
/// checkpoint's group and zeros (the path `ingot compile --quant int4` takes): the runtime
/// reference decoder (quant::decodeWeight) gives the script's f32 dequantization bit for bit.
void expectExact(const std::string &name, importer::SourceQuant source, int64_t group) {
  const std::string dir = std::string(INGOT_TINY_DATA_DIR) + "/" + name;
  StatusOr<importer::ImportedModel> model = importer::importHuggingFace(dir, {});
  ASSERT_TRUE(model.ok()) << model.status().message();
  StatusOr<importer::ImportedModel> reference =
      importer::importHuggingFace(dir + "/dequantized", {});
  ASSERT_TRUE(reference.ok()) << reference.status().message();
  QuantizedTensors quantized(*model);
  size_t checked = 0;
  for (uint64_t handle = 0; handle < model->tensors.size(); ++handle) {
    const importer::ImportedTensor &t = model->tensors[handle];
    if (t.sourceQuant == importer::SourceQuant::None)
      continue;
    SCOPED_TRACE(t.name);
    ASSERT_EQ(t.sourceQuant, source);
    const int64_t n = t.shape[0], k = t.shape[1], g = t.sourceGroupSize;
    ASSERT_EQ(g, group);
    ASSERT_TRUE(QuantizedTensors::isExact(t, WeightEncoding::Int4Zero, g));
    EXPECT_FALSE(QuantizedTensors::isExact(t, WeightEncoding::Int4Min, g));
    EXPECT_FALSE(QuantizedTensors::isExact(t, WeightEncoding::Int4Zero, 128));
    Status status;
    quant::EncodedWeight e;
    e.weight = produce(quantized.producer(handle, WeightEncoding::Int4Zero, g,
                                          EncodedPart::Weight, schema::DType::U4, {n, k}),
                       status);
    ASSERT_TRUE(status.ok()) << status.message();
    e.scale = produce(quantized.producer(handle, WeightEncoding::Int4Zero, g,
                                         EncodedPart::Scale, schema::DType::F16, {n, k / g}),
                      status);
    ASSERT_TRUE(status.ok()) << status.message();
    e.offset = produce(quantized.producer(handle, WeightEncoding::Int4Zero, g,
                                          EncodedPart::Offset, schema::DType::F16, {n, k / g}),
                       status);
    ASSERT_TRUE(status.ok()) << status.message();
    std::vector<float> decoded(static_cast<size_t>(n * k), NAN), expected;
    ASSERT_TRUE(quant::decodeWeight(e, n, k, WeightEncoding::Int4Zero, g, decoded.data()).ok());
    int32_t ref = reference->find(t.name);
    ASSERT_GE(ref, 0);
    ASSERT_TRUE(reference->tensors[static_cast<size_t>(ref)].readF32(expected).ok());
    ASSERT_EQ(expected.size(), decoded.size());
    for (size_t i = 0; i < decoded.size(); ++i)
      ASSERT_EQ(bitsOf(decoded[i]), bitsOf(expected[i])) << "element " << i;
    ++checked;
  }
  EXPECT_EQ(checked, 2u);
  EXPECT_EQ(quantized.numExact(), checked);
}

TEST(PackedCheckpointQuantTest, TinyGptqInt4DecodesExactlyAsTheCheckpoint) {
  expectExact("gptq", importer::SourceQuant::Gptq, 32);
}

TEST(PackedCheckpointQuantTest, TinyAwqWithOneGroupOverKInt4DecodesExactlyAsTheCheckpoint) {
  expectExact("awq", importer::SourceQuant::Awq, 64); // group_size -1, K = 64
}

TEST(PackedCheckpointQuantTest, ActOrderLayersAreRefusedNamingTheTensor) {
  StatusOr<importer::ImportedModel> model = importer::importHuggingFace(
      std::string(INGOT_TINY_DATA_DIR) + "/gptq-act-order", {});
  ASSERT_TRUE(model.ok()) << model.status().message();
  int32_t handle = model->find("model.layers.1.mlp.down_proj.weight");
  ASSERT_GE(handle, 0);
  QuantizedTensors quantized(*model);
  Status status;
  produce(quantized.producer(static_cast<uint64_t>(handle), WeightEncoding::Int4Zero, 32,
                             EncodedPart::Weight, schema::DType::U4, {16, 64}),
          status);
  EXPECT_NE(status.message().find("tensor 'model.layers.1.mlp.down_proj.weight': GPTQ act-order"),
            std::string::npos)
      << status.message();
}

} // namespace
} // namespace ingot::compiler
