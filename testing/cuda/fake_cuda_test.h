// Test fixture base for CPU tests of the CUDA backend over the fake libcuda and libcublasLt.
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/artifact/artifact_reader.h"
#include "testing/cuda/fake_libcuda.h"
#include "testing/llama_program.h"

namespace ingot {

/// One entry of the fake driver's launch log: a kernel (or a fake NCCL collective), its
/// grid and block, and whether a graph launch ran it.
struct RecordedLaunch {
  std::string name;
  unsigned dims[6];
  bool fromGraph;
};

/// Opens the fakes once per suite (the fake libcuda by path first, so that CudaDriver's
/// dlopen("libcuda.so.1") finds it by its soname; cuBLASLt through $INGOT_CUBLASLT_LIBRARY)
/// and resets their counters before each test. Needs INGOT_FAKE_LIBCUDA and
/// INGOT_FAKE_CUBLASLT defined to the libraries' paths.
class FakeCudaTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    driver_ = ::dlopen(INGOT_FAKE_LIBCUDA, RTLD_NOW | RTLD_GLOBAL);
    blas_ = ::dlopen(INGOT_FAKE_CUBLASLT, RTLD_NOW | RTLD_GLOBAL);
    ::setenv("INGOT_CUBLASLT_LIBRARY", INGOT_FAKE_CUBLASLT, 1);
  }
  void SetUp() override {
    ASSERT_NE(driver_, nullptr) << ::dlerror();
    ASSERT_NE(blas_, nullptr) << ::dlerror();
    reinterpret_cast<FakeCudaResetFn>(::dlsym(driver_, "fakeCudaReset"))();
    reinterpret_cast<void (*)()>(::dlsym(blas_, "fakeCublasLtReset"))();
  }

  /// The fake driver's launch log since the last reset.
  static std::vector<RecordedLaunch> launches() {
    auto count = reinterpret_cast<FakeCudaLaunchCountFn>(::dlsym(driver_, "fakeCudaLaunchCount"));
    auto get = reinterpret_cast<FakeCudaLaunchFn>(::dlsym(driver_, "fakeCudaLaunch"));
    std::vector<RecordedLaunch> out;
    for (int i = 0; i < count(); ++i) {
      RecordedLaunch l;
      int fromGraph = 0;
      l.name = get(i, l.dims, &fromGraph);
      l.fromGraph = fromGraph != 0;
      out.push_back(l);
    }
    return out;
  }
  /// The tiny Llama that `o` describes, built and opened from memory; null, with a test
  /// failure, where either fails. (Set `o.fake_cuda_kernels` for the fake driver.)
  static std::unique_ptr<Artifact> tinyLlama(const testing::LlamaProgramOptions& o) {
    StatusOr<std::vector<uint8_t>> bytes = testing::buildLlamaArtifact(o);
    EXPECT_TRUE(bytes.ok()) << bytes.status().message();
    if (!bytes.ok()) return nullptr;
    StatusOr<Artifact> a = Artifact::openFromMemory(*bytes);
    EXPECT_TRUE(a.ok()) << a.status().message();
    return a.ok() ? std::make_unique<Artifact>(std::move(a).value()) : nullptr;
  }
  /// The fake driver's counters (captures, graph launches, live objects).
  static const FakeCudaStats& stats() {
    return *reinterpret_cast<FakeCudaStatsFn>(::dlsym(driver_, "fakeCudaStats"))();
  }

  inline static void* driver_ = nullptr;
  inline static void* blas_ = nullptr;
};

}  // namespace ingot
