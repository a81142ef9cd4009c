// The GPU benchmarks' inputs and host reference on the CPU: the reference row against the
// CPU backend's pagedAttention with the causal region, on fresh random paged inputs.
#include "bench/gpu/bench_data.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <random>
#include <set>

#include "core/region/region_examples.h"
#include "core/region/region_program.h"
#include "runtime/backend/cpu/kernels.h"
#include "runtime/backend/cpu/paged_attention.h"
#include "runtime/backend/cpu/simd_level.h"
#include "runtime/backend/cpu/thread_pool.h"
#include "testing/test_seed.h"

namespace ingot::bench {
namespace {

TEST(BenchData, Bf16RoundsToNearestEvenAndRoundTrips) {
  EXPECT_EQ(toBf16(1.0f), 0x3f80);
  EXPECT_EQ(fromBf16(0x3f80), 1.0f);
  EXPECT_EQ(toBf16(-2.0f), 0xc000);
  // 1 + 2^-8 lies halfway between bf16 1.0 and 1 + 2^-7: ties go to the even mantissa (1.0).
  EXPECT_EQ(toBf16(1.0f + 1.0f / 256), 0x3f80);
  EXPECT_EQ(toBf16(1.0f + 3.0f / 256), 0x3f82);
  for (uint32_t b = 0; b < 0x7f80; b += 7) EXPECT_EQ(toBf16(fromBf16(b)), b);
}

TEST(BenchData, RandomValuesAreReproducibleUniformAndSeedDependent) {
  const uint64_t seed = ingot::testing::testSeed();
  std::vector<uint16_t> a(1 << 20, 0xFFFF), b(1 << 20, 0), c(1 << 20, 0);
  fillRandomBf16(a, seed);
  fillRandomBf16(b, seed);
  fillRandomBf16(c, seed + 1);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  double sum = 0.0, sq = 0.0;
  for (uint16_t x : a) {
    const float f = fromBf16(x);
    ASSERT_TRUE(f >= -1.0f && f <= 1.0f) << f;
    sum += f;
    sq += double{f} * f;
  }
  EXPECT_NEAR(sum / a.size(), 0.0, 0.01);
  EXPECT_NEAR(sq / a.size(), 1.0 / 3.0, 0.01) << "variance of uniform [-1, 1)";
  std::vector<uint16_t> wide(1 << 16);
  fillRandomBf16(wide, seed, 8.0f);
  float maxAbs = 0.0f;
  for (uint16_t x : wide) maxAbs = std::max(maxAbs, std::fabs(fromBf16(x)));
  EXPECT_LE(maxAbs, 8.0f);
  EXPECT_GT(maxAbs, 7.5f);
}

TEST(BenchData, LayoutGivesEveryRequestDistinctShuffledBlocks) {
  const uint64_t seed = ingot::testing::testSeed();
  StatusOr<PagedLayout> l = makePagedLayout(5, 100, 3, 7, seed);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->maxBlocks, 7);
  EXPECT_EQ(l->numBlocks, 5 * 7 + 7);
  EXPECT_EQ(l->tokens(), 15);
  EXPECT_EQ(l->queryStart, (std::vector<int32_t>{0, 3, 6, 9, 12, 15}));
  std::set<int32_t> used(l->blockTables.begin(), l->blockTables.end());
  EXPECT_EQ(used.size(), l->blockTables.size()) << "no block is shared";
  EXPECT_TRUE(*used.begin() >= 0 && *used.rbegin() < l->numBlocks);
  std::vector<int32_t> identity(l->blockTables.size());
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_NE(l->blockTables, identity);
  EXPECT_EQ(poolElements(*l, 2, 64), int64_t{42} * 2 * kBenchBlockSize * 2 * 64);
}

TEST(BenchData, LayoutRejectsImpossibleShapesNamingThem) {
  for (auto [r, s, n, spare] : std::vector<std::array<int, 4>>{
           {0, 16, 1, 0}, {1, 0, 1, 0}, {1, 16, 0, 0}, {1, 16, 17, 0}, {1, 16, 1, -1}}) {
    StatusOr<PagedLayout> l = makePagedLayout(r, s, n, spare, 1);
    ASSERT_FALSE(l.ok());
    EXPECT_NE(l.status().message().find("paged layout"), std::string::npos);
  }
}

TEST(BenchData, ReferenceRowMatchesCpuPagedAttentionWithTheCausalRegion) {
  const uint64_t seed = ingot::testing::testSeed();
  constexpr int kHeads = 8, kKvHeads = 2, kD = 64;
  constexpr float kQueryAmplitude = 8.0f;  // peaked softmax, as the benchmark uses
  StatusOr<PagedLayout> l = makePagedLayout(3, 70, 5, 4, seed);
  ASSERT_TRUE(l.ok());
  std::vector<uint16_t> q(static_cast<size_t>(l->tokens()) * kHeads * kD);
  std::vector<uint16_t> pool(poolElements(*l, kKvHeads, kD));
  fillRandomBf16(q, seed + 1, kQueryAmplitude);
  fillRandomBf16(pool, seed + 2);
  std::vector<float> qf(q.size()), poolf(pool.size());
  std::transform(q.begin(), q.end(), qf.begin(), fromBf16);
  std::transform(pool.begin(), pool.end(), poolf.begin(), fromBf16);

  StatusOr<RegionProgram> mask = decodeRegionBytecode(causalMaskBytecode());
  ASSERT_TRUE(mask.ok()) << mask.status().message();
  AttentionParams p;
  p.num_heads = kHeads;
  p.num_kv_heads = kKvHeads;
  p.head_dim = kD;
  p.scale = 1.0f / std::sqrt(static_cast<float>(kD));
  p.variant.mask = &*mask;
  p.variant.analyze();
  KvCacheLayout layout{1, kBenchBlockSize, kKvHeads, kD};
  AttentionBatch batch{l->blockTables.data(), l->maxBlocks, l->seqLens.data(),
                       l->queryStart.data(),  l->requests,  l->tokens()};
  ThreadPool threads(2);
  AttentionScratch scratch;
  std::vector<float> want(qf.size(), NAN);
  Status st = pagedAttention(qf.data(), poolf.data(), layout, batch, p, want.data(), threads,
                             cpuKernels(detectSimdLevel()), scratch);
  ASSERT_TRUE(st.ok()) << st.message();
  for (int b = 0; b < l->requests; ++b)
    for (int t = 0; t < l->newTokens; ++t)
      for (int h = 0; h < kHeads; ++h) {
        const std::vector<float> got =
            causalAttentionRow(*l, q, pool, kHeads, kKvHeads, kD, b, t, h);
        const size_t row = (static_cast<size_t>(l->queryStart[b] + t) * kHeads + h) * kD;
        for (int d = 0; d < kD; ++d)
          ASSERT_NEAR(got[d], want[row + d], 1e-4)
              << "request " << b << " token " << t << " head " << h << " [" << d << "]";
      }
}

}  // namespace
}  // namespace ingot::bench
