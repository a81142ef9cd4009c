// The quantized GEMV kernels (codegen/cuda/kernels/quant_gemv.cuh) on a GPU against the CPU
// backend's scalar QuantKernels: every entry point, through the device's cubin and the
// compute_80 PTX JIT, on fresh random weights with poisoned outputs (odd N, T = 1, 3, 8, 19,
// 16- and 8-byte code chunks); then the weight bandwidth at N = K = 4096, T = 1, printed next
// to a device-to-device copy. Label `gpu`: skips, saying why, without a driver or a device.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codegen/cuda/NvrtcCompiler.h"
#include "codegen/cuda/QuantGemvTestData.h"
#include "codegen/cuda/QuantKernelsSource.h"
#include "test/gpu/gpu_fixture.h"

namespace ingot {
namespace {

using codegen::QuantGemvKernel;
using quantgemv::QuantGemvParams;
using quantgemv::testing::RandomQuantWeight;

class QuantGemvGpuTest : public GpuFixture, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    GpuFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    const std::string target = GetParam() ? std::string("compute_80")
                                          : "sm_" + std::to_string(gpu_.major) +
                                                std::to_string(gpu_.minor);
    StatusOr<std::vector<codegen::CudaBinary>> bin =
        codegen::compileCuda(codegen::quantGemvSource(), "quant_gemv.cu", {target});
    ASSERT_TRUE(bin.ok()) << bin.status().message();
    std::vector<uint8_t> image = (*bin)[0].data;
    image.push_back(0);
    ASSERT_TRUE(driver_->check("cuModuleLoadData", driver_->moduleLoadData(&module_, image.data())).ok())
        << target;
  }
  void TearDown() override {
    if (module_) driver_->moduleUnload(module_);
    GpuFixture::TearDown();
  }

  CUdeviceptr upload(const void *data, size_t bytes) {
    if (!data || bytes == 0) return 0;
    CUdeviceptr p = alloc(bytes);
    EXPECT_EQ(driver_->memcpyHtoD(p, data, bytes), CUDA_SUCCESS);
    return p;
  }

  /// `w` on the device (codes at the same offset from a 16-byte boundary as on the host).
  QuantMatrix toDevice(const RandomQuantWeight &w) {
    QuantMatrix d = w.m;
    const int64_t codeBytes = w.m.N * w.m.rowBytes();
    const uintptr_t shift = reinterpret_cast<uintptr_t>(w.m.codes) % 16;
    const CUdeviceptr codes = alloc(codeBytes + 16);
    EXPECT_EQ(driver_->memcpyHtoD(codes + shift, w.m.codes, codeBytes), CUDA_SUCCESS);
    d.codes = reinterpret_cast<const uint8_t *>(codes + shift);
    d.scales = reinterpret_cast<const void *>(upload(w.scales.data(), w.scales.size()));
    d.zeros = reinterpret_cast<const void *>(upload(w.zeros.data(), w.zeros.size()));
    d.channel_scales = reinterpret_cast<const float *>(upload(w.channel.data(), w.channel.size() * 4));
    return d;
  }

  CUfunction function(const QuantGemvKernel &k) {
    CUfunction fn = nullptr;
    const std::string name = codegen::quantGemvKernelName(k);
    EXPECT_TRUE(driver_->check("cuModuleGetFunction", driver_->moduleGetFunction(&fn, module_, name.c_str())).ok())
        << name;
    return fn;
  }

  void launch(CUfunction fn, QuantGemvParams p) {
    void *args[] = {&p};
    const unsigned grid = quantgemv::quantGemvGridSize(p.N);
    ASSERT_EQ(driver_->launchKernel(fn, grid, 1, 1, quantgemv::kQuantThreads, 1, 1, 0, stream_,
                                    args, nullptr),
              CUDA_SUCCESS);
  }

  void check(const QuantGemvKernel &k, int64_t N, int64_t K, int64_t block, int64_t T,
             int codeOffset, bool bias, std::mt19937 &rng) {
    const std::string what = codegen::quantGemvKernelName(k) + " N=" + std::to_string(N) +
                             " K=" + std::to_string(K) + " T=" + std::to_string(T) + " codes+" +
                             std::to_string(codeOffset);
    const RandomQuantWeight w = quantgemv::testing::randomQuantWeight(
        rng, static_cast<QuantFormat>(k.format), static_cast<GroupScaleType>(k.scaleType), N, K,
        block, T % 2 == 1, codeOffset);
    const int64_t xStride = K + 4, yStride = N + 1;
    const std::vector<float> x = quantgemv::testing::randomActivations(rng, T, K, xStride);
    std::vector<float> biasV(N);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float &b : biasV) b = normal(rng);
    const QuantMatrix dm = toDevice(w);
    const CUdeviceptr dx = upload(x.data(), x.size() * 4);
    const CUdeviceptr db = bias ? upload(biasV.data(), N * 4) : 0;
    const CUdeviceptr dy = alloc(T * yStride * 4);
    poison(dy, T * yStride);
    const QuantGemvParams p = quantgemv::testing::gemvParams(
        dm, reinterpret_cast<const float *>(dx), xStride, reinterpret_cast<const float *>(db),
        reinterpret_cast<float *>(dy), yStride, T);
    const char *err = quantgemv::checkQuantGemvParams(p, k.format);
    ASSERT_EQ(err, nullptr) << what << ": " << err;
    launch(function(k), p);
    sync();
    std::vector<float> y(T * yStride);
    ASSERT_EQ(driver_->memcpyDtoH(y.data(), dy, y.size() * 4), CUDA_SUCCESS);
    const std::vector<float> ref = quantgemv::testing::cpuQuantLinear(
        w.m, x, xStride, T, bias ? biasV.data() : nullptr, yStride);
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t n = 0; n < N; ++n) {
        const double tol = quantgemv::testing::outputTolerance(w, x, xStride, t, n);
        ASSERT_LE(std::fabs(double(y[t * yStride + n]) - ref[t * yStride + n]), tol)
            << what << " y[" << t << ", " << n << "] = " << y[t * yStride + n] << ", CPU "
            << ref[t * yStride + n];
      }
      ASSERT_TRUE(std::isnan(y[t * yStride + N])) << what << ": wrote past N in row " << t;
    }
  }

  CUmodule module_ = nullptr;
};

int64_t blockOf(const QuantGemvKernel &k, int64_t K) {
  switch (k.format) {
    case quantgemv::Format::kFp8: return K;
    case quantgemv::Format::kNvfp4: return 16;
    case quantgemv::Format::kMxfp4: return 32;
    default: return k.scaleType == quantgemv::ScaleType::kF32 ? 64 : 128;
  }
}

TEST_P(QuantGemvGpuTest, EveryKernelMatchesTheCpuKernels) {
  std::random_device rd;
  const uint32_t seed = rd();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (const QuantGemvKernel &k : codegen::allQuantGemvKernels()) {
    for (int64_t T : {1, 3, 8, 19}) check(k, 301, 1024, blockOf(k, 1024), T, 0, T != 3, rng);
    // 8-byte chunks: 4-bit rows of K = 272 (136 bytes; blocks of 16), or codes shifted by 8.
    if (k.format == quantgemv::Format::kNvfp4 || k.format == quantgemv::Format::kFp8)
      check(k, 77, 272, k.format == quantgemv::Format::kFp8 ? 272 : 16, 5, 0, true, rng);
    check(k, 77, 512, blockOf(k, 512), 2, 8, true, rng);
  }
}

TEST_P(QuantGemvGpuTest, DecodeBandwidthAgainstADeviceCopy) {
  // Measured for the cubin and for the PTX JIT alike: gpu-check.sh fails on any skip.
  std::mt19937 rng(7);
  const int64_t N = 4096, K = 4096;
  // Launches rotate over copies spanning 512 MiB, so the weights stream from DRAM, not from
  // the L2 (50 MiB on an H200) that one 8 MiB matrix would stay in.
  const size_t kSpan = size_t{512} << 20;
  const int reps = 64;
  CUevent start, stop;
  ASSERT_EQ(driver_->eventCreate(&start, 0), CUDA_SUCCESS);
  ASSERT_EQ(driver_->eventCreate(&stop, 0), CUDA_SUCCESS);
  auto time = [&](auto &&body) {
    body(0);  // warm-up
    EXPECT_EQ(driver_->eventRecord(start, stream_), CUDA_SUCCESS);
    for (int i = 0; i < reps; ++i) body(i + 1);
    EXPECT_EQ(driver_->eventRecord(stop, stream_), CUDA_SUCCESS);
    EXPECT_EQ(driver_->eventSynchronize(stop), CUDA_SUCCESS);
    float ms = 0;
    EXPECT_EQ(driver_->eventElapsedTime(&ms, start, stop), CUDA_SUCCESS);
    return ms * 1e-3 / reps;
  };
  const size_t copyBytes = N * K / 2, slots = kSpan / copyBytes;
  const CUdeviceptr span = alloc(kSpan);
  const double copy = time([&](int i) {
    const CUdeviceptr from = span + (i % slots) * copyBytes, to = span + ((i + 1) % slots) * copyBytes;
    ASSERT_EQ(driver_->memcpyDtoDAsync(to, from, copyBytes, stream_), CUDA_SUCCESS);
  });
  std::cout << "[ gpu ] " << gpu_.name << " device copy of " << copyBytes / 1024 << " KiB: "
            << 2.0 * copyBytes / copy / 1e9 << " GB/s (read + write), "
            << copyBytes / copy / 1e9 << " GB/s read\n";
  const std::vector<float> x = quantgemv::testing::randomActivations(rng, 1, K, K);
  const CUdeviceptr dx = upload(x.data(), K * 4), dy = alloc(N * 4);
  for (const QuantGemvKernel &k : codegen::allQuantGemvKernels()) {
    if (k.isInt4() && k.scaleType != quantgemv::ScaleType::kF16) continue;
    const RandomQuantWeight w = quantgemv::testing::randomQuantWeight(
        rng, static_cast<QuantFormat>(k.format), GroupScaleType::kF16, N, K, blockOf(k, K),
        true, 0);
    const size_t copies = std::max<size_t>(2, kSpan / w.m.bytes());
    std::vector<QuantGemvParams> params;
    for (size_t c = 0; c < copies; ++c)
      params.push_back(quantgemv::testing::gemvParams(toDevice(w), reinterpret_cast<const float *>(dx),
                                                      K, nullptr, reinterpret_cast<float *>(dy), N, 1));
    const CUfunction fn = function(k);
    const double s = time([&](int i) { launch(fn, params[i % copies]); });
    std::cout << "[ gpu ] " << codegen::quantGemvKernelName(k) << " T=1 N=K=4096: " << s * 1e6
              << " us, " << w.m.bytes() / s / 1e9 << " GB/s of weight bytes ("
              << w.m.bytes() / 1024 << " KiB, " << copies << " copies)\n";
  }
  driver_->eventDestroy(start);
  driver_->eventDestroy(stop);
}

INSTANTIATE_TEST_SUITE_P(CubinAndPtx, QuantGemvGpuTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool> &i) {
                           return i.param ? std::string("Ptx") : std::string("Cubin");
                         });

}  // namespace
}  // namespace ingot
