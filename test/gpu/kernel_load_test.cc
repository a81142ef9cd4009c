// One artifact for every GPU: kernels compiled here with NVRTC for every default target
// travel in an artifact; on a GPU the runtime picks the binary the device runs (cubin, else
// generic PTX), loads it through the driver API and gets the CPU's answer. Label `gpu`:
// skips, saying why, where there is no driver or no device.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "codegen/cuda/NvrtcCompiler.h"
#include "core/artifact/artifact_writer.h"
#include "core/artifact/artifact_reader.h"
#include "core/artifact/kernel_binary.h"
#include "runtime/backend/cuda/cuda_driver.h"

namespace ingot {
namespace {

constexpr const char* kSource = R"(
extern "C" __global__ void axpb(const float* x, float a, float b, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + b;
}
)";

/// An in-memory artifact carrying the kernel for every default target.
Artifact artifactWithKernel() {
  auto binaries = codegen::compileCuda(kSource, "axpb.cu", codegen::defaultCudaTargets());
  EXPECT_TRUE(binaries.ok()) << binaries.status().message();
  Kernel kernel;
  kernel.name = "axpb";
  kernel.blockDim = {256, 1, 1};
  for (const codegen::CudaBinary& b : *binaries)
    kernel.binaries.push_back({b.target,
                               b.isSource ? schema::BinaryFormat::Source
                               : b.isPtx  ? schema::BinaryFormat::Ptx
                                          : schema::BinaryFormat::Cubin,
                               b.data});
  ArtifactWriter writer;
  writer.addKernel(kernel);
  writer.setDummyWeights(0);
  StatusOr<std::vector<uint8_t>> bytes = writer.writeToBuffer();
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  StatusOr<Artifact> artifact = Artifact::openFromMemory(*bytes);
  EXPECT_TRUE(artifact.ok()) << artifact.status().message();
  return std::move(artifact).value();
}

TEST(GpuKernelLoad, ArtifactKernelRunsOnThisGpuAndMatchesTheCpu) {
  StatusOr<std::unique_ptr<CudaDriver>> loaded = CudaDriver::load();
  if (!loaded.ok()) GTEST_SKIP() << "no GPU: " << loaded.status().message();
  CudaDriver& cu = **loaded;
  int count = 0;
  if (cu.deviceGetCount(&count) != CUDA_SUCCESS || count == 0) GTEST_SKIP() << "no CUDA device";

  CUdevice device;
  ASSERT_TRUE(cu.check("cuDeviceGet", cu.deviceGet(&device, 0)).ok());
  GpuTarget target;
  char name[256] = {};
  cu.deviceGetName(name, sizeof(name), device);
  target.name = name;
  cu.deviceGetAttribute(&target.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
  cu.deviceGetAttribute(&target.minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
  target.emulated = cu.emulated();

  Artifact artifact = artifactWithKernel();
  const schema::KernelDef* kernel = artifact.manifest().kernels()->Get(0);
  StatusOr<const schema::KernelBinaryDef*> binary = selectKernelBinary(*kernel, target);
  ASSERT_TRUE(binary.ok()) << binary.status().message();
  std::cout << "[ gpu ] " << target.name << " (sm_" << target.major << target.minor
            << "): loading " << (*binary)->target()->str() << "\n";

  CUcontext context;
  ASSERT_TRUE(cu.check("cuDevicePrimaryCtxRetain", cu.primaryCtxRetain(&context, device)).ok());
  ASSERT_TRUE(cu.check("cuCtxSetCurrent", cu.ctxSetCurrent(context)).ok());
  // PTX must be NUL-terminated for the JIT; the artifact stores it as bytes.
  std::vector<uint8_t> image((*binary)->data()->begin(), (*binary)->data()->end());
  image.push_back(0);
  CUmodule module;
  ASSERT_TRUE(cu.check("cuModuleLoadData", cu.moduleLoadData(&module, image.data())).ok());
  CUfunction fn;
  ASSERT_TRUE(cu.check("cuModuleGetFunction", cu.moduleGetFunction(&fn, module, "axpb")).ok());

  const int n = 100003;
  std::vector<float> x(n), y(n, NAN);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-4, 4);
  for (float& v : x) v = dist(rng);
  CUdeviceptr dx, dy;
  ASSERT_TRUE(cu.check("cuMemAlloc", cu.memAlloc(&dx, n * sizeof(float))).ok());
  ASSERT_TRUE(cu.check("cuMemAlloc", cu.memAlloc(&dy, n * sizeof(float))).ok());
  ASSERT_TRUE(cu.check("cuMemcpyHtoD", cu.memcpyHtoD(dx, x.data(), n * sizeof(float))).ok());
  float a = 1.5f, b = -0.25f;
  void* args[] = {&dx, &a, &b, &dy, const_cast<int*>(&n)};
  unsigned blocks = (n + 255) / 256;
  ASSERT_TRUE(cu.check("cuLaunchKernel",
                       cu.launchKernel(fn, blocks, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr))
                  .ok());
  ASSERT_TRUE(cu.check("cuCtxSynchronize", cu.ctxSynchronize()).ok());
  ASSERT_TRUE(cu.check("cuMemcpyDtoH", cu.memcpyDtoH(y.data(), dy, n * sizeof(float))).ok());
  // Contracted to an FMA or not, the result is within one rounding of the exact value.
  for (int i = 0; i < n; ++i) {
    double exact = double(a) * x[i] + b;
    ASSERT_NEAR(y[i], exact, 2e-7 * std::max(1.0, std::fabs(exact))) << i;
  }
  cu.memFree(dx);
  cu.memFree(dy);
  cu.moduleUnload(module);
  cu.primaryCtxRelease(device);
}

TEST(GpuKernelLoad, DriverAbsenceIsAnErrorNotACrash) {
  // On a machine with a driver this just loads it; without one it must say so.
  StatusOr<std::unique_ptr<CudaDriver>> loaded = CudaDriver::load();
  if (loaded.ok()) SUCCEED() << "driver present";
  else EXPECT_NE(loaded.status().message().find("libcuda"), std::string::npos)
      << loaded.status().message();
}

}  // namespace
}  // namespace ingot
