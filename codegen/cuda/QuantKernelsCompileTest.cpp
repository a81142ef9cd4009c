//===- QuantKernelsCompileTest.cpp - quantized GEMV/GEMM kernels compile for every target ===//
//
// Every ingot_quant_gemv_* and ingot_quant_gemm_* entry point compiles with NVRTC in one translation unit for every
// default target and is in every binary, and ptxas -v finds no register spills and no stack
// frame on any default cubin target (sm_80, sm_89, sm_90a, sm_100f, sm_120f). Prints the
// registers per kernel. No GPU needed.
//
//===----------------------------------------------------------------------===//
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codegen/cuda/NvrtcCompiler.h"
#include "codegen/cuda/PtxasReport.h"
#include "codegen/cuda/QuantKernelsSource.h"

namespace ingot::codegen {
namespace {

TEST(QuantKernelsCompile, KernelNamesAreTheDocumentedOnes) {
  std::vector<std::string> names;
  for (const QuantGemvKernel &k : allQuantGemvKernels()) names.push_back(quantGemvKernelName(k));
  const std::vector<std::string> want = {
      "ingot_quant_gemv_int4min_f16",  "ingot_quant_gemv_int4min_bf16",
      "ingot_quant_gemv_int4min_f32",  "ingot_quant_gemv_int4zero_f16",
      "ingot_quant_gemv_int4zero_bf16", "ingot_quant_gemv_int4zero_f32",
      "ingot_quant_gemv_fp8",          "ingot_quant_gemv_nvfp4",
      "ingot_quant_gemv_mxfp4"};
  EXPECT_EQ(names, want);
}

TEST(QuantKernelsCompile, EveryKernelCompilesForEveryDefaultTarget) {
  StatusOr<std::vector<CudaBinary>> binaries =
      compileCuda(quantGemvSource(), "quant_gemv.cu", defaultCudaTargets());
  ASSERT_TRUE(binaries.ok()) << binaries.status().message();
  ASSERT_EQ(binaries->size(), defaultCudaTargets().size());
  for (const CudaBinary &b : *binaries) {
    const std::string text(b.data.begin(), b.data.end());
    for (const QuantGemvKernel &k : allQuantGemvKernels())
      for (const std::string &name : {quantGemvKernelName(k), quantGemmKernelName(k)})
        EXPECT_NE(text.find(name), std::string::npos) << name << " missing for " << b.target;
  }
}

TEST(QuantKernelsCompile, NoSpillsOnAnyDefaultTarget) {
  if (std::string(INGOT_PTXAS).empty())
    GTEST_SKIP() << "no ptxas in the CUDA toolkit: the spill check needs it";
  for (const std::string &arch : defaultCudaTargets()) {
    if (arch.rfind("sm_", 0) != 0) continue;  // the PTX target has no ptxas report
    const std::string target = "compute_" + arch.substr(3);
    StatusOr<std::vector<CudaBinary>> ptx = compileCuda(quantGemvSource(), "quant_gemv.cu", {target});
    ASSERT_TRUE(ptx.ok()) << ptx.status().message();
    std::string text((*ptx)[0].data.begin(), (*ptx)[0].data.end());
    StatusOr<std::map<std::string, PtxasResources>> usage = ptxasResources(INGOT_PTXAS, text, arch);
    ASSERT_TRUE(usage.ok()) << usage.status().message();
    std::vector<std::string> names;
    for (const QuantGemvKernel &k : allQuantGemvKernels()) {
      names.push_back(quantGemvKernelName(k));
      names.push_back(quantGemmKernelName(k));
    }
    for (const std::string &name : names) {
      auto it = usage->find(name);
      ASSERT_NE(it, usage->end()) << name << " not in the ptxas log for " << arch;
      const PtxasResources &u = it->second;
      std::printf("[ %-7s ] %-32s %3d registers %4d B stack %6d B shared\n", arch.c_str(),
                  name.c_str(), u.registers, u.stackBytes, u.sharedBytes);
      EXPECT_GT(u.registers, 0) << name;
      EXPECT_EQ(u.spillStores + u.spillLoads, 0) << name << " spills on " << arch;
      EXPECT_EQ(u.stackBytes, 0) << name << " has a stack frame on " << arch;
    }
  }
}

TEST(QuantKernelsCompile, GemmNamesMirrorTheGemvNames) {
  for (const QuantGemvKernel &k : allQuantGemvKernels()) {
    std::string want = quantGemvKernelName(k);
    want.replace(want.find("gemv"), 4, "gemm");
    EXPECT_EQ(quantGemmKernelName(k), want);
  }
  EXPECT_EQ(quantGemmKernelName({quantgemv::Format::kInt4Zero, quantgemv::ScaleType::kBF16}),
            "ingot_quant_gemm_int4zero_bf16");
}

TEST(QuantKernelsCompile, SourceHoldsOnlyTheRequestedEntryPoints) {
  const QuantGemvKernel nvfp4{quantgemv::Format::kNvfp4, quantgemv::ScaleType::kF16};
  const QuantGemvKernel int4{quantgemv::Format::kInt4Zero, quantgemv::ScaleType::kBF16};
  const std::string src = quantGemvSource({nvfp4, int4});
  EXPECT_NE(src.find("ingot_quant_gemv_nvfp4(ingot::quantgemv::QuantGemvParams p)"),
            std::string::npos);
  EXPECT_NE(src.find("ingot_quant_gemv_int4zero_bf16("), std::string::npos);
  EXPECT_EQ(src.find("ingot_quant_gemv_int4zero_f16("), std::string::npos);
  EXPECT_EQ(src.find("ingot_quant_gemv_mxfp4("), std::string::npos);
  EXPECT_NE(src.find("ingot_quant_gemm_nvfp4(ingot::quantgemv::QuantGemvParams p)"),
            std::string::npos);
  EXPECT_NE(src.find("ingot_quant_gemm_int4zero_bf16("), std::string::npos);
  EXPECT_EQ(src.find("ingot_quant_gemm_mxfp4("), std::string::npos);
  // The int4 entry point refuses a launch with another scale type.
  EXPECT_NE(src.find("ScaleType::kBF16)) __trap();"), std::string::npos);
}

} // namespace
} // namespace ingot::codegen
