//===- QuantKernelsTest.cpp - the quantized GEMV kernels stage of the compile driver ---===//
//
// That the selected entry points' names (ingot-select-kernels chooses them from the
// quantized linears: test/lit/transforms/select-kernels.mlir) give their kernels, and that
// the kernels of one format share their unit's binaries and are added once. Compiles with NVRTC where the build has it.
//
//===----------------------------------------------------------------------===//
#include "compiler/driver/QuantKernels.h"

#include <gtest/gtest.h>

namespace ingot::compiler {
namespace {

using quantgemv::Format;
using quantgemv::ScaleType;

/// A tensor of `dtype`; returns its index.
int32_t tensor(ArtifactWriter &w, const std::string &name, schema::DType dtype,
               QuantScheme q = {}) {
  TensorSpec t;
  t.name = name;
  t.dtype = dtype;
  t.shape = {32, 64};
  t.quant = q;
  return w.addTensor(t);
}

/// An int4 weight with `zero` convention and scales/zeros of `scaleType`.
int32_t int4Weight(ArtifactWriter &w, const std::string &name, schema::ZeroKind zero,
                   schema::DType scaleType) {
  QuantScheme q;
  q.kind = schema::QuantKind::Int4Group;
  q.blockSize = 32;
  q.zeroKind = zero;
  q.scaleTensor = tensor(w, name + ".scale", scaleType);
  q.zeroTensor = tensor(w, name + ".zero", scaleType);
  return tensor(w, name, schema::DType::U4, q);
}

void addStep(Program &p, schema::OpKind op, int32_t weight) {
  ProgramStep s;
  s.op = op;
  s.weights = {weight};
  p.steps.push_back(s);
}

TEST(QuantKernels, NamesGiveTheirEntryPointsInKernelOrder) {
  StatusOr<std::vector<codegen::QuantGemvKernel>> k = quantGemvKernelsNamed(
      {"ingot_quant_gemv_nvfp4", "ingot_quant_gemv_int4zero_bf16", "ingot_quant_gemv_int4min_f32"});
  ASSERT_TRUE(k.ok()) << k.status().message();
  std::vector<std::string> names;
  for (const codegen::QuantGemvKernel &e : *k) names.push_back(codegen::quantGemvKernelName(e));
  EXPECT_EQ(names, (std::vector<std::string>{"ingot_quant_gemv_int4min_f32",
                                             "ingot_quant_gemv_int4zero_bf16",
                                             "ingot_quant_gemv_nvfp4"}));
  k = quantGemvKernelsNamed({"ingot_quant_gemv_int4min_i8"});
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("'ingot_quant_gemv_int4min_i8' is not a quantized GEMV "
                                      "kernel"),
            std::string::npos)
      << k.status().message();
}

TEST(QuantKernels, OneUnitPerFormatSharedBinariesAddedOnce) {
  ArtifactWriter w;
  Program p;
  addStep(p, schema::OpKind::Linear, int4Weight(w, "a", schema::ZeroKind::Zero, schema::DType::F16));
  addStep(p, schema::OpKind::Linear, int4Weight(w, "b", schema::ZeroKind::Zero, schema::DType::F32));
  w.addProgram(p);
  StatusOr<std::vector<codegen::QuantGemvKernel>> selected = quantGemvKernelsNamed(
      {"ingot_quant_gemv_int4zero_f16", "ingot_quant_gemv_int4zero_f32"});
  ASSERT_TRUE(selected.ok());
  CudaKernelReport none;
  ASSERT_TRUE(addQuantKernels(w, *selected, {{}, ""}, &none).ok());
  EXPECT_TRUE(w.contents().kernels.empty());
  if (!cudaCodegenAvailable())
    GTEST_SKIP() << "this build has no NVRTC";
  CudaKernelReport report;
  Status s = addQuantKernels(w, *selected, {{"sm_80"}, ""}, &report);
  ASSERT_TRUE(s.ok()) << s.message();
  // Per entry point a GEMV and its tensor-core GEMM, all four from one unit.
  ASSERT_EQ(w.contents().kernels.size(), 4u);
  EXPECT_EQ(report.kernels, 4u);
  // Both int4zero entry points in one unit; no cache here, so its sm_80 cubin and the
  // compute_80 PTX that gives the parameter sizes (no target emits PTX) are two compiles.
  EXPECT_EQ(report.compiles, 2u);
  const std::vector<Kernel> &ks = w.contents().kernels;
  const Kernel &a = ks[0], &b = ks[1];
  EXPECT_EQ(a.name, "ingot_quant_gemv_int4zero_f16");
  EXPECT_EQ(b.name, "ingot_quant_gemv_int4zero_f32");
  EXPECT_EQ(ks[2].name, "ingot_quant_gemm_int4zero_f16");
  EXPECT_EQ(ks[3].name, "ingot_quant_gemm_int4zero_f32");
  EXPECT_EQ(a.blockDim, (std::vector<uint32_t>{128, 1, 1}));
  EXPECT_EQ(ks[2].blockDim, (std::vector<uint32_t>{256, 1, 1}));
  EXPECT_EQ(ks[2].sharedMemBytes, 0u);  // static shared memory only
  ASSERT_EQ(a.binaries.size(), 1u);
  EXPECT_EQ(a.binaries[0].target, "sm_80");
  EXPECT_EQ(a.paramBytes.size(), 1u) << "the QuantGemvParams struct";
  EXPECT_EQ(a.paramBytes, ks[2].paramBytes) << "the GEMM takes the same struct";
  EXPECT_EQ(a.binaries[0].data, b.binaries[0].data);
  EXPECT_EQ(a.binaries[0].data, ks[3].binaries[0].data);
  s = addQuantKernels(w, *selected, {{"sm_80"}, ""}, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("ingot_quant_gemv_int4zero_f16 is already in the artifact"),
            std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace ingot::compiler
