//===- CudaCompileJobsTest.cpp - the parameter-size PTX target ------------===//
#include "compiler/driver/CudaCompileJobs.h"

#include <gtest/gtest.h>

namespace ingot::compiler {
namespace {

TEST(AbiPtxTarget, NoneWhereATargetEmitsPtxOrThereAreNoTargets) {
  EXPECT_EQ(abiPtxTarget({}), "");
  EXPECT_EQ(abiPtxTarget({"sm_80", "compute_80", "simt"}), "");
  EXPECT_EQ(abiPtxTarget({"compute_90a"}), "");
}

TEST(AbiPtxTarget, TheOldestSmTargetsComputeWithItsSuffixElseCompute80ForSimt) {
  EXPECT_EQ(abiPtxTarget({"simt"}), "compute_80");
  EXPECT_EQ(abiPtxTarget({"sm_90a"}), "compute_90a");
  EXPECT_EQ(abiPtxTarget({"sm_120f", "sm_100f", "simt"}), "compute_100f");
  EXPECT_EQ(abiPtxTarget({"sm_90a", "sm_89", "sm_120f"}), "compute_89");
}

TEST(KernelParamBytes, ReadFromAPtxBinaryElseFromTheAbiPtxElseNone) {
  const std::string ptx = ".visible .entry k(\n\t.param .u64 k_param_0,\n\t.param .u32 k_param_1\n)\n{\n}\n";
  const std::vector<uint8_t> bytes(ptx.begin(), ptx.end());
  KernelBinary cubin;
  cubin.target = "sm_80";
  cubin.format = schema::BinaryFormat::Cubin;
  KernelBinary ptxBinary;
  ptxBinary.target = "compute_80";
  ptxBinary.format = schema::BinaryFormat::Ptx;
  ptxBinary.data = bytes;
  StatusOr<std::vector<uint32_t>> fromBinary = kernelParamBytes({cubin, ptxBinary}, {}, "k");
  ASSERT_TRUE(fromBinary.ok()) << fromBinary.status().message();
  EXPECT_EQ(*fromBinary, (std::vector<uint32_t>{8, 4}));
  StatusOr<std::vector<uint32_t>> fromAbi = kernelParamBytes({cubin}, bytes, "k");
  ASSERT_TRUE(fromAbi.ok()) << fromAbi.status().message();
  EXPECT_EQ(*fromAbi, (std::vector<uint32_t>{8, 4}));
  StatusOr<std::vector<uint32_t>> none = kernelParamBytes({cubin}, {}, "k");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  StatusOr<std::vector<uint32_t>> other = kernelParamBytes({cubin}, bytes, "other");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("kernel 'other': its parameter-size PTX has no entry"),
            std::string::npos)
      << other.status().message();
}

} // namespace
} // namespace ingot::compiler
