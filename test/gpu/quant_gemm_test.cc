// The tensor-core quantized GEMMs (codegen/cuda/kernels/quant_gemm.cuh) on a GPU: every
// entry point, through the device's cubin and the compute_80 PTX JIT, against the CPU
// backend's scalar QuantKernels and a bf16-operand reference, on fresh random weights with
// poisoned outputs (partial tiles in T, N and K, 8-byte aligned codes); then TFLOP/s of each
// format's GEMM and GEMV next to cuBLASLt's bf16 GEMM (gemmBf16) of the same shape in the
// same run, at prefill token counts. Label `gpu`: skips, saying why, without a device.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include "codegen/cuda/NvrtcCompiler.h"
#include "test/kernels/quant_gemm_test_data.h"
#include "codegen/cuda/QuantKernelsSource.h"
#include "runtime/backend/cpu/half_float.h"
#include "runtime/backend/cuda/cublaslt.h"
#include "testing/test_seed.h"
#include "test/gpu/gpu_fixture.h"
#include "test/gpu/quant_kernel_fixture.h"

namespace ingot {
namespace {

using codegen::QuantGemvKernel;
using quantgemv::QuantGemvParams;
using quantgemv::testing::RandomQuantWeight;

class QuantGemmGpuTest : public QuantKernelGpuTest {
 protected:
  QuantGemmGpuTest() : QuantKernelGpuTest("quant_gemm.cu") {}

  void launchGemm(CUfunction fn, QuantGemvParams p) {
    void *args[] = {&p};
    ASSERT_EQ(driver_->launchKernel(fn, quantgemm::quantGemmGridX(p.N),
                                    quantgemm::quantGemmGridY(p.T), 1, quantgemm::kGemmThreads,
                                    1, 1, 0, stream_, args, nullptr),
              CUDA_SUCCESS);
  }

  void check(const QuantGemvKernel &k, int64_t N, int64_t K, int64_t block, int64_t T,
             int codeOffset, bool bias, std::mt19937 &rng) {
    const std::string what = codegen::quantGemmKernelName(k) + " N=" + std::to_string(N) +
                             " K=" + std::to_string(K) + " T=" + std::to_string(T) + " codes+" +
                             std::to_string(codeOffset);
    const DeviceCase c = deviceCase(k, N, K, block, T, codeOffset, bias, T % 2 == 0, rng);
    const RandomQuantWeight &w = c.w;
    const std::vector<float> &x = c.x, &biasV = c.biasV;
    const int64_t xStride = c.xStride, yStride = c.yStride;
    const CUdeviceptr dy = c.dy;
    const QuantGemvParams &p = c.p;
    const char *err = quantgemv::checkQuantGemvParams(p, k.format);
    ASSERT_EQ(err, nullptr) << what << ": " << err;
    launchGemm(function(codegen::quantGemmKernelName(k)), p);
    sync();
    std::vector<float> y(T * yStride);
    ASSERT_EQ(driver_->memcpyDtoH(y.data(), dy, y.size() * 4), CUDA_SUCCESS);
    const std::vector<float> cpu = quantgemv::testing::cpuQuantLinear(
        w.m, x, xStride, T, bias ? biasV.data() : nullptr, yStride);
    // The bf16-operand reference from the host's parameters (same weights, host pointers).
    const QuantGemvParams hp = quantgemv::testing::gemvParams(
        w.m, x.data(), xStride, bias ? biasV.data() : nullptr, nullptr, yStride, T);
    std::vector<double> mag;
    const std::vector<float> wb = quantgemm::testing::bf16Weights(hp, k.format, k.scaleType);
    const std::vector<double> ref = quantgemm::testing::bf16Reference(hp, wb, &mag);
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t n = 0; n < N; ++n) {
        const float got = y[t * yStride + n];
        // Tensor-core f32 accumulation need not round like IEEE fma chains: 1e-4 of sum |w x|
        // (one wrong weight of K >= 208 moves an output by about 1/K of it).
        ASSERT_LE(std::fabs(got - ref[t * N + n]), 1e-4 * mag[t * N + n] + 1e-5)
            << what << " y[" << t << ", " << n << "] = " << got << ", bf16 reference "
            << ref[t * N + n];
        ASSERT_LE(std::fabs(double(got) - cpu[t * yStride + n]),
                  quantgemm::testing::cpuTolerance(w, x, xStride, t, n))
            << what << " y[" << t << ", " << n << "] = " << got << ", CPU " << cpu[t * yStride + n];
      }
      ASSERT_TRUE(std::isnan(y[t * yStride + N])) << what << ": wrote past N in row " << t;
    }
  }
};

TEST_P(QuantGemmGpuTest, EveryKernelMatchesTheCpuKernelsWithPartialTiles) {
  const uint32_t seed = ingot::testing::testSeed();
  std::mt19937 rng(seed);
  for (const QuantGemvKernel &k : codegen::allQuantGemvKernels()) {
    check(k, 301, 1024, quantBlockOf(k, 1024), 70, 0, true, rng);   // partial T and N tiles
    check(k, 128, 512, quantBlockOf(k, 512), 64, 8, false, rng);    // whole tiles, 8-aligned codes
    check(k, 77, 512, quantBlockOf(k, 512), 200, 0, true, rng);     // four token tiles
    // A half-full last K step: blocks of 16 (nvfp4, fp8's K-wide block) with K = 208.
    if (k.format == quantgemv::Format::kNvfp4 || k.format == quantgemv::Format::kFp8)
      check(k, 190, 208, k.format == quantgemv::Format::kFp8 ? 208 : 16, 33, 0, true, rng);
  }
}

// The mutation test of the SIMT emulator's tensor cores: with a deliberately wrong wmma
// fragment layout the comparison above must fail for every format (on a GPU there is nothing
// to mutate).
TEST_P(QuantGemmGpuTest, AScrambledTensorCoreLayoutFailsTheComparison) {
  if (!gpu_.emulated) GTEST_SKIP() << "a mutation of the SIMT emulator's tensor cores";
  ScrambledTensorCores scrambled;
  ASSERT_TRUE(scrambled.ok());
  std::mt19937 rng(ingot::testing::testSeed());
  for (const QuantGemvKernel &k : codegen::allQuantGemvKernels()) {
    ::testing::TestPartResultArray failures;
    {
      ::testing::ScopedFakeTestPartResultReporter reporter(
          ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
      check(k, 128, 512, quantBlockOf(k, 512), 64, 8, false, rng);
    }
    EXPECT_GT(failures.size(), 0) << codegen::quantGemmKernelName(k)
                                  << ": the comparison did not notice a scrambled layout";
  }
}

TEST_P(QuantGemmGpuTest, PrefillTflopsAgainstCublasBf16) {
  const char *image = GetParam() ? "compute_80 PTX JIT" : "cubin";  // both measured: no skip
  StatusOr<std::unique_ptr<CublasLt>> lt = CublasLt::load();
  ASSERT_TRUE(lt.ok()) << "no cuBLASLt for the reference: " << lt.status().message();
  const CUdeviceptr workspace = alloc(CublasLt::kWorkspaceBytes);
  std::mt19937 rng(11);
  const int64_t N = sizeFor<int64_t>(gpu_, 4096, 256), K = N;
  const std::vector<int64_t> rows = sizeFor<std::vector<int64_t>>(gpu_, {16, 32, 64, 128, 512}, {16, 64});
  const int64_t maxT = rows.back();
  const int reps = sizeFor(gpu_, 20, 1);
  CUevent start, stop;
  ASSERT_EQ(driver_->eventCreate(&start, 0), CUDA_SUCCESS);
  ASSERT_EQ(driver_->eventCreate(&stop, 0), CUDA_SUCCESS);
  auto time = [&](auto &&body) {
    body();  // warm-up
    EXPECT_EQ(driver_->eventRecord(start, stream_), CUDA_SUCCESS);
    for (int i = 0; i < reps; ++i) body();
    EXPECT_EQ(driver_->eventRecord(stop, stream_), CUDA_SUCCESS);
    EXPECT_EQ(driver_->eventSynchronize(stop), CUDA_SUCCESS);
    float ms = 0;
    EXPECT_EQ(driver_->eventElapsedTime(&ms, start, stop), CUDA_SUCCESS);
    return ms * 1e-3 / reps;
  };
  const std::vector<float> x = quantgemv::testing::randomActivations(rng, maxT, K, K);
  std::vector<uint16_t> xb(x.size()), wb(N * K);
  for (size_t i = 0; i < x.size(); ++i) xb[i] = f32ToBf16(x[i]);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (uint16_t &v : wb) v = f32ToBf16(normal(rng));
  const CUdeviceptr dx = upload(x.data(), x.size() * 4), dxb = upload(xb.data(), xb.size() * 2),
                    dwb = upload(wb.data(), wb.size() * 2), dy = alloc(maxT * N * 4);
  std::printf("[ gpu ] %s, %s, N = K = %lld: TFLOP/s (2 T N K / time)%s\n", gpu_.name.c_str(),
              image, static_cast<long long>(N), speedNote(gpu_));
  std::printf("[ gpu ] %-34s %5s %10s %10s %10s %8s\n", "kernel", "T", "gemm", "gemv",
              "cublas", "gemm/cb");
  for (const QuantGemvKernel &k : codegen::allQuantGemvKernels()) {
    if (k.isInt4() && k.scaleType != quantgemv::ScaleType::kF16) continue;
    const RandomQuantWeight w = quantgemv::testing::randomQuantWeight(
        rng, static_cast<QuantFormat>(k.format), GroupScaleType::kF16, N, K, quantBlockOf(k, K), true,
        0);
    const QuantMatrix dm = toDevice(w);
    const CUfunction gemm = function(codegen::quantGemmKernelName(k));
    const CUfunction gemv = function(codegen::quantGemvKernelName(k));
    for (int64_t T : rows) {
      const QuantGemvParams p = quantgemv::testing::gemvParams(
          dm, reinterpret_cast<const float *>(dx), K, nullptr, reinterpret_cast<float *>(dy), N, T);
      const double tGemm = time([&] { launchGemm(gemm, p); });
      const double tGemv = time([&] { launchGemv(gemv, p); });
      const double tBlas = time([&] {
        Status s = (*lt)->gemmBf16(stream_, dxb, dwb, dy, T, N, K, workspace);
        ASSERT_TRUE(s.ok()) << s.message();
      });
      const double flop = 2.0 * T * N * K;
      std::printf("[ gpu ] %-34s %5lld %10.2f %10.2f %10.2f %8.2f\n",
                  codegen::quantGemmKernelName(k).c_str(), static_cast<long long>(T),
                  flop / tGemm / 1e12, flop / tGemv / 1e12, flop / tBlas / 1e12, tBlas / tGemm);
      EXPECT_GT(tGemm, 0.0);
    }
  }
  driver_->eventDestroy(start);
  driver_->eventDestroy(stop);
}

INSTANTIATE_TEST_SUITE_P(CubinAndPtx, QuantGemmGpuTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool> &i) {
                           return i.param ? std::string("Ptx") : std::string("Cubin");
                         });

}  // namespace
}  // namespace ingot
