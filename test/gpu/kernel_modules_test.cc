// KernelModules on a real GPU: NVRTC-compiled kernels in an artifact, loaded through the cubin
// and through the PTX JIT (then again from the JIT cache), run and compared with the CPU.
// One kernel needs more than 48 KiB of dynamic shared memory (the opt-in attribute). Label
// `gpu`: skips, saying why, without a driver or a device.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "codegen/cuda/NvrtcCompiler.h"
#include "core/artifact/artifact_writer.h"
#include "core/artifact/artifact_reader.h"
#include "runtime/backend/cuda/kernel_modules.h"
#include "testing/test_seed.h"
#include "test/gpu/gpu_fixture.h"
#include "test/gpu/kernel_target.h"

namespace ingot {
namespace {

constexpr const char* kSource = R"(
extern "C" __global__ void axpb(const float* x, float a, float b, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + b;
}
// Reverses each row of n floats through dynamic shared memory (n * 4 bytes per block).
extern "C" __global__ void reverse_rows(const float* x, float* y, int n) {
  extern __shared__ float row[];
  const float* in = x + (size_t)blockIdx.x * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) row[i] = in[i];
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) y[(size_t)blockIdx.x * n + i] = row[n - 1 - i];
}
)";

/// Floats per row of reverse_rows: 64 KiB of shared memory, over the 48 KiB default.
constexpr int kRowFloats = 16384;

class KernelModulesGpuTest : public GpuFixture {
 protected:
  void SetUp() override {
    GpuFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto binaries = codegen::compileCuda(kSource, "plumbing.cu", codegen::defaultCudaTargets());
    ASSERT_TRUE(binaries.ok()) << binaries.status().message();
    ArtifactWriter writer;
    for (const char* name : {"axpb", "reverse_rows"}) {
      Kernel kernel;
      kernel.name = name;
      kernel.blockDim = {256, 1, 1};
      kernel.sharedMemBytes = std::string(name) == "reverse_rows" ? kRowFloats * 4 : 0;
      for (const codegen::CudaBinary& b : *binaries)
        kernel.binaries.push_back(
            {b.target,
             b.isSource ? schema::BinaryFormat::Source
             : b.isPtx  ? schema::BinaryFormat::Ptx
                        : schema::BinaryFormat::Cubin,
             b.data});
      writer.addKernel(kernel);
    }
    writer.setDummyWeights(0);
    StatusOr<std::vector<uint8_t>> bytes = writer.writeToBuffer();
    ASSERT_TRUE(bytes.ok()) << bytes.status().message();
    StatusOr<Artifact> opened = Artifact::openFromMemory(*bytes);
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    artifact_ = std::make_unique<Artifact>(std::move(opened).value());
    char dir[] = "/tmp/ingot-ptx-gpu-test-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    cacheDir_ = dir;
  }
  void TearDown() override {
    if (!cacheDir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(cacheDir_, ec);
    }
    GpuFixture::TearDown();
  }

  /// Runs both kernels from `modules` on fresh random inputs and checks them on the CPU.
  void runAndCheck(const KernelModules& modules, uint32_t seed) {
    CudaDriver& cu = *driver_;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-4, 4);

    // axpb over an odd length.
    StatusOr<LoadedKernel> axpb = modules.find("axpb");
    ASSERT_TRUE(axpb.ok()) << axpb.status().message();
    int n = 100003;
    std::vector<float> x(n), y(n);
    for (float& v : x) v = dist(rng);
    CUdeviceptr dx = alloc(n * 4), dy = alloc(n * 4);
    ASSERT_EQ(cu.memcpyHtoDAsync(dx, x.data(), n * 4, stream_), CUDA_SUCCESS);
    poison(dy, n);
    float a = dist(rng), b = dist(rng);
    void* args[] = {&dx, &a, &b, &dy, &n};
    Status s = cu.check("cuLaunchKernel",
                        cu.launchKernel(axpb->function, (n + axpb->block[0] - 1) / axpb->block[0],
                                        1, 1, axpb->block[0], axpb->block[1], axpb->block[2],
                                        axpb->shared_bytes, stream_, args, nullptr));
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(cu.memcpyDtoHAsync(y.data(), dy, n * 4, stream_), CUDA_SUCCESS);
    sync();
    for (int i = 0; i < n; ++i) {
      double exact = double(a) * x[i] + b;  // an FMA or not: within one rounding
      ASSERT_NEAR(y[i], exact, 4e-7 * std::max(1.0, std::fabs(exact))) << "axpb " << i;
    }

    // reverse_rows with 64 KiB of dynamic shared memory per block.
    StatusOr<LoadedKernel> reverse = modules.find("reverse_rows");
    ASSERT_TRUE(reverse.ok()) << reverse.status().message();
    ASSERT_EQ(reverse->shared_bytes, unsigned(kRowFloats * 4));
    int rows = 5, cols = kRowFloats;
    std::vector<float> in(size_t(rows) * cols), out(in.size());
    for (float& v : in) v = dist(rng);
    CUdeviceptr din = alloc(in.size() * 4), dout = alloc(in.size() * 4);
    ASSERT_EQ(cu.memcpyHtoDAsync(din, in.data(), in.size() * 4, stream_), CUDA_SUCCESS);
    poison(dout, out.size());
    void* rargs[] = {&din, &dout, &cols};
    s = cu.check("cuLaunchKernel",
                 cu.launchKernel(reverse->function, rows, 1, 1, reverse->block[0],
                                 reverse->block[1], reverse->block[2], reverse->shared_bytes,
                                 stream_, rargs, nullptr));
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(cu.memcpyDtoHAsync(out.data(), dout, out.size() * 4, stream_), CUDA_SUCCESS);
    sync();
    for (int r = 0; r < rows; ++r)
      for (int i = 0; i < cols; ++i)
        ASSERT_EQ(out[size_t(r) * cols + i], in[size_t(r) * cols + cols - 1 - i])
            << "reverse_rows row " << r << " column " << i;
  }

  std::unique_ptr<Artifact> artifact_;
  std::string cacheDir_;
};

TEST_F(KernelModulesGpuTest, LoadsTheCubinAndRunsIt) {
  KernelModuleOptions options;
  options.ptx_cache_dir = cacheDir_;
  auto modules = KernelModules::load(*driver_, *artifact_, gpu_, options);
  ASSERT_TRUE(modules.ok()) << modules.status().message();
  const KernelLoadReport& report = (*modules)->report();
  std::cout << "[ gpu ] " << report.gpu << ": cubins " << report.cubins << ", PTX JIT "
            << report.ptx_jit << ", PTX from cache " << report.ptx_from_cache << "\n";
  // Both kernels share one binary per target, so one module serves them.
  EXPECT_EQ(report.cubins + report.ptx_jit + report.ptx_from_cache + report.simt, 1);
  if (gpu_.emulated) {
    EXPECT_EQ(report.simt, 1) << "the emulator loads the source";
  } else if (gpu_.major == 8 || gpu_.major == 9 || gpu_.major == 10 || gpu_.major == 12) {
    EXPECT_EQ(report.cubins, 1) << report.gpu;  // the artifact carries a cubin for these
  }
  runAndCheck(**modules, ingot::testing::testSeed());
}

TEST_F(KernelModulesGpuTest, JitsThePtxThenServesItFromTheCache) {
  if (const char* why = noPtxJit(gpu_)) GTEST_SKIP() << why;
  KernelModuleOptions options;
  options.ptx_cache_dir = cacheDir_;
  options.force_ptx = true;
  const uint32_t seed = ingot::testing::testSeed();
  {
    auto t0 = std::chrono::steady_clock::now();
    auto jitted = KernelModules::load(*driver_, *artifact_, gpu_, options);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_TRUE(jitted.ok()) << jitted.status().message();
    EXPECT_EQ((*jitted)->report().ptx_jit, 1);
    EXPECT_EQ((*jitted)->report().ptx_from_cache, 0);
    EXPECT_EQ((*jitted)->report().cubins, 0);
    std::cout << "[ gpu ] PTX JIT load: " << ms << " ms\n";
    runAndCheck(**jitted, seed);
  }
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(cacheDir_)) {
    ++entries;
    EXPECT_EQ(e.path().extension(), ".cubin") << e.path();
  }
  EXPECT_EQ(entries, 1);
  auto t0 = std::chrono::steady_clock::now();
  auto cached = KernelModules::load(*driver_, *artifact_, gpu_, options);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(cached.ok()) << cached.status().message();
  EXPECT_EQ((*cached)->report().ptx_from_cache, 1);
  EXPECT_EQ((*cached)->report().ptx_jit, 0);
  std::cout << "[ gpu ] PTX cache load: " << ms << " ms\n";
  runAndCheck(**cached, seed + 1);
}

}  // namespace
}  // namespace ingot
