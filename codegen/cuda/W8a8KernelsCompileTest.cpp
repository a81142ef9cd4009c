//===- W8a8KernelsCompileTest.cpp - W8A8 FP8 helper kernels compile for every target ===//
//
// The W8A8 entry points (quantizer, epilogue, quantizing rms_norm / silu_mul) compile with NVRTC for every default target and are in every
// binary, their scale math is correctly rounded PTX under --use_fast_math, and ptxas -v
// finds no register spills and no stack frame on any cubin target.
// Prints the registers per kernel. No GPU needed.
//
//===----------------------------------------------------------------------===//
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codegen/cuda/NvrtcCompiler.h"
#include "codegen/cuda/PtxasReport.h"
#include "codegen/cuda/W8a8KernelsSource.h"

namespace ingot::codegen {
namespace {

TEST(W8a8KernelsCompile, BothKernelsCompileForEveryDefaultTarget) {
  StatusOr<std::vector<CudaBinary>> binaries =
      compileCuda(w8a8Source(), "fp8_w8a8.cu", defaultCudaTargets());
  ASSERT_TRUE(binaries.ok()) << binaries.status().message();
  ASSERT_EQ(binaries->size(), defaultCudaTargets().size());
  for (const CudaBinary &b : *binaries) {
    const std::string text(b.data.begin(), b.data.end());
    for (const std::string &name : w8a8KernelNames())
      EXPECT_NE(text.find(name), std::string::npos) << name << " missing for " << b.target;
  }
}

TEST(W8a8KernelsCompile, ScaleMathIsCorrectlyRoundedDespiteFastMath) {
  // --use_fast_math would make absmax / 448 and 1 / s approximate (div.approx / div.full,
  // rcp.approx), so codes near a rounding midpoint would differ from the host emulation's.
  StatusOr<std::vector<CudaBinary>> ptx = compileCuda(w8a8Source(), "fp8_w8a8.cu", {"compute_80"});
  ASSERT_TRUE(ptx.ok()) << ptx.status().message();
  const std::string text((*ptx)[0].data.begin(), (*ptx)[0].data.end());
  EXPECT_NE(text.find("div.rn."), std::string::npos) << "absmax / 448 is not div.rn";
  EXPECT_NE(text.find("rcp.rn."), std::string::npos) << "1 / s is not rcp.rn";
  for (const char *approx : {"div.approx", "div.full", "rcp.approx"})
    EXPECT_EQ(text.find(approx), std::string::npos) << approx << " in the W8A8 PTX";
}

TEST(W8a8KernelsCompile, ProducersCompileForEveryDefaultTarget) {
  StatusOr<std::vector<CudaBinary>> binaries =
      compileCuda(fp8ProducersSource(), "fp8_producers.cu", defaultCudaTargets());
  ASSERT_TRUE(binaries.ok()) << binaries.status().message();
  ASSERT_EQ(binaries->size(), defaultCudaTargets().size());
  for (const CudaBinary &b : *binaries) {
    const std::string text(b.data.begin(), b.data.end());
    for (const std::string &name : fp8ProducerKernelNames())
      EXPECT_NE(text.find(name), std::string::npos) << name << " missing for " << b.target;
  }
  // The encoder's scale math stays correctly rounded in the producers' unit too.
  StatusOr<std::vector<CudaBinary>> ptx =
      compileCuda(fp8ProducersSource(), "fp8_producers.cu", {"compute_80"});
  ASSERT_TRUE(ptx.ok()) << ptx.status().message();
  const std::string text((*ptx)[0].data.begin(), (*ptx)[0].data.end());
  EXPECT_NE(text.find("div.rn."), std::string::npos) << "absmax / 448 is not div.rn";
  EXPECT_NE(text.find("rcp.rn."), std::string::npos) << "1 / s is not rcp.rn";
}

TEST(W8a8KernelsCompile, NoSpillsOnAnyDefaultTarget) {
  if (std::string(INGOT_PTXAS).empty())
    GTEST_SKIP() << "no ptxas in the CUDA toolkit: the spill check needs it";
  struct Unit { std::string source, file; std::vector<std::string> names; };
  const Unit units[] = {{w8a8Source(), "fp8_w8a8.cu", w8a8KernelNames()},
                        {fp8ProducersSource(), "fp8_producers.cu", fp8ProducerKernelNames()}};
  for (const Unit &unit : units)
  for (const std::string &arch : defaultCudaTargets()) {
    if (arch.rfind("sm_", 0) != 0) continue;  // the PTX target has no ptxas report
    const std::string target = "compute_" + arch.substr(3);
    StatusOr<std::vector<CudaBinary>> ptx = compileCuda(unit.source, unit.file, {target});
    ASSERT_TRUE(ptx.ok()) << ptx.status().message();
    std::string text((*ptx)[0].data.begin(), (*ptx)[0].data.end());
    StatusOr<std::map<std::string, PtxasResources>> usage = ptxasResources(INGOT_PTXAS, text, arch);
    ASSERT_TRUE(usage.ok()) << usage.status().message();
    for (const std::string &name : unit.names) {
      auto it = usage->find(name);
      ASSERT_NE(it, usage->end()) << name << " not in the ptxas log for " << arch;
      const PtxasResources &u = it->second;
      std::printf("[ %-7s ] %-28s %3d registers %4d B stack\n", arch.c_str(), name.c_str(),
                  u.registers, u.stackBytes);
      EXPECT_GT(u.registers, 0) << name;
      EXPECT_EQ(u.spillStores + u.spillLoads, 0) << name << " spills on " << arch;
      EXPECT_EQ(u.stackBytes, 0) << name << " has a stack frame on " << arch;
    }
  }
}

} // namespace
} // namespace ingot::codegen
