// CudaDriver's symbol table against the toolkit's stub libcuda, and loading a fake driver.
#include "runtime/backend/cuda/cuda_driver.h"

#include <dlfcn.h>

#include <set>
#include <string>

#include <gtest/gtest.h>

namespace ingot {
namespace {

std::string symbolOf(const std::string& member) {
  for (const CudaDriverEntryPoint& e : CudaDriver::entryPoints())
    if (member == e.member) return e.symbol;
  return "(no member " + member + ")";
}

TEST(CudaDriver, ToolkitStubExportsEverySymbolTheDriverResolves) {
  void* stub = ::dlopen(INGOT_TOOLKIT_STUB_LIBCUDA, RTLD_NOW | RTLD_LOCAL);
  if (!stub) GTEST_SKIP() << "no toolkit stub libcuda: " << ::dlerror();
  ASSERT_GE(CudaDriver::entryPoints().size(), 49u);
  std::set<std::string> members, symbols;
  for (const CudaDriverEntryPoint& e : CudaDriver::entryPoints()) {
    EXPECT_NE(::dlsym(stub, e.symbol), nullptr)
        << "CudaDriver::" << e.member << " resolves " << e.symbol
        << ", which the toolkit's libcuda.so stub does not export";
    EXPECT_TRUE(members.insert(e.member).second) << "member listed twice: " << e.member;
    EXPECT_TRUE(symbols.insert(e.symbol).second) << "symbol listed twice: " << e.symbol;
  }
  ::dlclose(stub);
}

TEST(CudaDriver, SymbolsAreTheAbiVersionsCudaHeaderSelects) {
  // The versioned names CUDA 12/13's cuda.h maps these API names to; the unversioned
  // symbols are older ABIs with other signatures (cuGraphInstantiate takes an error node
  // and a log buffer, cuMemGetInfo 32-bit sizes).
  EXPECT_EQ(symbolOf("memGetInfo"), "cuMemGetInfo_v2");
  EXPECT_EQ(symbolOf("memAllocHost"), "cuMemAllocHost_v2");
  EXPECT_EQ(symbolOf("memFreeHost"), "cuMemFreeHost");
  EXPECT_EQ(symbolOf("memcpyHtoDAsync"), "cuMemcpyHtoDAsync_v2");
  EXPECT_EQ(symbolOf("memcpyDtoDAsync"), "cuMemcpyDtoDAsync_v2");
  EXPECT_EQ(symbolOf("streamDestroy"), "cuStreamDestroy_v2");
  EXPECT_EQ(symbolOf("eventDestroy"), "cuEventDestroy_v2");
  EXPECT_EQ(symbolOf("eventElapsedTime"), "cuEventElapsedTime_v2");
  EXPECT_EQ(symbolOf("streamBeginCapture"), "cuStreamBeginCapture_v2");
  EXPECT_EQ(symbolOf("streamEndCapture"), "cuStreamEndCapture");
  EXPECT_EQ(symbolOf("graphInstantiate"), "cuGraphInstantiateWithFlags");
  EXPECT_EQ(symbolOf("linkCreate"), "cuLinkCreate_v2");
  EXPECT_EQ(symbolOf("linkAddData"), "cuLinkAddData_v2");
  EXPECT_EQ(symbolOf("deviceTotalMem"), "cuDeviceTotalMem_v2");
  EXPECT_EQ(symbolOf("primaryCtxRelease"), "cuDevicePrimaryCtxRelease_v2");
  EXPECT_EQ(symbolOf("memAlloc"), "cuMemAlloc_v2");
}

TEST(CudaDriver, LoadFromFakeResolvesEveryMember) {
  StatusOr<std::unique_ptr<CudaDriver>> loaded = CudaDriver::loadFrom(INGOT_FAKE_LIBCUDA);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  CudaDriver& cu = **loaded;
  int version = 0;
  ASSERT_EQ(cu.driverGetVersion(&version), CUDA_SUCCESS);
  EXPECT_GT(version, 0);
  // Asynchronous copies and memsets on the fake device (host memory) through the new members.
  CUstream stream = nullptr;
  ASSERT_EQ(cu.streamCreate(&stream, 0), CUDA_SUCCESS);
  CUdeviceptr d = 0;
  ASSERT_EQ(cu.memAlloc(&d, 64), CUDA_SUCCESS);
  ASSERT_EQ(cu.memsetD32Async(d, 0xdeadbeefu, 16, stream), CUDA_SUCCESS);
  unsigned words[16] = {};
  ASSERT_EQ(cu.memcpyDtoHAsync(words, d, sizeof(words), stream), CUDA_SUCCESS);
  ASSERT_EQ(cu.streamSynchronize(stream), CUDA_SUCCESS);
  for (unsigned v : words) EXPECT_EQ(v, 0xdeadbeefu);
  EXPECT_EQ(cu.memFree(d), CUDA_SUCCESS);
  EXPECT_EQ(cu.streamDestroy(stream), CUDA_SUCCESS);
  EXPECT_EQ(cu.describe("cuModuleLoadData", CUDA_ERROR_INVALID_IMAGE),
            "cuModuleLoadData: CUDA_ERROR_INVALID_IMAGE (fake driver error)");
}

TEST(CudaDriver, MissingLibraryIsANotFoundErrorNamingIt) {
  StatusOr<std::unique_ptr<CudaDriver>> loaded = CudaDriver::loadFrom("/nonexistent/libcuda.so.1");
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kNotFound);
  EXPECT_NE(loaded.status().message().find("/nonexistent/libcuda.so.1"), std::string::npos)
      << loaded.status().message();
}

TEST(CudaDriver, LibraryWithoutTheEntryPointsIsAnErrorNamingTheSymbol) {
  // Any library that is not a CUDA driver, here the C library.
  StatusOr<std::unique_ptr<CudaDriver>> loaded = CudaDriver::loadFrom("libc.so.6");
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("libc.so.6 has no cuInit"), std::string::npos)
      << loaded.status().message();
}

}  // namespace
}  // namespace ingot
