// Shared by the paged attention GPU tests: bf16 rounding, a device buffer that frees itself,
// and a fixture holding device 0's primary context that compiles and loads kernel sources.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "runtime/backend/cuda/cuda_driver.h"
#include "test/gpu/attention_launch.h"

namespace ingot {

/// The bf16 bits of `f`, rounded to nearest even.
inline uint16_t bf16Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  b += 0x7fffu + ((b >> 16) & 1u);
  return static_cast<uint16_t>(b >> 16);
}
/// The float a bf16 bit pattern stands for (exact).
inline float bf16ToFloat(uint16_t h) {
  const uint32_t b = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
/// `f` rounded to bf16 (nearest even), kept as f32.
inline float bf16Round(float f) { return bf16ToFloat(bf16Bits(f)); }

/// Device memory holding `bytes` (at least 4) copied from `data` when not null; freed with it.
struct DeviceBuffer {
  CudaDriver* cu = nullptr;
  CUdeviceptr ptr = 0;
  DeviceBuffer(CudaDriver& driver, const void* data, size_t bytes) : cu(&driver) {
    EXPECT_TRUE(cu->check("cuMemAlloc", cu->memAlloc(&ptr, std::max<size_t>(bytes, 4))).ok());
    if (data) EXPECT_TRUE(cu->check("cuMemcpyHtoD", cu->memcpyHtoD(ptr, data, bytes)).ok());
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cu->memFree(ptr); }
  template <class T> T* as() const { return reinterpret_cast<T*>(ptr); }
};

/// Device 0's primary context made current, or a skip (saying why) without a driver or a
/// device; `load` builds attention kernel sources for this GPU.
class AttentionGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StatusOr<std::unique_ptr<CudaDriver>> loaded = CudaDriver::load();
    if (!loaded.ok()) GTEST_SKIP() << "no GPU: " << loaded.status().message();
    driver = std::move(loaded).value();
    int count = 0;
    if (driver->deviceGetCount(&count) != CUDA_SUCCESS || count == 0)
      GTEST_SKIP() << "no CUDA device";
    ASSERT_TRUE(driver->check("cuDeviceGet", driver->deviceGet(&device, 0)).ok());
    driver->deviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
    driver->deviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
    ASSERT_TRUE(driver->check("cuDevicePrimaryCtxRetain",
                              driver->primaryCtxRetain(&context, device)).ok());
    ASSERT_TRUE(driver->check("cuCtxSetCurrent", driver->ctxSetCurrent(context)).ok());
  }
  void TearDown() override {
    if (driver && context) driver->primaryCtxRelease(device);
  }

  /// Compiles `source` for this GPU (kernelTarget: a cubin, with `viaPtx` generic compute_80
  /// PTX for the JIT, the source on the SIMT emulator) and loads it; null, with a test
  /// failure, when either fails.
  CUmodule load(const std::string& source, const std::string& name, bool viaPtx) {
    StatusOr<CUmodule> module = loadKernelModule(
        *driver, source, name, kernelTarget(GpuTarget{major, minor, "", driver->emulated()}, viaPtx));
    EXPECT_TRUE(module.ok()) << module.status().message();
    return module.ok() ? *module : nullptr;
  }

  std::unique_ptr<CudaDriver> driver;
  CUdevice device = 0;
  CUcontext context = nullptr;
  int major = 0, minor = 0;
};

}  // namespace ingot
