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
#include "test/kernels/quant_gemv_test_data.h"
#include "codegen/cuda/QuantKernelsSource.h"
#include "testing/test_seed.h"
#include "test/gpu/gpu_fixture.h"
#include "test/gpu/quant_kernel_fixture.h"

namespace ingot {
namespace {

using codegen::QuantGemvKernel;
using quantgemv::QuantGemvParams;
using quantgemv::testing::RandomQuantWeight;

class QuantGemvGpuTest : public QuantKernelGpuTest {
 protected:
  QuantGemvGpuTest() : QuantKernelGpuTest("quant_gemv.cu") {}

  void check(const QuantGemvKernel &k, int64_t N, int64_t K, int64_t block, int64_t T,
             int codeOffset, bool bias, std::mt19937 &rng) {
    const std::string what = codegen::quantGemvKernelName(k) + " N=" + std::to_string(N) +
                             " K=" + std::to_string(K) + " T=" + std::to_string(T) + " codes+" +
                             std::to_string(codeOffset);
    const DeviceCase c = deviceCase(k, N, K, block, T, codeOffset, bias, T % 2 == 1, rng);
    const RandomQuantWeight &w = c.w;
    const std::vector<float> &x = c.x, &biasV = c.biasV;
    const int64_t xStride = c.xStride, yStride = c.yStride;
    const CUdeviceptr dy = c.dy;
    const QuantGemvParams &p = c.p;
    const char *err = quantgemv::checkQuantGemvParams(p, k.format);
    ASSERT_EQ(err, nullptr) << what << ": " << err;
    launchGemv(function(codegen::quantGemvKernelName(k)), p);
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
};

TEST_P(QuantGemvGpuTest, EveryKernelMatchesTheCpuKernels) {
  const uint32_t seed = ingot::testing::testSeed();
  std::mt19937 rng(seed);
  for (const QuantGemvKernel &k : codegen::allQuantGemvKernels()) {
    for (int64_t T : {1, 3, 8, 19}) check(k, 301, 1024, quantBlockOf(k, 1024), T, 0, T != 3, rng);
    // 8-byte chunks: 4-bit rows of K = 272 (136 bytes; blocks of 16), or codes shifted by 8.
    if (k.format == quantgemv::Format::kNvfp4 || k.format == quantgemv::Format::kFp8)
      check(k, 77, 272, k.format == quantgemv::Format::kFp8 ? 272 : 16, 5, 0, true, rng);
    check(k, 77, 512, quantBlockOf(k, 512), 2, 8, true, rng);
  }
}

TEST_P(QuantGemvGpuTest, DecodeBandwidthAgainstADeviceCopy) {
  // Measured for the cubin and for the PTX JIT alike: gpu-check.sh fails on any skip.
  std::mt19937 rng(7);
  const int64_t N = sizeFor<int64_t>(gpu_, 4096, 256), K = N;
  // Launches rotate over copies spanning 512 MiB, so the weights stream from DRAM, not from
  // the L2 (50 MiB on an H200) that one 8 MiB matrix would stay in.
  const size_t kSpan = sizeFor(gpu_, size_t{512} << 20, size_t{1} << 20);
  const int reps = sizeFor(gpu_, 64, 2);
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
            << copyBytes / copy / 1e9 << " GB/s read" << speedNote(gpu_) << "\n";
  const std::vector<float> x = quantgemv::testing::randomActivations(rng, 1, K, K);
  const CUdeviceptr dx = upload(x.data(), K * 4), dy = alloc(N * 4);
  for (const QuantGemvKernel &k : codegen::allQuantGemvKernels()) {
    if (k.isInt4() && k.scaleType != quantgemv::ScaleType::kF16) continue;
    const RandomQuantWeight w = quantgemv::testing::randomQuantWeight(
        rng, static_cast<QuantFormat>(k.format), GroupScaleType::kF16, N, K, quantBlockOf(k, K),
        true, 0);
    const size_t copies = std::max<size_t>(2, kSpan / w.m.bytes());
    std::vector<QuantGemvParams> params;
    for (size_t c = 0; c < copies; ++c)
      params.push_back(quantgemv::testing::gemvParams(toDevice(w), reinterpret_cast<const float *>(dx),
                                                      K, nullptr, reinterpret_cast<float *>(dy), N, 1));
    const CUfunction fn = function(codegen::quantGemvKernelName(k));
    const double s = time([&](int i) { launchGemv(fn, params[i % copies]); });
    std::cout << "[ gpu ] " << codegen::quantGemvKernelName(k) << " T=1 N=K=" << N << ": "
              << s * 1e6 << " us, " << w.m.bytes() / s / 1e9 << " GB/s of weight bytes ("
              << w.m.bytes() / 1024 << " KiB, " << copies << " copies)" << speedNote(gpu_) << "\n";
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
