// The weight upload of the CUDA backend against a fake libcuda whose device memory is host
// memory: every tensor lands converted (bf16 matrices, f32 tables and vectors), through many
// small staging chunks, tied weights once per device dtype.
#include <cmath>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "runtime/backend/cpu/half_float.h"
#include "runtime/backend/cuda/cuda_backend_state.h"
#include "testing/llama_program.h"
#include "testing/test_seed.h"

namespace ingot {
namespace {

class CudaUploadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StatusOr<std::unique_ptr<CudaDriver>> cu = CudaDriver::loadFrom(INGOT_FAKE_LIBCUDA);
    ASSERT_TRUE(cu.ok()) << cu.status().message();
    state.cu = std::move(cu).value();
  }
  void plan(const testing::LlamaProgramOptions& o) {
    StatusOr<std::vector<uint8_t>> bytes = testing::buildLlamaArtifact(o);
    ASSERT_TRUE(bytes.ok()) << bytes.status().message();
    StatusOr<Artifact> a = Artifact::openFromMemory(*bytes);
    ASSERT_TRUE(a.ok()) << a.status().message();
    artifact = std::make_unique<Artifact>(std::move(*a));
    state.artifact = artifact.get();
    state.weights = std::make_unique<WeightStore>(*artifact);
    StatusOr<ProgramPlan> p = planProgram(*artifact, *state.weights);
    ASSERT_TRUE(p.ok()) << p.status().message();
    state.plan = std::make_unique<ProgramPlan>(std::move(*p));
  }
  /// Element i of a host weight as f32.
  static float hostValue(const WeightView& w, int64_t i) {
    switch (w.type) {
      case WeightType::kF32: return static_cast<const float*>(w.data)[i];
      case WeightType::kF16: return f16ToF32(static_cast<const uint16_t*>(w.data)[i]);
      case WeightType::kBF16: return bf16ToF32(static_cast<const uint16_t*>(w.data)[i]);
    }
    return NAN;
  }
  void checkUploaded() {
    const ProgramPlan& p = *state.plan;
    ASSERT_EQ(state.steps.size(), p.steps.size());
    int matrices = 0, tables = 0, norms = 0;
    for (size_t i = 0; i < p.steps.size(); ++i) {
      const PlannedStep& s = p.steps[i];
      const DeviceStep& d = state.steps[i];
      SCOPED_TRACE("step " + std::to_string(i));
      if (s.op == schema::OpKind::Linear || s.op == schema::OpKind::Logits) {
        ASSERT_NE(d.weight, 0u);
        EXPECT_EQ(d.N, s.weight.rows());
        EXPECT_EQ(d.K, s.weight.cols());
        const uint16_t* dev = reinterpret_cast<const uint16_t*>(d.weight);
        for (int64_t e = 0; e < s.weight.elements(); ++e)
          ASSERT_EQ(dev[e], f32ToBf16(hostValue(s.weight, e))) << s.weight.name << "[" << e << "]";
        ++matrices;
      } else if (s.op == schema::OpKind::Embedding) {
        const float* dev = reinterpret_cast<const float*>(d.weight);
        for (int64_t e = 0; e < s.weight.elements(); ++e)
          ASSERT_EQ(dev[e], hostValue(s.weight, e)) << s.weight.name << "[" << e << "]";
        ++tables;
      } else if (s.op == schema::OpKind::RmsNorm) {
        const float* dev = reinterpret_cast<const float*>(d.norm);
        const int64_t width = p.buffers[s.inputs[0]].width;
        ASSERT_EQ(std::memcmp(dev, s.norm, width * 4), 0);
        ++norms;
      } else if (s.op == schema::OpKind::Rope) {
        const float* dev = reinterpret_cast<const float*>(d.inv_freq);
        ASSERT_EQ(std::memcmp(dev, s.inv_freq.data(), s.inv_freq.size() * 4), 0);
      }
    }
    EXPECT_GT(matrices, 0);
    EXPECT_EQ(tables, 1);
    EXPECT_GT(norms, 0);
  }

  CudaBackendState state;
  std::unique_ptr<Artifact> artifact;
};

TEST_F(CudaUploadTest, BF16WeightsLandBitExactThroughManySmallChunks) {
  testing::LlamaProgramOptions o;
  o.weight_dtype = schema::DType::BF16;
  o.seed = ingot::testing::testSeed();
  plan(o);
  state.staging_bytes = 1000;  // not a multiple of any row: chunks split rows
  ASSERT_TRUE(uploadWeights(state).ok());
  checkUploaded();
  EXPECT_GT(state.upload_bytes, 0u);
}

TEST_F(CudaUploadTest, F32WeightsAreRoundedToBf16AndTiedEmbeddingsKeptTwice) {
  testing::LlamaProgramOptions o;
  o.weight_dtype = schema::DType::F32;
  o.tie_embeddings = true;
  o.seed = ingot::testing::testSeed();
  plan(o);
  state.staging_bytes = 4096;
  ASSERT_TRUE(uploadWeights(state).ok());
  checkUploaded();
  // The tied table is an f32 copy for the gather and a bf16 copy for the head.
  CUdeviceptr table = 0, head = 0;
  for (size_t i = 0; i < state.steps.size(); ++i) {
    if (state.plan->steps[i].op == schema::OpKind::Embedding) table = state.steps[i].weight;
    if (state.plan->steps[i].op == schema::OpKind::Logits) head = state.steps[i].weight;
  }
  EXPECT_NE(table, 0u);
  EXPECT_NE(head, 0u);
  EXPECT_NE(table, head);
}

TEST_F(CudaUploadTest, DummyWeightsUploadTheValuesTheCpuBackendGenerates) {
  testing::LlamaProgramOptions o;
  o.dummy_weights = true;
  o.weight_dtype = schema::DType::BF16;
  o.seed = 1234;
  plan(o);
  ASSERT_TRUE(uploadWeights(state).ok());
  checkUploaded();
}

}  // namespace
}  // namespace ingot
