// CublasLt::gemmFp8 over the fake libcublasLt, which computes FP8 matmuls on the host: the
// operand layout (w as transposed A, x as B, y column-major N x T) against a float64
// reference, the padding rule, and the heuristic cache per input type.
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include <cublasLt.h>
#include <dlfcn.h>

#include <gtest/gtest.h>

#include "runtime/backend/cpu/quant_formats.h"
#include "runtime/backend/cuda/cublaslt.h"
#include "testing/cuda/fake_cuda_test.h"
#include "testing/test_seed.h"

namespace ingot {
namespace {

class CublasLtFp8FakeTest : public FakeCudaTest {
 protected:
  void SetUp() override {
    FakeCudaTest::SetUp();
    StatusOr<std::unique_ptr<CublasLt>> lt = CublasLt::load();
    ASSERT_TRUE(lt.ok()) << lt.status().message();
    lt_ = std::move(*lt);
  }
  int callType(int i) {
    return reinterpret_cast<int (*)(int)>(::dlsym(blas_, "fakeCublasLtCallType"))(i);
  }
  /// Random finite E4M3 codes (never the NaN codes 0x7F / 0xFF).
  std::vector<uint8_t> randomCodes(size_t count) {
    std::vector<uint8_t> c(count);
    for (uint8_t& v : c) {
      do v = static_cast<uint8_t>(rng_()); while ((v & 0x7f) == 0x7f);
    }
    return c;
  }
  static CUdeviceptr dev(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

  std::unique_ptr<CublasLt> lt_;
  std::mt19937 rng_{ingot::testing::testSeed()};
  alignas(256) char workspace_[256] = {};
};

TEST_F(CublasLtFp8FakeTest, GemmFp8MatchesAFloat64ReferenceInTheBackendsRowMajorLayout) {
  for (int64_t T : {1, 5, 33}) {
    const int64_t N = 48, K = 80;
    std::vector<uint8_t> x = randomCodes(T * K), w = randomCodes(N * K);
    std::vector<float> y(T * N, std::nanf(""));  // poison
    ASSERT_TRUE(lt_->gemmFp8(nullptr, dev(x.data()), dev(w.data()), dev(y.data()), T, N, K,
                             dev(workspace_))
                    .ok());
    for (int64_t t = 0; t < T; ++t)
      for (int64_t n = 0; n < N; ++n) {
        double want = 0;
        for (int64_t k = 0; k < K; ++k)
          want += double(e4m3fnToF32(x[t * K + k])) * e4m3fnToF32(w[n * K + k]);
        ASSERT_NEAR(y[t * N + n], want, 1e-6 * std::fabs(want) + 1e-9)
            << "T=" << T << " t=" << t << " n=" << n;
      }
  }
  EXPECT_EQ(callType(0), static_cast<int>(CUDA_R_8F_E4M3));
}

TEST_F(CublasLtFp8FakeTest, UnpaddedShapesAndMisalignedPointersAreRefusedNamingTheRule) {
  std::vector<uint8_t> x(64 * 64), w(64 * 64);
  std::vector<float> y(64 * 64);
  Status s = lt_->gemmFp8(nullptr, dev(x.data()), dev(w.data()), dev(y.data()), 4, 40, 64,
                          dev(workspace_));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("multiples of 16"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("N = 40"), std::string::npos) << s.message();
  s = lt_->gemmFp8(nullptr, dev(x.data()), dev(w.data()), dev(y.data()), 4, 48, 24,
                   dev(workspace_));
  EXPECT_NE(s.message().find("K = 24"), std::string::npos) << s.message();
  s = lt_->gemmFp8(nullptr, dev(x.data() + 8), dev(w.data()), dev(y.data()), 4, 48, 64,
                   dev(workspace_));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("16-byte aligned"), std::string::npos) << s.message();
  s = lt_->gemmFp8(nullptr, 0, dev(w.data()), dev(y.data()), 4, 48, 64, dev(workspace_));
  EXPECT_NE(s.message().find("x is a null device pointer"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("e4m3"), std::string::npos) << s.message();
}

TEST_F(CublasLtFp8FakeTest, HeuristicCacheKeysOnTheInputTypeAndTheTokenBucket) {
  alignas(256) static uint8_t x[64 * 64], w[64 * 64];
  alignas(256) static float y[64 * 64];
  ASSERT_TRUE(lt_->gemmFp8(nullptr, dev(x), dev(w), dev(y), 5, 64, 64, dev(workspace_)).ok());
  EXPECT_EQ(lt_->heuristicQueries(), 1);
  ASSERT_TRUE(lt_->gemmFp8(nullptr, dev(x), dev(w), dev(y), 7, 64, 64, dev(workspace_)).ok());
  EXPECT_EQ(lt_->heuristicQueries(), 1) << "T = 7 shares T = 5's bucket of 8";
  ASSERT_TRUE(lt_->gemmBf16(nullptr, dev(x), dev(w), dev(y), 5, 64, 32, dev(workspace_)).ok());
  EXPECT_EQ(lt_->heuristicQueries(), 2) << "bf16 of the same shape has its own algorithm";
  EXPECT_EQ(callType(2), static_cast<int>(CUDA_R_16BF));
}

}  // namespace
}  // namespace ingot
