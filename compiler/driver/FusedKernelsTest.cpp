//===- FusedKernelsTest.cpp - the fused kernels stage of the compile driver ---===//
//
// That each selected element type's entry points (ingot-select-kernels chooses the types:
// test/lit/transforms/select-kernels.mlir) become a 256-thread KernelDef with its unit's binaries for every target,
// and that adding them twice is refused, naming the kernel. Compiles with NVRTC (about 1 s)
// where the build has it.
//
//===----------------------------------------------------------------------===//
#include "compiler/driver/FusedKernels.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "codegen/cuda/FusedOpsSource.h"

namespace ingot::compiler {
namespace {

using codegen::AttentionDtype;

Program programWith(std::vector<std::pair<schema::BufferKind, schema::DType>> buffers) {
  Program p;
  p.name = "step";
  for (auto [kind, dtype] : buffers)
    p.buffers.push_back({"b" + std::to_string(p.buffers.size()), kind, dtype, {-1, 8}});
  return p;
}

TEST(FusedKernels, NoTargetsAddNothing) {
  ArtifactWriter writer;
  writer.addProgram(programWith({{schema::BufferKind::Activation, schema::DType::F32}}));
  CudaKernelReport report;
  ASSERT_TRUE(addFusedKernels(writer, {{AttentionDtype::kF32}}, {{}, ""}, &report).ok());
  EXPECT_TRUE(writer.contents().kernels.empty());
  EXPECT_EQ(report.kernels, 0u);
}

TEST(FusedKernels, EveryEntryPointSharesItsTypesBinariesAndIsAddedOnce) {
  if (!cudaCodegenAvailable())
    GTEST_SKIP() << "this build has no NVRTC";
  ArtifactWriter writer;
  writer.addProgram(programWith({{schema::BufferKind::Activation, schema::DType::F32},
                                 {schema::BufferKind::Activation, schema::DType::BF16}}));
  const CudaKernelOptions options{{"sm_90a", "compute_80"}, ""};  // no cache: real compiles
  const FusedKernelSelection selection{{AttentionDtype::kF32, AttentionDtype::kBF16}};
  CudaKernelReport report;
  Status s = addFusedKernels(writer, selection, options, &report);
  ASSERT_TRUE(s.ok()) << s.message();
  // The f32 unit has every op but the fp8 KV write (no fp8 KV cache here), the scale (no
  // scale step) and gelu_mul (no GELU gating), the bf16 unit every one of those but the
  // f32-only sampling kernel.
  std::vector<std::string> f32Names, bf16Names;
  for (codegen::FusedOp op : codegen::allFusedOps()) {
    if (op == codegen::FusedOp::kKvWriteFp8 || op == codegen::FusedOp::kScale ||
        op == codegen::FusedOp::kGeluMul)
      continue;
    f32Names.push_back(codegen::fusedKernelName(op, AttentionDtype::kF32));
    if (codegen::fusedOpHasEntryPoint(op, AttentionDtype::kBF16))
      bf16Names.push_back(codegen::fusedKernelName(op, AttentionDtype::kBF16));
  }
  const size_t numF32 = f32Names.size(), total = numF32 + bf16Names.size();
  EXPECT_EQ(bf16Names.size() + 1, numF32);
  const std::vector<Kernel> &kernels = writer.contents().kernels;
  ASSERT_EQ(kernels.size(), total);
  EXPECT_EQ(report.kernels, total);
  EXPECT_EQ(report.compiles, 4u) << "one NVRTC unit per (element type, target)";
  for (size_t i = 0; i < kernels.size(); ++i) {
    const Kernel &k = kernels[i];
    EXPECT_EQ(k.name, i < numF32 ? f32Names[i] : bf16Names[i - numF32]);
    EXPECT_EQ(k.blockDim, (std::vector<uint32_t>{256, 1, 1}));
    EXPECT_EQ(k.sharedMemBytes, 0u);
    ASSERT_EQ(k.binaries.size(), 2u);
    EXPECT_EQ(k.binaries[0].target, "sm_90a");
    EXPECT_EQ(k.binaries[0].format, schema::BinaryFormat::Cubin);
    EXPECT_EQ(k.binaries[1].target, "compute_80");
    EXPECT_EQ(k.binaries[1].format, schema::BinaryFormat::Ptx);
    const Kernel &first = kernels[i < numF32 ? 0 : numF32];
    EXPECT_EQ(k.binaries[0].data, first.binaries[0].data) << k.name;
    EXPECT_EQ(k.binaries[1].data, first.binaries[1].data) << k.name;
    const std::string ptx(k.binaries[1].data.begin(), k.binaries[1].data.end());
    EXPECT_NE(ptx.find(".entry " + k.name), std::string::npos) << k.name << " not in its PTX";
  }
  EXPECT_NE(kernels[0].binaries[1].data, kernels[numF32].binaries[1].data);

  s = addFusedKernels(writer, selection, options, &report);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("kernel ingot_fused_rms_norm_residual_f32 is already in the "
                             "artifact"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(writer.contents().kernels.size(), total);
}

TEST(FusedKernels, Bf16OnlyArtifactStillGetsTheF32SamplingKernel) {
  if (!cudaCodegenAvailable())
    GTEST_SKIP() << "this build has no NVRTC";
  ArtifactWriter writer;
  writer.addProgram(programWith({{schema::BufferKind::Activation, schema::DType::BF16}}));
  CudaKernelReport report;
  Status s = addFusedKernels(writer, {{AttentionDtype::kBF16}}, {{"compute_80"}, ""}, &report);
  ASSERT_TRUE(s.ok()) << s.message();
  const std::vector<Kernel> &kernels = writer.contents().kernels;
  ASSERT_FALSE(kernels.empty());
  const Kernel &sample = kernels.back();
  EXPECT_EQ(sample.name, "ingot_fused_sample_f32");
  ASSERT_EQ(sample.binaries.size(), 1u);
  const std::string ptx(sample.binaries[0].data.begin(), sample.binaries[0].data.end());
  EXPECT_NE(ptx.find(".entry ingot_fused_sample_f32"), std::string::npos);
  EXPECT_EQ(ptx.find("_bf16"), std::string::npos) << "the sampling unit holds only f32-only ops";
  for (size_t i = 0; i + 1 < kernels.size(); ++i) {
    EXPECT_NE(kernels[i].name.find("_bf16"), std::string::npos) << kernels[i].name;
    EXPECT_NE(kernels[i].binaries[0].data, sample.binaries[0].data) << kernels[i].name;
  }
  EXPECT_EQ(report.compiles, 2u) << "the bf16 unit and the f32-only unit";
}

TEST(FusedKernels, AScaleStepOrGeluGatingBringsItsKernelIntoEachUnitAndNothingElse) {
  if (!cudaCodegenAvailable())
    GTEST_SKIP() << "this build has no NVRTC";
  for (const char *op : {"scale", "gelu_mul"}) {
    SCOPED_TRACE(op);
    const bool scale = std::string(op) == "scale";
    ArtifactWriter writer;
    writer.addProgram(programWith({{schema::BufferKind::Activation, schema::DType::F32},
                                   {schema::BufferKind::Activation, schema::DType::BF16}}));
    FusedKernelSelection selection{{AttentionDtype::kF32, AttentionDtype::kBF16}};
    (scale ? selection.scale : selection.geluMul) = true;
    CudaKernelReport report;
    Status s = addFusedKernels(writer, selection, {{"compute_80"}, ""}, &report);
    ASSERT_TRUE(s.ok()) << s.message();
    const std::vector<Kernel> &kernels = writer.contents().kernels;
    for (const char *type : {"_f32", "_bf16"}) {
      const std::string name = std::string("ingot_fused_") + op + type;
      auto k = std::find_if(kernels.begin(), kernels.end(),
                            [&](const Kernel &k) { return k.name == name; });
      ASSERT_NE(k, kernels.end()) << name;
      const std::string ptx(k->binaries[0].data.begin(), k->binaries[0].data.end());
      EXPECT_NE(ptx.find(".entry " + name), std::string::npos) << name;
      const std::string other = scale ? ".entry ingot_fused_gelu_mul_" : ".entry ingot_fused_scale_";
      EXPECT_EQ(ptx.find(other), std::string::npos) << "only the kernel its module needs";
    }
    EXPECT_EQ(report.compiles, 2u) << "still one NVRTC unit per element type";
  }
}

TEST(FusedKernels, AnFp8KvCacheBringsTheFp8KvWriteIntoTheF32Unit) {
  if (!cudaCodegenAvailable())
    GTEST_SKIP() << "this build has no NVRTC";
  ArtifactWriter writer;
  writer.addProgram(programWith({{schema::BufferKind::Activation, schema::DType::F32},
                                 {schema::BufferKind::KvCache, schema::DType::F8E4M3FN}}));
  CudaKernelReport report;
  Status s = addFusedKernels(writer, {{AttentionDtype::kF32}, /*kvWriteFp8=*/true},
                             {{"compute_80"}, ""}, &report);
  ASSERT_TRUE(s.ok()) << s.message();
  const std::vector<Kernel> &kernels = writer.contents().kernels;
  ASSERT_EQ(kernels.size(), codegen::allFusedOps().size() - 2) << "all but scale, gelu_mul";
  const Kernel &write = kernels.back();
  EXPECT_EQ(write.name, "ingot_fused_kv_write_fp8_f32");
  EXPECT_EQ(write.blockDim, (std::vector<uint32_t>{256, 1, 1}));
  ASSERT_EQ(write.binaries.size(), 1u);
  const std::string ptx(write.binaries[0].data.begin(), write.binaries[0].data.end());
  EXPECT_NE(ptx.find(".entry ingot_fused_kv_write_fp8_f32"), std::string::npos);
  EXPECT_EQ(write.binaries[0].data, kernels.front().binaries[0].data) << "one f32 unit";
  EXPECT_EQ(report.compiles, 1u);
}

} // namespace
} // namespace ingot::compiler
