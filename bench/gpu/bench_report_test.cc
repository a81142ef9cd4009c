// The GPU benchmarks' arithmetic and RESULT lines on the CPU.
#include "bench/gpu/bench_report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "testing/test_seed.h"

namespace ingot::bench {
namespace {

TEST(BenchReport, CausalFlopsAreHalfOfTwoDenseMatmulsPerHead) {
  std::mt19937 rng(ingot::testing::testSeed());
  for (int i = 0; i < 20; ++i) {
    const int64_t b = 1 + rng() % 16, h = 1 + rng() % 64, s = 1 + rng() % 9000,
                  d = 16 * (1 + rng() % 16);
    // Dense attention: QK^T and PV, each an [S, D] x [D, S] (or [S, S] x [S, D]) product of
    // 2 S^2 D FLOPs per head; the causal mask keeps half of it.
    double dense = 0.0;
    for (int64_t m = 0; m < 2; ++m) dense += 2.0 * s * s * d;
    EXPECT_DOUBLE_EQ(causalAttentionFlops(b, h, s, d), b * h * dense / 2.0);
  }
  // Llama-3-8B heads at 8k, head dim 128, 2 sequences: 1.1 TFLOP.
  EXPECT_NEAR(causalAttentionFlops(2, 32, 8192, 128), 1.0995e12, 1e9);
}

TEST(BenchReport, KvBytesCountEveryKAndVRowOfEverySlot) {
  // 64 requests x 4k slots x (K + V) x 8 kv heads x 128 x bf16 = exactly 1 GiB.
  EXPECT_EQ(kvBytesRead(64, 4096, 8, 128, 2), int64_t{1} << 30);
  EXPECT_EQ(kvBytesRead(64, 4096, 8, 128, 4), int64_t{2} << 30);
  EXPECT_EQ(kvBytesRead(3, 5, 7, 32, 2), 3 * 5 * 2 * 7 * 32 * 2);
}

TEST(BenchReport, PrefillBatchKeepsTokensInFlightConstant) {
  EXPECT_EQ(prefillBatch(1024, 16384), 16);
  EXPECT_EQ(prefillBatch(2048, 16384), 8);
  EXPECT_EQ(prefillBatch(4096, 16384), 4);
  EXPECT_EQ(prefillBatch(8192, 16384), 2);
  EXPECT_EQ(prefillBatch(32768, 16384), 1) << "never zero sequences";
  EXPECT_EQ(prefillBatch(0, 16384), 1);
}

TEST(BenchReport, MedianOfOddAndEvenCountsAndRejectsMissingTimings) {
  std::mt19937 rng(ingot::testing::testSeed());
  for (int n = 1; n < 30; ++n) {
    std::vector<double> v(n);
    for (double &x : v) x = 0.01 + std::uniform_real_distribution<double>(0, 5)(rng);
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    const double want = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    StatusOr<double> got = medianOf(v);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_DOUBLE_EQ(*got, want);
  }
  EXPECT_FALSE(medianOf({}).ok());
  EXPECT_FALSE(medianOf({1.0, 0.0, 2.0}).ok()) << "a zero timing is a launch that did not run";
  EXPECT_FALSE(medianOf({1.0, NAN}).ok());
  StatusOr<double> neg = medianOf({-1.0});
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.status().message().find("-1"), std::string::npos) << neg.status().message();
}

TEST(BenchReport, CaseNamesAreTheOnesTheReferenceScriptPrints) {
  // scripts/gpu_reference.py builds the same strings; gpu_results_table.py pairs on them.
  EXPECT_EQ(prefillCaseName(128, 8192, 2), "prefill_causal_d128_s8192_b2");
  EXPECT_EQ(decodeCaseName("bf16", 128, 64, 4096), "decode_bf16_d128_b64_l4096");
}

TEST(BenchReport, ResultLinesHaveFourFieldsAndRejectBadNames) {
  StatusOr<std::string> line =
      resultLine("ingot", "prefill_causal_d64_s1024_b16", 123.456789, "TFLOP/s");
  ASSERT_TRUE(line.ok());
  EXPECT_EQ(*line, "RESULT ingot/prefill_causal_d64_s1024_b16 123.457 TFLOP/s\n");
  EXPECT_EQ(*resultLine("ingot_copy", "x", 4.2e3, "GB/s"), "RESULT ingot_copy/x 4200 GB/s\n");
  EXPECT_FALSE(resultLine("", "x", 1, "ms").ok());
  EXPECT_FALSE(resultLine("a/b", "x", 1, "ms").ok()) << "the impl ends at the first '/'";
  EXPECT_FALSE(resultLine("ingot", "two words", 1, "ms").ok());
  EXPECT_FALSE(resultLine("ingot", "x", 1, "").ok());
  EXPECT_FALSE(resultLine("ingot", "x", 1, "GB /s").ok());
  StatusOr<std::string> inf = resultLine("ingot", "x", INFINITY, "ms");
  ASSERT_FALSE(inf.ok());
  EXPECT_NE(inf.status().message().find("ingot/x"), std::string::npos);
}

}  // namespace
}  // namespace ingot::bench
