// QuantKernelGpuTest: the quantized GEMV/GEMM GPU tests' fixture: the quantized kernels'
// module built for this GPU (cubin, or compute_80 PTX when the parameter is true), random
// quantized weights put on the device, and one random case's device inputs.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codegen/cuda/NvrtcCompiler.h"
#include "test/kernels/quant_gemv_test_data.h"
#include "codegen/cuda/QuantKernelsSource.h"
#include "test/gpu/kernel_target.h"
#include "test/gpu/gpu_fixture.h"

namespace ingot {

/// The group size the tests give kernel `k`'s weights at depth K: K-wide for fp8, the
/// format's own for nvfp4 (16) and mxfp4 (32), and 64 or 128 for int4.
inline int64_t quantBlockOf(const codegen::QuantGemvKernel &k, int64_t K) {
  switch (k.format) {
    case quantgemv::Format::kFp8: return K;
    case quantgemv::Format::kNvfp4: return 16;
    case quantgemv::Format::kMxfp4: return 32;
    default: return k.scaleType == quantgemv::ScaleType::kF32 ? 64 : 128;
  }
}

class QuantKernelGpuTest : public GpuFixture, public ::testing::WithParamInterface<bool> {
 protected:
  /// `sourceName`: the file name NVRTC gives the quantized kernels' source in diagnostics.
  explicit QuantKernelGpuTest(const char *sourceName) : sourceName_(sourceName) {}

  void SetUp() override {
    GpuFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (GetParam() && noPtxJit(gpu_)) GTEST_SKIP() << noPtxJit(gpu_);
    const std::string target = kernelTarget(gpu_, GetParam());
    StatusOr<std::vector<codegen::CudaBinary>> bin =
        codegen::compileCuda(codegen::quantGemvSource(), sourceName_, {target});
    ASSERT_TRUE(bin.ok()) << bin.status().message();
    std::vector<uint8_t> image = (*bin)[0].data;
    image.push_back(0);
    ASSERT_TRUE(driver_->check("cuModuleLoadData",
                               driver_->moduleLoadData(&module_, image.data())).ok())
        << target;
  }
  void TearDown() override {
    if (module_) driver_->moduleUnload(module_);
    GpuFixture::TearDown();
  }

  /// `bytes` from `data` in fresh device memory; 0 for no data.
  CUdeviceptr upload(const void *data, size_t bytes) {
    if (!data || bytes == 0) return 0;
    CUdeviceptr p = alloc(bytes);
    EXPECT_EQ(driver_->memcpyHtoD(p, data, bytes), CUDA_SUCCESS);
    return p;
  }

  /// `w` on the device (codes at the same offset from a 16-byte boundary as on the host).
  QuantMatrix toDevice(const quantgemv::testing::RandomQuantWeight &w) {
    QuantMatrix d = w.m;
    const int64_t codeBytes = w.m.N * w.m.rowBytes();
    const uintptr_t shift = reinterpret_cast<uintptr_t>(w.m.codes) % 16;
    const CUdeviceptr codes = alloc(codeBytes + 16);
    EXPECT_EQ(driver_->memcpyHtoD(codes + shift, w.m.codes, codeBytes), CUDA_SUCCESS);
    d.codes = reinterpret_cast<const uint8_t *>(codes + shift);
    d.scales = reinterpret_cast<const void *>(upload(w.scales.data(), w.scales.size()));
    d.zeros = reinterpret_cast<const void *>(upload(w.zeros.data(), w.zeros.size()));
    d.channel_scales =
        reinterpret_cast<const float *>(upload(w.channel.data(), w.channel.size() * 4));
    return d;
  }

  /// Entry point `name` of the module (null, with a failure, when it has none).
  CUfunction function(const std::string &name) {
    CUfunction fn = nullptr;
    EXPECT_TRUE(driver_->check("cuModuleGetFunction",
                               driver_->moduleGetFunction(&fn, module_, name.c_str())).ok())
        << name;
    return fn;
  }

  /// Launches GEMV `fn` on `p` over the fixture's stream (grid and block as the backend's).
  void launchGemv(CUfunction fn, quantgemv::QuantGemvParams p) {
    void *args[] = {&p};
    ASSERT_EQ(driver_->launchKernel(fn, quantgemv::quantGemvGridSize(p.N), 1, 1,
                                    quantgemv::kQuantThreads, 1, 1, 0, stream_, args, nullptr),
              CUDA_SUCCESS);
  }

  /// One random case of kernel `k`: [N, K] weights (per-channel scales when `perChannel`,
  /// codes `codeOffset` bytes past a 16-byte boundary), T rows of activations with row
  /// stride K + 4, a random bias, and on the device those inputs and an output of row stride
  /// N + 1 poisoned with NaN (bias passed only when `bias`).
  struct DeviceCase {
    quantgemv::testing::RandomQuantWeight w;
    std::vector<float> x, biasV;
    int64_t xStride = 0, yStride = 0;
    CUdeviceptr dy = 0;
    quantgemv::QuantGemvParams p{};
  };
  DeviceCase deviceCase(const codegen::QuantGemvKernel &k, int64_t N, int64_t K, int64_t block,
                        int64_t T, int codeOffset, bool bias, bool perChannel,
                        std::mt19937 &rng) {
    DeviceCase c;
    c.w = quantgemv::testing::randomQuantWeight(
        rng, static_cast<QuantFormat>(k.format), static_cast<GroupScaleType>(k.scaleType), N, K,
        block, perChannel, codeOffset);
    c.xStride = K + 4;
    c.yStride = N + 1;
    c.x = quantgemv::testing::randomActivations(rng, T, K, c.xStride);
    c.biasV.resize(N);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float &b : c.biasV) b = normal(rng);
    const QuantMatrix dm = toDevice(c.w);
    const CUdeviceptr dx = upload(c.x.data(), c.x.size() * 4);
    const CUdeviceptr db = bias ? upload(c.biasV.data(), N * 4) : 0;
    c.dy = alloc(T * c.yStride * 4);
    poison(c.dy, T * c.yStride);
    c.p = quantgemv::testing::gemvParams(
        dm, reinterpret_cast<const float *>(dx), c.xStride, reinterpret_cast<const float *>(db),
        reinterpret_cast<float *>(c.dy), c.yStride, T);
    return c;
  }

  CUmodule module_ = nullptr;

 private:
  const char *sourceName_;
};

}  // namespace ingot
