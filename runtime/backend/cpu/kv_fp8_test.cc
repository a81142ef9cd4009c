// FP8 KV cache: scale rule, SIMD decoders, token-by-token appends that grow a block's scale,
// copies, and paged attention over fp8 blocks against an f64 reference.
#include "runtime/backend/cpu/kv_fp8.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "runtime/backend/cpu/paged_attention.h"
#include "runtime/backend/cpu/quant_formats.h"

namespace ingot {
namespace {

const float kPoison = std::numeric_limits<float>::quiet_NaN();

/// Round-to-nearest E4M3 of x at scale s errs by at most half an ulp: 2^-4 |x| for normal
/// codes, 2^-10 s in the subnormal range.
double encodeBound(double x, double s) { return std::max(std::fabs(x) * 0x1p-4, 0x1p-10 * s); }

bool isPowerOfTwo(float s) {
  int e = 0;
  return std::frexp(s, &e) == 0.5f;
}

TEST(KvFp8Test, ScaleIsTheSmallestPowerOfTwoCoveringAbsmax) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> exponent(-30.f, 30.f);
  for (int i = 0; i < 2000; ++i) {
    const float absmax = std::exp2(exponent(rng));
    const float s = fp8KvScaleFor(absmax);
    ASSERT_TRUE(isPowerOfTwo(s)) << absmax;
    EXPECT_LE(absmax, kFp8Max * s) << absmax;
    EXPECT_GT(absmax, kFp8Max * s / 2) << absmax;
  }
  // Exactly 448 * 2^k needs 2^k, not 2^(k+1).
  EXPECT_EQ(fp8KvScaleFor(448.0f), 1.0f);
  EXPECT_EQ(fp8KvScaleFor(224.0f), 0.5f);
  // Never zero or NaN: zero rows take the floor, huge ones the ceiling.
  EXPECT_EQ(fp8KvScaleFor(0.0f), fp8KvMinScale());
  EXPECT_GT(fp8KvMinScale(), 0.0f);
  EXPECT_EQ(fp8KvScaleFor(std::numeric_limits<float>::max()),
            std::ldexp(1.0f, kFp8KvMaxScaleExp));
  EXPECT_TRUE(std::isfinite(std::ldexp(1.0f, kFp8KvMaxScaleExp) * 256.0f));
}

TEST(KvFp8Test, DecodersMatchTheScalarDecodeOnEveryLevel) {
  std::mt19937 rng(12);
  std::uniform_int_distribution<int> code(0, 255);
  for (SimdLevel level : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (level > detectSimdLevel()) {
      GTEST_LOG_(INFO) << "skipping " << simdLevelName(level) << ": not supported by this CPU";
      continue;
    }
    const Fp8RowsDecoder decode = fp8RowsDecoder(level);
    for (int64_t D : {1, 7, 8, 15, 16, 17, 33, 64, 70}) {
      const int64_t rows = 3, stride = D + 5, outStride = D + 2;
      std::vector<uint8_t> codes(rows * stride);
      for (uint8_t& c : codes) {
        do c = static_cast<uint8_t>(code(rng));
        while ((c & 0x7f) == 0x7f);  // NaN codes are never written
      }
      for (float scale : {fp8KvMinScale(), 0x1p-7f, 1.0f, 0x1p+20f,
                          std::ldexp(1.0f, kFp8KvMaxScaleExp)}) {
        std::vector<float> out(rows * outStride, kPoison);
        decode(codes.data(), stride, rows, D, scale, out.data(), outStride);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t d = 0; d < outStride; ++d) {
            const float got = out[r * outStride + d];
            if (d >= D) {
              EXPECT_TRUE(std::isnan(got)) << "wrote past the row";
              continue;
            }
            const float want = e4m3fnToF32(codes[r * stride + d]) * scale;
            ASSERT_EQ(std::memcmp(&got, &want, 4), 0)
                << simdLevelName(level) << " D=" << D << " code " << int(codes[r * stride + d])
                << " scale " << scale << ": " << got << " vs " << want;
          }
      }
    }
  }
}

/// A pool of `blocks` blocks with one layer written at `layer` of a 2-layer layout.
struct Pool {
  KvCacheLayout layout;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  Fp8KvPool view() { return {codes.data(), scales.data()}; }
  Pool(int64_t blocks, int64_t bs, int64_t Hkv, int64_t D) {
    layout = {2, bs, Hkv, D};
    codes.assign(blocks * layout.blockFloats(), 0);
    scales.assign(blocks * layout.blockScales(), fp8KvMinScale());
  }
  float value(int64_t slot, int64_t layer, int64_t kv, int64_t head, int64_t d) const {
    const int64_t b = slot / layout.block_size, off = slot % layout.block_size;
    return e4m3fnToF32(codes[layout.rowOffset(b, layer, kv, off) + head * layout.head_dim + d]) *
           scales[layout.scaleIndex(b, layer, kv, head)];
  }
};

TEST(KvFp8Test, AppendedRowsReadBackWithinHalfAnUlp) {
  std::mt19937 rng(13);
  const int64_t bs = 16, Hkv = 3, D = 24, T = 40, layer = 1;
  Pool pool(4, bs, Hkv, D);
  std::normal_distribution<float> n01(0.f, 1.f);
  std::vector<float> k(T * Hkv * D), v(T * Hkv * D);
  for (float& x : k) x = n01(rng) * 3.f;
  for (float& x : v) x = n01(rng) * 0.01f;
  std::vector<int32_t> slots(T);
  // Slots in blocks 2, 0, 3 (not in block order).
  const int32_t blockOf[3] = {2, 0, 3};
  for (int64_t t = 0; t < T; ++t) slots[t] = static_cast<int32_t>(blockOf[t / bs] * bs + t % bs);
  kvWriteRowsFp8(pool.view(), pool.layout, layer, k.data(), v.data(), slots.data(), T, 0, 2 * Hkv);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t kv = 0; kv < 2; ++kv)
      for (int64_t h = 0; h < Hkv; ++h) {
        const int64_t block = slots[t] / bs;
        const float s = pool.scales[pool.layout.scaleIndex(block, layer, kv, h)];
        // The block-head's scale covers exactly the rows it holds.
        float absmax = 0.f;
        for (int64_t u = 0; u < T; ++u)
          if (slots[u] / bs == block)
            for (int64_t d = 0; d < D; ++d)
              absmax = std::max(absmax, std::fabs((kv ? v : k)[(u * Hkv + h) * D + d]));
        ASSERT_EQ(s, fp8KvScaleFor(absmax));
        for (int64_t d = 0; d < D; ++d) {
          const float x = (kv ? v : k)[(t * Hkv + h) * D + d];
          // Two roundings at most: the row's own, and a re-encoding into the subnormals.
          EXPECT_LE(std::fabs(pool.value(slots[t], layer, kv, h, d) - x),
                    encodeBound(x, s) + 0x1p-10 * s)
              << "token " << t << " kv " << kv << " head " << h << " d " << d;
        }
      }
  // The other layer was not touched.
  for (int64_t b = 0; b < 4; ++b)
    for (int64_t i = 0; i < pool.layout.rowFloats() * bs; ++i)
      ASSERT_EQ(pool.codes[pool.layout.rowOffset(b, 0, 0, 0) + i], 0);
}

/// Writes one token's K/V rows (all heads) at `slot` of `layer`.
void writeToken(Pool& pool, int64_t layer, int32_t slot, const std::vector<float>& k,
                const std::vector<float>& v) {
  kvWriteRowsFp8(pool.view(), pool.layout, layer, k.data(), v.data(), &slot, 1, 0,
                 2 * pool.layout.num_kv_heads);
}

TEST(KvFp8Test, BlockGrowingPastItsFirstScaleReencodesItsRows) {
  std::mt19937 rng(14);
  const int64_t bs = 16, Hkv = 2, D = 32, layer = 0;
  Pool pool(2, bs, Hkv, D);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<std::vector<float>> ks, vs;
  std::vector<float> scaleAfter;
  int grew = 0;
  for (int64_t r = 0; r < bs; ++r) {
    // Magnitudes rise ~1.6x a row: the scale doubles every row or two.
    const float mag = std::pow(1.6f, static_cast<float>(r));
    std::vector<float> k(Hkv * D), v(Hkv * D);
    for (float& x : k) x = u(rng) * mag;
    for (float& x : v) x = u(rng) * mag * 1e-3f;
    writeToken(pool, layer, static_cast<int32_t>(bs + r), k, v);  // block 1
    const float s = pool.scales[pool.layout.scaleIndex(1, layer, 0, 0)];
    if (!scaleAfter.empty() && s > scaleAfter.back()) ++grew;
    scaleAfter.push_back(s);
    ks.push_back(k);
    vs.push_back(v);
  }
  EXPECT_GE(grew, 6) << "the test should grow the scale many times";
  // Every row against a direct encoding at the final scale: the same codes except where the
  // direct code is subnormal (below 2^-6 * s); there at most one more rounding.
  int64_t same = 0, total = 0;
  for (int64_t kv = 0; kv < 2; ++kv)
    for (int64_t h = 0; h < Hkv; ++h) {
      const float s = pool.scales[pool.layout.scaleIndex(1, layer, kv, h)];
      float absmax = 0.f;
      for (int64_t r = 0; r < bs; ++r)
        for (int64_t d = 0; d < D; ++d)
          absmax = std::max(absmax, std::fabs((kv ? vs : ks)[r][h * D + d]));
      ASSERT_EQ(s, fp8KvScaleFor(absmax));
      for (int64_t r = 0; r < bs; ++r)
        for (int64_t d = 0; d < D; ++d) {
          const float x = (kv ? vs : ks)[r][h * D + d];
          const float direct = e4m3fnToF32(f32ToE4m3fn(x / s)) * s;
          const float got = pool.value(bs + r, layer, kv, h, d);
          ++total;
          if (got == direct) {
            ++same;
            continue;
          }
          EXPECT_LT(std::fabs(x / s), 0x1p-6f) << "a normal code changed when re-encoded";
          EXPECT_LE(std::fabs(got - x), encodeBound(x, s) + 0x1p-10 * s);
        }
    }
  EXPECT_GT(same, total * 9 / 10);
  // Block 0 was never written.
  for (int64_t i = 0; i < pool.layout.blockScales(); ++i)
    EXPECT_EQ(pool.scales[i], fp8KvMinScale());
}

TEST(KvFp8Test, FirstRowOfABlockStartsAFreshScale) {
  const int64_t bs = 4, Hkv = 1, D = 8;
  Pool pool(1, bs, Hkv, D);
  std::vector<float> big(D, 1000.f), small(D, 0.01f);
  for (int32_t s = 0; s < bs; ++s) writeToken(pool, 1, s, big, big);
  EXPECT_EQ(pool.scales[pool.layout.scaleIndex(0, 1, 0, 0)], fp8KvScaleFor(1000.f));
  // The block is reused by a new sequence: its first row must not inherit 1000's scale.
  small[3] = -0.0123f;
  writeToken(pool, 1, 0, small, small);
  EXPECT_EQ(pool.scales[pool.layout.scaleIndex(0, 1, 0, 0)], fp8KvScaleFor(0.0123f));
  for (int64_t d = 0; d < D; ++d)
    EXPECT_LE(std::fabs(pool.value(0, 1, 1, 0, d) - small[d]), encodeBound(small[d], 1.f / 1024));
  // A later row leaves the scale alone when it fits.
  writeToken(pool, 1, 1, small, small);
  EXPECT_EQ(pool.scales[pool.layout.scaleIndex(0, 1, 0, 0)], fp8KvScaleFor(0.0123f));
}

TEST(KvFp8Test, NonFiniteRowsAreRejectedWithTheirToken) {
  std::vector<float> k(3 * 8, 0.5f), v(3 * 8, 0.25f);
  EXPECT_TRUE(checkKvRowsFinite(k.data(), v.data(), 3, 8, 4).ok());
  v[2 * 8 + 5] = std::numeric_limits<float>::quiet_NaN();
  Status st = checkKvRowsFinite(k.data(), v.data(), 3, 8, 4);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("layer 4"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("value of token 2"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("NaN"), std::string::npos) << st.message();
  v[2 * 8 + 5] = 0.f;
  k[7] = -std::numeric_limits<float>::infinity();
  st = checkKvRowsFinite(k.data(), v.data(), 3, 8, 0);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("key of token 0"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("infinity"), std::string::npos) << st.message();
}

TEST(KvFp8Test, CopiesKeepTheValues) {
  std::mt19937 rng(15);
  const int64_t bs = 8, Hkv = 2, D = 16;
  Pool pool(4, bs, Hkv, D);
  std::normal_distribution<float> n01(0.f, 1.f);
  auto token = [&](float mag) {
    std::vector<float> x(Hkv * D);
    for (float& e : x) e = n01(rng) * mag;
    return x;
  };
  // Block 0: 8 rows of magnitude ~1; block 1: 3 rows of ~0.01; both layers.
  for (int64_t layer = 0; layer < 2; ++layer) {
    for (int32_t s = 0; s < bs; ++s) writeToken(pool, layer, s, token(1.f), token(2.f));
    for (int32_t s = 0; s < 3; ++s) writeToken(pool, layer, bs + s, token(0.01f), token(0.02f));
  }
  // Copy-on-write of a block: bytes and scales exactly.
  kvCopyBlockFp8(pool.view(), pool.layout, 0, 3);
  const int64_t n = pool.layout.blockFloats(), m = pool.layout.blockScales();
  EXPECT_EQ(std::memcmp(&pool.codes[3 * n], &pool.codes[0], n), 0);
  EXPECT_EQ(std::memcmp(&pool.scales[3 * m], &pool.scales[0], m * sizeof(float)), 0);

  auto snapshot = [&](int32_t slot) {
    std::vector<float> x;
    for (int64_t layer = 0; layer < 2; ++layer)
      for (int64_t kv = 0; kv < 2; ++kv)
        for (int64_t h = 0; h < Hkv; ++h)
          for (int64_t d = 0; d < D; ++d) x.push_back(pool.value(slot, layer, kv, h, d));
    return x;
  };
  // Slot moves as a verified speculative path is compacted: within block 0 (codes
  // copied), from block 0 into block 1 (whose scale must grow: its rows are re-encoded),
  // and from block 1 back into block 0 (a smaller value under a larger scale).
  const std::vector<float> a = snapshot(6), b = snapshot(5), c = snapshot(bs + 1);
  const std::vector<float> keep = snapshot(bs + 0);
  kvCopySlotsFp8(pool.view(), pool.layout, {{6, 2}, {5, bs + 2}, {bs + 1, 4}});
  EXPECT_EQ(snapshot(2), a);
  EXPECT_EQ(snapshot(bs + 2), b);  // exact: block 1's scale grew to cover the row
  // Re-encoding 0.01-sized values under a ~1 scale: at most one rounding, relative to it.
  const std::vector<float> c4 = snapshot(4), keep2 = snapshot(bs + 0);
  for (size_t i = 0; i < c.size(); ++i) {
    const int64_t layer = i / (2 * Hkv * D), kv = (i / (Hkv * D)) % 2, h = (i / D) % Hkv;
    const float s0 = pool.scales[pool.layout.scaleIndex(0, layer, kv, h)];
    const float s1 = pool.scales[pool.layout.scaleIndex(1, layer, kv, h)];
    EXPECT_LE(std::fabs(c4[i] - c[i]), encodeBound(c[i], s0)) << i;
    EXPECT_LE(std::fabs(keep2[i] - keep[i]), encodeBound(keep[i], s1)) << i;
  }
}

}  // namespace
}  // namespace ingot
