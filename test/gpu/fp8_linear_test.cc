// The W8A8 FP8 linear on a GPU (sm_90+): the activation quantizer, CublasLt::gemmFp8 and the
// scale epilogue as the CUDA backend chains them (runtime/backend/cuda/cuda_fp8_linear.cc),
// against their float64 host emulation and the CPU's weight-only fp8 linear; the quantizing
// rms_norm / silu_mul against the quantizer on their own outputs (bit for bit); then TFLOP/s
// of W8A8 beside gemmBf16 of the same shape, and W8A8 against the fp8 GEMV per row count
// (the figures behind CudaBackendOptions::fp8_w8a8_min_rows). Label `gpu`: skips, saying
// why, without a driver, a device, cuBLASLt, or on a GPU older than sm_90.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codegen/cuda/NvrtcCompiler.h"
#include "test/kernels/quant_gemv_test_data.h"
#include "codegen/cuda/QuantKernelsSource.h"
#include "codegen/cuda/W8a8KernelsSource.h"
#include "test/kernels/w8a8_test_data.h"
#include "codegen/cuda/kernels/fp8_producers.cuh"
#include "runtime/backend/cuda/cublaslt.h"
#include "testing/test_seed.h"
#include "test/gpu/kernel_target.h"
#include "test/gpu/gpu_fixture.h"

namespace ingot {
namespace {

using quantgemv::testing::RandomQuantWeight;

int64_t roundUp16(int64_t v) { return (v + 15) / 16 * 16; }

/// An fp8 weight on the device: codes padded to [Np, Kp], channel scales, bias.
struct DeviceFp8Weight {
  int64_t N = 0, K = 0, Np = 0, Kp = 0;
  CUdeviceptr codes = 0, channel = 0, bias = 0;
  float global = 1.0f;
};

class Fp8LinearGpuTest : public GpuFixture {
 protected:
  void SetUp() override {
    GpuFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (gpu_.major < 9)
      GTEST_SKIP() << gpu_.name << " is sm_" << gpu_.major << gpu_.minor
                   << ": W8A8 through cuBLASLt FP8 runs on sm_90 and newer only";
    StatusOr<std::unique_ptr<CublasLt>> lt = CublasLt::load();
    if (!lt.ok()) GTEST_SKIP() << "no cuBLASLt: " << lt.status().message();
    lt_ = std::move(lt).value();
    const std::string target = kernelTarget(gpu_);
    for (auto [source, module] : {std::pair{codegen::w8a8Source(), &w8a8Module_},
                                  std::pair{codegen::quantGemvSource({{quantgemv::Format::kFp8}}),
                                            &gemvModule_}}) {
      StatusOr<std::vector<codegen::CudaBinary>> bin = codegen::compileCuda(source, "k.cu", {target});
      ASSERT_TRUE(bin.ok()) << bin.status().message();
      std::vector<uint8_t> image = (*bin)[0].data;
      image.push_back(0);
      ASSERT_TRUE(driver_->check("cuModuleLoadData", driver_->moduleLoadData(module, image.data())).ok());
    }
    auto fn = [&](CUmodule m, const char* name) {
      CUfunction f = nullptr;
      EXPECT_EQ(driver_->moduleGetFunction(&f, m, name), CUDA_SUCCESS) << name;
      return f;
    };
    quantize_ = fn(w8a8Module_, codegen::kFp8QuantizeRowsKernel);
    epilogue_ = fn(w8a8Module_, codegen::kFp8ScaleEpilogueKernel);
    gemv_ = fn(gemvModule_, "ingot_quant_gemv_fp8");
    workspace_ = alloc(CublasLt::kWorkspaceBytes);
    std::cout << "[ gpu ] " << gpu_.name << ", " << lt_->library() << " " << lt_->version() << "\n";
  }
  void TearDown() override {
    if (driver_ && stream_) driver_->streamSynchronize(stream_);
    lt_.reset();
    if (w8a8Module_) driver_->moduleUnload(w8a8Module_);
    if (gemvModule_) driver_->moduleUnload(gemvModule_);
    GpuFixture::TearDown();
  }

  CUdeviceptr upload(const void* data, size_t bytes) {
    CUdeviceptr p = alloc(std::max<size_t>(bytes, 16));
    if (bytes) EXPECT_EQ(driver_->memcpyHtoD(p, data, bytes), CUDA_SUCCESS);
    return p;
  }
  DeviceFp8Weight toDevice(const RandomQuantWeight& w, const std::vector<float>* bias) {
    DeviceFp8Weight d;
    d.N = w.m.N;
    d.K = w.m.K;
    d.Np = roundUp16(d.N);
    d.Kp = roundUp16(d.K);
    std::vector<uint8_t> padded(d.Np * d.Kp, 0);
    for (int64_t n = 0; n < d.N; ++n)
      std::memcpy(&padded[n * d.Kp], w.m.codes + n * d.K, d.K);
    d.codes = upload(padded.data(), padded.size());
    d.channel = w.m.channel_scales ? upload(w.m.channel_scales, d.N * 4) : 0;
    d.bias = bias ? upload(bias->data(), d.N * 4) : 0;
    d.global = w.m.global_scale;
    return d;
  }
  /// The backend's W8A8 chain: x [T, K] f32 -> codes + scales -> FP8 GEMM -> y [T, N].
  /// Scratch: xq [T, Kp] bytes, scales [T], acc [T, Np] f32 (acc = y when Np == N).
  void w8a8(const DeviceFp8Weight& w, CUdeviceptr x, CUdeviceptr y, int64_t T, CUdeviceptr xq,
            CUdeviceptr scales, CUdeviceptr accScratch) {
    w8a8::QuantizeRowsParams q{reinterpret_cast<const float*>(x),
                               reinterpret_cast<unsigned char*>(xq),
                               reinterpret_cast<float*>(scales), static_cast<long>(w.K),
                               static_cast<long>(w.Kp), static_cast<int>(w.K), static_cast<int>(T)};
    void* qa[] = {&q};
    ASSERT_EQ(driver_->launchKernel(quantize_, static_cast<unsigned>(T), 1, 1, w8a8::kW8a8Threads, 1,
                                    1, 0, stream_, qa, nullptr),
              CUDA_SUCCESS);
    const CUdeviceptr acc = w.Np == w.N ? y : accScratch;
    Status s = lt_->gemmFp8(stream_, xq, w.codes, acc, T, w.Np, w.Kp, workspace_);
    ASSERT_TRUE(s.ok()) << s.message();
    w8a8::ScaleEpilogueParams e{reinterpret_cast<const float*>(acc),
                                reinterpret_cast<const float*>(scales),
                                reinterpret_cast<const float*>(w.channel),
                                reinterpret_cast<const float*>(w.bias),
                                reinterpret_cast<float*>(y),
                                static_cast<long>(w.Np),
                                static_cast<long>(w.N),
                                static_cast<int>(w.N),
                                static_cast<int>(T),
                                w.global};
    void* ea[] = {&e};
    ASSERT_EQ(driver_->launchKernel(epilogue_, w8a8::epilogueGridSize(T * w.N), 1, 1,
                                    w8a8::kW8a8Threads, 1, 1, 0, stream_, ea, nullptr),
              CUDA_SUCCESS);
  }
  /// Seconds per call of `body` (a warm-up, then `reps` calls between two events).
  template <typename F>
  double time(int reps, F&& body) {
    CUevent start, stop;
    EXPECT_EQ(driver_->eventCreate(&start, 0), CUDA_SUCCESS);
    EXPECT_EQ(driver_->eventCreate(&stop, 0), CUDA_SUCCESS);
    body(0);
    EXPECT_EQ(driver_->eventRecord(start, stream_), CUDA_SUCCESS);
    for (int i = 0; i < reps; ++i) body(i + 1);
    EXPECT_EQ(driver_->eventRecord(stop, stream_), CUDA_SUCCESS);
    EXPECT_EQ(driver_->eventSynchronize(stop), CUDA_SUCCESS);
    float ms = 0;
    EXPECT_EQ(driver_->eventElapsedTime(&ms, start, stop), CUDA_SUCCESS);
    driver_->eventDestroy(start);
    driver_->eventDestroy(stop);
    return ms * 1e-3 / reps;
  }

  std::unique_ptr<CublasLt> lt_;
  CUmodule w8a8Module_ = nullptr, gemvModule_ = nullptr;
  CUfunction quantize_ = nullptr, epilogue_ = nullptr, gemv_ = nullptr;
  CUdeviceptr workspace_ = 0;
};

/// The quantizing rms_norm / silu_mul (kernels/fp8_producers.cuh) against
/// ingot_fp8_quantize_rows run on their own f32 outputs: codes and scales bit for bit.
TEST_F(Fp8LinearGpuTest, ProducersWriteTheQuantizersCodesBitForBit) {
  const uint32_t seed = ingot::testing::testSeed();
  std::mt19937 rng(seed);
  const std::string target = kernelTarget(gpu_);
  StatusOr<std::vector<codegen::CudaBinary>> bin =
      codegen::compileCuda(codegen::fp8ProducersSource(), "p.cu", {target});
  ASSERT_TRUE(bin.ok()) << bin.status().message();
  std::vector<uint8_t> image = (*bin)[0].data;
  image.push_back(0);
  CUmodule module = nullptr;
  ASSERT_EQ(driver_->moduleLoadData(&module, image.data()), CUDA_SUCCESS);
  CUfunction rms = nullptr, silu = nullptr;
  ASSERT_EQ(driver_->moduleGetFunction(&rms, module, codegen::kFp8RmsNormQuantKernel), CUDA_SUCCESS);
  ASSERT_EQ(driver_->moduleGetFunction(&silu, module, codegen::kFp8SiluMulQuantKernel), CUDA_SUCCESS);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  size_t rowsChecked = 0;
  for (int width : {576, 1536, 120, 4099}) {
    const int T = 37;
    const long stride = roundUp16(width);
    std::vector<float> a(T * width), b(T * width), gamma(width);
    for (float& v : a) v = 3.0f * normal(rng);
    for (float& v : b) v = normal(rng);
    for (float& v : gamma) v = 0.5f * normal(rng);
    for (int d = 0; d < width; ++d) {  // a tiny row and an all-zero row
      a[3 * width + d] *= 1e-20f;
      b[3 * width + d] *= 1e-19f;
      a[5 * width + d] = 0.0f;
    }
    const CUdeviceptr da = upload(a.data(), a.size() * 4), db = upload(b.data(), b.size() * 4),
                      dg = upload(gamma.data(), width * 4), out = alloc(T * width * 4),
                      codes = alloc(T * stride), scales = alloc(T * 4),
                      refCodes = alloc(T * stride), refScales = alloc(T * 4);
    for (int kind = 0; kind < 2; ++kind) {
      for (CUdeviceptr p : {codes, refCodes})
        ASSERT_EQ(driver_->memsetD8Async(p, 0xAB, T * stride, stream_), CUDA_SUCCESS);
      for (CUdeviceptr p : {scales, refScales})
        ASSERT_EQ(driver_->memsetD32Async(p, 0x7fc00000u, T, stream_), CUDA_SUCCESS);
      w8a8::RmsNormQuantParams rp{reinterpret_cast<const float*>(da), reinterpret_cast<const float*>(dg),
                                  reinterpret_cast<float*>(out), reinterpret_cast<unsigned char*>(codes),
                                  reinterpret_cast<float*>(scales), stride, width, T, 1e-5f};
      w8a8::SiluMulQuantParams sp{reinterpret_cast<const float*>(da), reinterpret_cast<const float*>(db),
                                  reinterpret_cast<float*>(out), reinterpret_cast<unsigned char*>(codes),
                                  reinterpret_cast<float*>(scales), stride, width, T};
      void* args[] = {kind == 0 ? static_cast<void*>(&rp) : static_cast<void*>(&sp)};
      ASSERT_EQ(driver_->launchKernel(kind == 0 ? rms : silu, T, 1, 1, w8a8::kW8a8Threads, 1, 1, 0,
                                      stream_, args, nullptr),
                CUDA_SUCCESS);
      w8a8::QuantizeRowsParams q{reinterpret_cast<const float*>(out),
                                 reinterpret_cast<unsigned char*>(refCodes),
                                 reinterpret_cast<float*>(refScales), width, stride, width, T};
      void* qa[] = {&q};
      ASSERT_EQ(driver_->launchKernel(quantize_, T, 1, 1, w8a8::kW8a8Threads, 1, 1, 0, stream_, qa,
                                      nullptr),
                CUDA_SUCCESS);
      ASSERT_EQ(driver_->streamSynchronize(stream_), CUDA_SUCCESS);
      std::vector<uint8_t> got(T * stride), want(T * stride);
      std::vector<uint32_t> gotS(T), wantS(T);
      ASSERT_EQ(driver_->memcpyDtoH(got.data(), codes, got.size()), CUDA_SUCCESS);
      ASSERT_EQ(driver_->memcpyDtoH(want.data(), refCodes, want.size()), CUDA_SUCCESS);
      ASSERT_EQ(driver_->memcpyDtoH(gotS.data(), scales, T * 4), CUDA_SUCCESS);
      ASSERT_EQ(driver_->memcpyDtoH(wantS.data(), refScales, T * 4), CUDA_SUCCESS);
      const char* what = kind == 0 ? "rms_norm" : "silu_mul";
      for (int t = 0; t < T; ++t) {
        ASSERT_EQ(gotS[t], wantS[t]) << what << " width " << width << " row " << t << " scale";
        for (long c = 0; c < stride; ++c)
          ASSERT_EQ(got[t * stride + c], want[t * stride + c])
              << what << " width " << width << " row " << t << " column " << c;
      }
      rowsChecked += T;
    }
  }
  driver_->moduleUnload(module);
  std::cout << "[ gpu ] W8A8 producers: " << rowsChecked
            << " rms_norm / silu_mul rows, codes and scales bit-identical to the quantizer\n";
}

TEST_F(Fp8LinearGpuTest, MatchesItsHostEmulationAndStaysNearTheCpuWeightOnlyLinear) {
  const uint32_t seed = ingot::testing::testSeed();
  std::mt19937 rng(seed);
  struct Shape { int64_t T, N, K; bool perChannel, bias; };
  // SmolLM2-135M's q (576 x 576) and gate (1536 x 576); an 8B-sized down projection; N and
  // K that need padding (200 -> 208, 120 -> 128); a per-tensor scale.
  // (On the SIMT emulator the 8B-sized one is left out: its 470 MFLOP run on the CPU.)
  std::vector<Shape> shapes = {Shape{33, 576, 576, true, false}, Shape{256, 1536, 576, true, true},
                               Shape{37, 200, 120, true, true}, Shape{40, 96, 64, false, false}};
  if (!gpu_.emulated) shapes.push_back(Shape{8, 4096, 14336, true, false});
  for (const Shape& sh : shapes) {
    const std::string what = "T=" + std::to_string(sh.T) + " N=" + std::to_string(sh.N) +
                             " K=" + std::to_string(sh.K);
    const RandomQuantWeight w = quantgemv::testing::randomQuantWeight(
        rng, QuantFormat::kFp8, GroupScaleType::kF32, sh.N, sh.K, sh.K, sh.perChannel, 0);
    std::vector<float> x = quantgemv::testing::randomActivations(rng, sh.T, sh.K, sh.K);
    // Rows of very different sizes and a few outlier channels, as real activations have.
    std::lognormal_distribution<float> rowSize(0.0f, 1.5f);
    for (int64_t t = 0; t < sh.T; ++t) {
      const float r = rowSize(rng);
      for (int64_t k = 0; k < sh.K; ++k) x[t * sh.K + k] *= r * (k % 97 == 5 ? 20.0f : 1.0f);
    }
    std::vector<float> bias(sh.N);
    for (float& b : bias) b = std::normal_distribution<float>(0.0f, 1.0f)(rng);
    const DeviceFp8Weight d = toDevice(w, sh.bias ? &bias : nullptr);
    const CUdeviceptr dx = upload(x.data(), x.size() * 4), dy = alloc(sh.T * sh.N * 4);
    const CUdeviceptr xq = alloc(sh.T * d.Kp), scales = alloc(sh.T * 4),
                      acc = alloc(sh.T * d.Np * 4);
    poison(dy, sh.T * sh.N);
    poison(acc, sh.T * d.Np);
    w8a8(d, dx, dy, sh.T, xq, scales, acc);
    sync();
    std::vector<float> y(sh.T * sh.N);
    ASSERT_EQ(driver_->memcpyDtoH(y.data(), dy, y.size() * 4), CUDA_SUCCESS);
    std::vector<double> absTerms;
    const float* b = sh.bias ? bias.data() : nullptr;
    const std::vector<double> emu =
        w8a8::testing::emulateW8a8Linear(w.m, x, sh.K, sh.T, b, sh.N, &absTerms);
    const std::vector<float> cpu = quantgemv::testing::cpuQuantLinear(w.m, x, sh.K, sh.T, b, sh.N);
    double err2 = 0, ref2 = 0, worst = 0;
    for (int64_t i = 0; i < sh.T * sh.N; ++i) {
      // f32 accumulation of exact E4M3 products (cuBLASLt promotes its FP8 partial sums to
      // f32, fast accumulation off): well inside 1e-4 of the sum of |terms|.
      ASSERT_LE(std::fabs(y[i] - emu[i]), 1e-4 * absTerms[i] + 1e-5)
          << what << " y[" << i / sh.N << ", " << i % sh.N << "] = " << y[i] << ", emulation "
          << emu[i];
      const double d2 = double(y[i]) - cpu[i];
      err2 += d2 * d2;
      ref2 += double(cpu[i]) * cpu[i];
      worst = std::max(worst, std::fabs(d2) / (std::fabs(cpu[i]) + 1e-3));
    }
    const double rel = std::sqrt(err2 / ref2);
    std::cout << "[ gpu ] W8A8 " << what << ": relative RMS error vs the CPU weight-only fp8 "
              << "linear " << rel << "\n";
    EXPECT_LT(rel, 0.05) << what;
  }
}

TEST_F(Fp8LinearGpuTest, ThroughputBesideBf16AndTheFp8Gemv) {
  std::mt19937 rng(11);
  // Prefill-shaped: W8A8 (quantizer + GEMM + epilogue) and gemmFp8 alone against gemmBf16.
  struct Shape { int64_t T, N, K; };
  const std::vector<Shape> shapes = sizeFor<std::vector<Shape>>(
      gpu_, {Shape{2048, 4096, 4096}, Shape{2048, 14336, 4096}, Shape{512, 4096, 4096}},
      {Shape{64, 256, 256}});
  for (const Shape& sh : shapes) {
    const RandomQuantWeight w = quantgemv::testing::randomQuantWeight(
        rng, QuantFormat::kFp8, GroupScaleType::kF32, sh.N, sh.K, sh.K, true, 0);
    const DeviceFp8Weight d = toDevice(w, nullptr);
    const std::vector<float> x = quantgemv::testing::randomActivations(rng, sh.T, sh.K, sh.K);
    const CUdeviceptr dx = upload(x.data(), x.size() * 4), dy = alloc(sh.T * sh.N * 4);
    const CUdeviceptr xq = alloc(sh.T * d.Kp), scales = alloc(sh.T * 4), acc = alloc(16);
    const CUdeviceptr xb = alloc(sh.T * sh.K * 2), wb = alloc(sh.N * sh.K * 2);
    ASSERT_EQ(driver_->memsetD8Async(xb, 0x3c, sh.T * sh.K * 2, stream_), CUDA_SUCCESS);
    ASSERT_EQ(driver_->memsetD8Async(wb, 0x3c, sh.N * sh.K * 2, stream_), CUDA_SUCCESS);
    const int reps = sizeFor(gpu_, 20, 1);
    const double flops = 2.0 * sh.T * sh.N * sh.K;
    const double full = time(reps, [&](int) { w8a8(d, dx, dy, sh.T, xq, scales, acc); });
    const double gemm = time(reps, [&](int) {
      ASSERT_TRUE(lt_->gemmFp8(stream_, xq, d.codes, dy, sh.T, d.Np, d.Kp, workspace_).ok());
    });
    const double bf16 = time(reps, [&](int) {
      ASSERT_TRUE(lt_->gemmBf16(stream_, xb, wb, dy, sh.T, sh.N, sh.K, workspace_).ok());
    });
    std::cout << "[ gpu ] W8A8 T=" << sh.T << " N=" << sh.N << " K=" << sh.K << ": "
              << flops / full / 1e12 << " TFLOP/s with quantizer+epilogue, gemmFp8 "
              << flops / gemm / 1e12 << " TFLOP/s, gemmBf16 " << flops / bf16 / 1e12
              << " TFLOP/s, W8A8/bf16 " << bf16 / full << "x" << speedNote(gpu_) << "\n";
    if (!gpu_.emulated) EXPECT_GT(flops / gemm / 1e12, 1.0) << "gemmFp8 implausibly slow";
  }
  // Decode-shaped: the fp8 GEMV against W8A8 per row count, weights rotated over copies
  // spanning 256 MiB so both stream them from DRAM.
  const int64_t N = sizeFor<int64_t>(gpu_, 4096, 256), K = N;
  const RandomQuantWeight w = quantgemv::testing::randomQuantWeight(
      rng, QuantFormat::kFp8, GroupScaleType::kF32, N, K, K, true, 0);
  const int copies = sizeFor(gpu_, 16, 2);
  std::vector<DeviceFp8Weight> ws;
  for (int c = 0; c < copies; ++c) ws.push_back(toDevice(w, nullptr));
  const std::vector<int64_t> rowCounts =
      sizeFor<std::vector<int64_t>>(gpu_, {1, 4, 8, 16, 32, 64, 128, 256}, {1, 16});
  const int64_t maxT = rowCounts.back();
  const std::vector<float> x = quantgemv::testing::randomActivations(rng, maxT, K, K);
  const CUdeviceptr dx = upload(x.data(), x.size() * 4), dy = alloc(maxT * N * 4);
  const CUdeviceptr xq = alloc(maxT * K), scales = alloc(maxT * 4), acc = alloc(16);
  const int reps = sizeFor(gpu_, 32, 1);
  for (int64_t T : rowCounts) {
    const double gemv = time(reps, [&](int i) {
      const DeviceFp8Weight& d = ws[i % copies];
      QuantMatrix m = w.m;
      m.codes = reinterpret_cast<const uint8_t*>(d.codes);
      m.channel_scales = reinterpret_cast<const float*>(d.channel);
      quantgemv::QuantGemvParams p = quantgemv::testing::gemvParams(
          m, reinterpret_cast<const float*>(dx), K, nullptr, reinterpret_cast<float*>(dy), N, T);
      void* args[] = {&p};
      ASSERT_EQ(driver_->launchKernel(gemv_, quantgemv::quantGemvGridSize(p.N), 1, 1,
                                      quantgemv::kQuantThreads, 1, 1, 0, stream_, args, nullptr),
                CUDA_SUCCESS);
    });
    const double full = time(reps, [&](int i) { w8a8(ws[i % copies], dx, dy, T, xq, scales, acc); });
    std::cout << "[ gpu ] fp8 N=K=" << N << " T=" << T << ": GEMV " << gemv * 1e6 << " us, W8A8 "
              << full * 1e6 << " us (" << (full < gemv ? "W8A8" : "GEMV") << " faster)"
              << speedNote(gpu_) << "\n";
  }
}

}  // namespace
}  // namespace ingot
