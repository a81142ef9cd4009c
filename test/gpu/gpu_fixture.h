// GpuFixture: a GoogleTest fixture holding the driver and device 0's primary context, or
// skipping (saying why) where there is no driver or no device.
#pragma once

#include <cuda.h>

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/artifact/kernel_binary.h"
#include "runtime/backend/cuda/cuda_driver.h"

namespace ingot {

class GpuFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    StatusOr<std::unique_ptr<CudaDriver>> loaded = CudaDriver::load();
    if (!loaded.ok()) GTEST_SKIP() << "no GPU: " << loaded.status().message();
    driver_ = std::move(loaded).value();
    CudaDriver& cu = *driver_;
    int count = 0;
    if (cu.deviceGetCount(&count) != CUDA_SUCCESS || count == 0) GTEST_SKIP() << "no CUDA device";
    ASSERT_TRUE(cu.check("cuDeviceGet", cu.deviceGet(&device_, 0)).ok());
    char name[256] = {};
    cu.deviceGetName(name, sizeof(name), device_);
    gpu_.name = name;
    gpu_.emulated = cu.emulated();
    cu.deviceGetAttribute(&gpu_.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device_);
    cu.deviceGetAttribute(&gpu_.minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device_);
    ASSERT_TRUE(cu.check("cuDevicePrimaryCtxRetain", cu.primaryCtxRetain(&context_, device_)).ok());
    retained_ = true;
    ASSERT_TRUE(cu.check("cuCtxSetCurrent", cu.ctxSetCurrent(context_)).ok());
    ASSERT_TRUE(cu.check("cuStreamCreate", cu.streamCreate(&stream_, CU_STREAM_NON_BLOCKING)).ok());
  }
  void TearDown() override {
    if (!driver_) return;
    if (stream_) driver_->streamSynchronize(stream_);
    for (CUdeviceptr p : allocations_) driver_->memFree(p);
    if (stream_) driver_->streamDestroy(stream_);
    if (retained_) driver_->primaryCtxRelease(device_);
  }

  /// Device memory freed with the fixture.
  CUdeviceptr alloc(size_t bytes) {
    CUdeviceptr p = 0;
    Status s = driver_->check("cuMemAlloc", driver_->memAlloc(&p, bytes));
    EXPECT_TRUE(s.ok()) << s.message();
    allocations_.push_back(p);
    return p;
  }
  /// Fills `count` 32-bit words at `p` with a NaN pattern, so unwritten outputs show.
  void poison(CUdeviceptr p, size_t count) {
    ASSERT_EQ(driver_->memsetD32Async(p, 0x7fc00000u, count, stream_), CUDA_SUCCESS);
  }
  void sync() {
    Status s = driver_->check("cuStreamSynchronize", driver_->streamSynchronize(stream_));
    ASSERT_TRUE(s.ok()) << s.message();
  }

  std::unique_ptr<CudaDriver> driver_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  GpuTarget gpu_;

 private:
  bool retained_ = false;
  std::vector<CUdeviceptr> allocations_;
};

}  // namespace ingot
