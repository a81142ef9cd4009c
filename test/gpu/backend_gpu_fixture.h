// BackendGpuTest: what the GPU tests that compare the CUDA backend with the CPU backend on
// one artifact share: making both backends, a relative error, and random tokens.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <memory>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "core/artifact/artifact_reader.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/backend/cuda/cuda_driver.h"
#include "testing/test_seed.h"

namespace ingot {

/// Holds the artifact under test (set by the derived fixture's SetUp, which also skips
/// without a GPU or an artifact), its block size and vocabulary, and a fresh random source.
class BackendGpuTest : public ::testing::Test {
 protected:
  /// A CUDA backend on `a` made with `o` (its description printed), or null with a failure.
  static std::unique_ptr<CudaBackend> createCuda(const Artifact& a, const CudaBackendOptions& o) {
    StatusOr<std::unique_ptr<CudaBackend>> b = CudaBackend::create(a, o);
    EXPECT_TRUE(b.ok()) << b.status().message();
    if (!b.ok()) return nullptr;
    std::cout << "[ cuda ] " << (*b)->describe() << "\n";
    return std::move(b).value();
  }
  /// The CPU reference on the artifact (64 KV blocks), or null with a failure.
  std::unique_ptr<CpuBackend> cpu() {
    CpuBackendOptions o;
    o.num_kv_blocks = 64;
    StatusOr<std::unique_ptr<CpuBackend>> b = CpuBackend::create(*artifact, o);
    EXPECT_TRUE(b.ok()) << b.status().message();
    return b.ok() ? std::move(b).value() : nullptr;
  }
  /// Max |a - b| over max |b|: the tolerance bf16 GEMM inputs leave is about 1e-2.
  static double relativeError(const std::vector<float>& a, const std::vector<float>& b) {
    double diff = 0, scale = 1e-6;
    for (size_t i = 0; i < b.size(); ++i) {
      diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
    }
    return diff / scale;
  }
  /// relativeError of each row of `vocab` logits, sorted ascending.
  std::vector<double> sortedRowErrors(const std::vector<float>& a, const std::vector<float>& b) const {
    std::vector<double> rows;
    for (size_t r = 0; r + vocab <= b.size(); r += vocab)
      rows.push_back(relativeError(std::vector<float>(a.begin() + r, a.begin() + r + vocab),
                                   std::vector<float>(b.begin() + r, b.begin() + r + vocab)));
    std::sort(rows.begin(), rows.end());
    return rows;
  }
  /// Whether the CUDA device is the SIMT emulator (INGOT_CUDA_DRIVER=emulated).
  static bool emulatedDevice() { return emulatedCudaLibrary().ok(); }
  /// `n` tokens drawn uniformly from the vocabulary.
  std::vector<int32_t> randomTokens(int n) {
    std::vector<int32_t> t(n);
    for (int32_t& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
    return t;
  }

  std::unique_ptr<Artifact> artifact;
  int block_size = 16;
  int64_t vocab = 0;
  std::mt19937 rng{ingot::testing::testSeed()};
};

}  // namespace ingot
