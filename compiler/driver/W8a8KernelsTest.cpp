//===- W8a8KernelsTest.cpp - the W8A8 FP8 kernels stage of the compile driver ---===//
//
// An artifact gets the W8A8 quantizer and epilogue when selected (ingot-select-kernels
// selects them for fp8 linear weights: test/lit/transforms/select-kernels.mlir), from one
// unit whose binaries both share, once.
// Compiles with NVRTC where the build has it.
//
//===----------------------------------------------------------------------===//
#include "compiler/driver/W8a8Kernels.h"

#include <gtest/gtest.h>

#include "codegen/cuda/W8a8KernelsSource.h"

namespace ingot::compiler {
namespace {

int32_t tensor(ArtifactWriter &w, const std::string &name, schema::DType dtype,
               schema::QuantKind kind = schema::QuantKind::None) {
  TensorSpec t;
  t.name = name;
  t.dtype = dtype;
  t.shape = {32, 64};
  t.quant.kind = kind;
  return w.addTensor(t);
}

void addStep(Program &p, schema::OpKind op, int32_t weight) {
  ProgramStep s;
  s.op = op;
  s.weights = {weight};
  p.steps.push_back(s);
}

TEST(W8a8Kernels, OnlyWhenSelected) {
  ArtifactWriter w;
  CudaKernelReport report;
  ASSERT_TRUE(addW8a8Kernels(w, /*selected=*/false, {{"sm_90a"}, ""}, &report).ok());
  EXPECT_TRUE(w.contents().kernels.empty());
}

TEST(W8a8Kernels, QuantizerAndProducerUnitsAreAddedOnce) {
  ArtifactWriter w;
  Program p;
  addStep(p, schema::OpKind::Linear,
          tensor(w, "w", schema::DType::F8E4M3FN, schema::QuantKind::PerChannel));
  w.addProgram(p);
  ASSERT_TRUE(addW8a8Kernels(w, true, {{}, ""}, nullptr).ok());
  EXPECT_TRUE(w.contents().kernels.empty()) << "no targets, no kernels";
  if (!cudaCodegenAvailable())
    GTEST_SKIP() << "this build has no NVRTC";
  CudaKernelReport report;
  Status s = addW8a8Kernels(w, true, {{"sm_90a", "compute_80"}, ""}, &report);
  ASSERT_TRUE(s.ok()) << s.message();
  const std::vector<Kernel> &ks = w.contents().kernels;
  ASSERT_EQ(ks.size(), 4u);
  EXPECT_EQ(ks[0].name, codegen::kFp8QuantizeRowsKernel);
  EXPECT_EQ(ks[1].name, codegen::kFp8ScaleEpilogueKernel);
  EXPECT_EQ(ks[2].name, codegen::kFp8RmsNormQuantKernel);
  EXPECT_EQ(ks[3].name, codegen::kFp8SiluMulQuantKernel);
  EXPECT_EQ(report.kernels, 4u);
  EXPECT_EQ(report.compiles, 4u);  // two units (quantizer, producers), two targets
  for (const Kernel &k : ks) {
    EXPECT_EQ(k.blockDim, (std::vector<uint32_t>{256, 1, 1}));
    ASSERT_EQ(k.binaries.size(), 2u);
    EXPECT_EQ(k.binaries[0].target, "sm_90a");
    EXPECT_EQ(k.binaries[1].target, "compute_80");
  }
  EXPECT_EQ(ks[0].binaries[0].data, ks[1].binaries[0].data);
  EXPECT_EQ(ks[2].binaries[0].data, ks[3].binaries[0].data);
  EXPECT_NE(ks[0].binaries[0].data, ks[2].binaries[0].data) << "the producers are a unit apart";
  s = addW8a8Kernels(w, true, {{"sm_90a"}, ""}, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("ingot_fp8_quantize_rows is already in the artifact"),
            std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace ingot::compiler
