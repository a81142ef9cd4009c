//===- FusedOpsCompileTest.cpp - fused kernels compile for every target, no GPU needed ===//
//
// The fused elementwise kernels (rms_norm + residual, rope + KV write, silu_mul, embedding,
// add, add_bias, to_bf16, gather_rows; f32 and bf16; token sampling and the fp8 KV write,
// f32 only) compile with
// NVRTC in one translation unit for every default target, each
// entry point is in every binary, and ptxas -v finds no register spills and no stack frame
// on any default cubin target (sm_80, sm_89, sm_90a, sm_100f, sm_120f). Prints the
// resources per kernel. About 3 s on 2 cores.
//
//===----------------------------------------------------------------------===//
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codegen/cuda/FusedOpsSource.h"
#include "codegen/cuda/NvrtcCompiler.h"
#include "codegen/cuda/PtxasReport.h"

namespace ingot::codegen {
namespace {

std::vector<std::string> allKernelNames() {
  std::vector<std::string> names;
  for (FusedOp op : allFusedOps())
    for (AttentionDtype t : {AttentionDtype::kF32, AttentionDtype::kBF16})
      if (fusedOpHasEntryPoint(op, t)) names.push_back(fusedKernelName(op, t));
  return names;
}

TEST(FusedOpsCompile, EveryKernelCompilesForEveryDefaultTarget) {
  StatusOr<std::vector<CudaBinary>> binaries =
      compileCuda(fusedOpsSource(), "fused_ops.cu", defaultCudaTargets());
  ASSERT_TRUE(binaries.ok()) << binaries.status().message();
  ASSERT_EQ(binaries->size(), defaultCudaTargets().size());
  for (const CudaBinary &b : *binaries) {
    const std::string text(b.data.begin(), b.data.end());
    for (const std::string &name : allKernelNames())
      EXPECT_NE(text.find(name), std::string::npos) << name << " missing for " << b.target;
  }
}

TEST(FusedOpsCompile, NoSpillsOnAnyDefaultTarget) {
  if (std::string(INGOT_PTXAS).empty())
    GTEST_SKIP() << "no ptxas in the CUDA toolkit: the spill check needs it";
  for (const std::string &arch : defaultCudaTargets()) {
    if (arch.rfind("sm_", 0) != 0) continue;  // the PTX target has no ptxas report
    const std::string target = "compute_" + arch.substr(3);
    StatusOr<std::vector<CudaBinary>> ptx = compileCuda(fusedOpsSource(), "fused_ops.cu", {target});
    ASSERT_TRUE(ptx.ok()) << ptx.status().message();
    std::string text((*ptx)[0].data.begin(), (*ptx)[0].data.end());
    StatusOr<std::map<std::string, PtxasResources>> usage =
        ptxasResources(INGOT_PTXAS, text, arch);
    ASSERT_TRUE(usage.ok()) << usage.status().message();
    for (const std::string &name : allKernelNames()) {
      auto it = usage->find(name);
      ASSERT_NE(it, usage->end()) << name << " not in the ptxas log for " << arch;
      const PtxasResources &u = it->second;
      std::printf("[ %-7s ] %-40s %3d registers %4d B stack\n", arch.c_str(), name.c_str(), u.registers,
                  u.stackBytes);
      EXPECT_GT(u.registers, 0) << name;
      EXPECT_EQ(u.spillStores + u.spillLoads, 0) << name << " spills on " << arch;
      EXPECT_EQ(u.stackBytes, 0) << name << " has a stack frame on " << arch;
    }
  }
}

TEST(FusedOpsCompile, SourceHoldsOnlyTheRequestedEntryPoints) {
  const std::string src = fusedOpsSource({FusedOp::kSiluMul}, {AttentionDtype::kBF16});
  EXPECT_NE(src.find(fusedKernelName(FusedOp::kSiluMul, AttentionDtype::kBF16)), std::string::npos);
  EXPECT_EQ(src.find(fusedKernelName(FusedOp::kSiluMul, AttentionDtype::kF32)), std::string::npos);
  EXPECT_EQ(src.find(fusedKernelName(FusedOp::kEmbedding, AttentionDtype::kBF16)), std::string::npos);
}

TEST(FusedOpsCompile, PerTypeUnitHoldsEveryEntryPointOfItsTypeOnly) {
  // The compile driver builds one unit per activation type (compiler/driver/FusedKernels).
  for (AttentionDtype t : {AttentionDtype::kF32, AttentionDtype::kBF16}) {
    const AttentionDtype other = t == AttentionDtype::kF32 ? AttentionDtype::kBF16 : AttentionDtype::kF32;
    const std::string src = fusedOpsSource({}, {t});
    for (FusedOp op : allFusedOps()) {
      if (fusedOpHasEntryPoint(op, t))
        EXPECT_NE(src.find(fusedKernelName(op, t) + "("), std::string::npos) << fusedKernelName(op, t);
      EXPECT_EQ(src.find(fusedKernelName(op, other) + "("), std::string::npos) << fusedKernelName(op, other);
    }
  }
}

TEST(FusedOpsCompile, SamplingKernelIsF32OnlyAndBringsItsHeader) {
  EXPECT_TRUE(fusedOpHasEntryPoint(FusedOp::kSample, AttentionDtype::kF32));
  EXPECT_FALSE(fusedOpHasEntryPoint(FusedOp::kSample, AttentionDtype::kBF16));
  EXPECT_EQ(fusedKernelName(FusedOp::kSample, AttentionDtype::kF32), "ingot_fused_sample_f32");
  const std::string sample = fusedOpsSource({FusedOp::kSample}, {AttentionDtype::kF32});
  EXPECT_NE(sample.find("ingot_fused_sample_f32(ingot::sampling::SampleParams p)"),
            std::string::npos);
  EXPECT_NE(sample.find("// ---- codegen/cuda/kernels/sampling.cuh"), std::string::npos);
  // Without the sampling entry point the unit does not carry (or compile) its header.
  const std::string bf16 = fusedOpsSource({}, {AttentionDtype::kBF16});
  EXPECT_EQ(bf16.find("ingot_fused_sample"), std::string::npos);
  EXPECT_EQ(bf16.find("kernels/sampling.cuh"), std::string::npos);
}

TEST(FusedOpsCompile, Fp8KvWriteIsF32OnlyAndBringsItsHeader) {
  EXPECT_TRUE(fusedOpHasEntryPoint(FusedOp::kKvWriteFp8, AttentionDtype::kF32));
  EXPECT_FALSE(fusedOpHasEntryPoint(FusedOp::kKvWriteFp8, AttentionDtype::kBF16));
  EXPECT_EQ(fusedKernelName(FusedOp::kKvWriteFp8, AttentionDtype::kF32),
            "ingot_fused_kv_write_fp8_f32");
  const std::string src = fusedOpsSource({FusedOp::kKvWriteFp8}, {AttentionDtype::kF32});
  EXPECT_NE(src.find("ingot_fused_kv_write_fp8_f32(ingot::kvfp8::KvFp8WriteParams p)"),
            std::string::npos);
  EXPECT_NE(src.find("// ---- codegen/cuda/kernels/kv_fp8.cuh"), std::string::npos);
  EXPECT_EQ(fusedOpsSource({FusedOp::kAdd}, {AttentionDtype::kF32}).find("kernels/kv_fp8.cuh"),
            std::string::npos);
}

} // namespace
} // namespace ingot::codegen
