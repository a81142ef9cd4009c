//===- NvrtcCompilerTest.cpp - every default target compiles, no GPU needed -===//
#include "codegen/cuda/NvrtcCompiler.h"
#include "core/simt/emulator.h"

#include <cstring>
#include <string>

#include <gtest/gtest.h>

namespace ingot::codegen {
namespace {

// Uses bf16 and fp8 headers so the toolkit include path is exercised too.
constexpr const char *kKernel = R"(
#include <cuda_bf16.h>
#include <cuda_fp8.h>
extern "C" __global__ void scale_bf16(const __nv_bfloat16 *x, float s, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    __nv_fp8_e4m3 q(__bfloat162float(x[i]) * s);
    y[i] = float(q);
  }
}
)";

TEST(NvrtcCompilerTest, CompilesEveryDefaultTarget) {
  auto binaries = compileCuda(kKernel, "scale_bf16.cu", defaultCudaTargets());
  ASSERT_TRUE(binaries.ok()) << binaries.status().message();
  ASSERT_EQ(binaries->size(), defaultCudaTargets().size());
  for (const CudaBinary &b : *binaries) {
    ASSERT_GT(b.data.size(), 16u) << b.target;
    if (b.isSource) {
      // The SIMT emulator's image: its magic, then the translation unit as it is.
      EXPECT_EQ(b.target, "simt");
      EXPECT_EQ(std::string(b.data.begin(), b.data.end()),
                std::string(simt::kSimtImageMagic) + kKernel);
    } else if (b.isPtx) {
      std::string ptx(b.data.begin(), b.data.end());
      EXPECT_NE(ptx.find(".target sm_80"), std::string::npos) << ptx.substr(0, 400);
      EXPECT_NE(ptx.find(".entry scale_bf16"), std::string::npos);
    } else {
      // A cubin is an ELF file.
      EXPECT_EQ(std::memcmp(b.data.data(), "\x7f" "ELF", 4), 0) << b.target;
    }
  }
}

TEST(NvrtcCompilerTest, ReportsCompileErrorsWithTheLog) {
  auto binaries = compileCuda("__global__ void k() { undefined_symbol(); }", "bad.cu",
                              {"sm_80"});
  ASSERT_FALSE(binaries.ok());
  EXPECT_NE(binaries.status().message().find("bad.cu"), std::string::npos);
  EXPECT_NE(binaries.status().message().find("undefined_symbol"), std::string::npos);
}

TEST(NvrtcCompilerTest, RejectsUnknownTarget) {
  auto binaries = compileCuda(kKernel, "scale_bf16.cu", {"sm_1"});
  ASSERT_FALSE(binaries.ok());
  EXPECT_NE(binaries.status().message().find("sm_1"), std::string::npos);
}

} // namespace
} // namespace ingot::codegen
