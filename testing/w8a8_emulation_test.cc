// The W8A8 emulation table: fp8 activations prepared as E4M3 codes x one scale per token,
// by the CUDA quantizer's encoder; other formats exactly as the base table prepares them.
#include "testing/w8a8_emulation.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/backend/cpu/quant_formats.h"
#include "runtime/backend/cpu/simd_level.h"
#include "testing/test_seed.h"

namespace ingot::testing {
namespace {

TEST(W8a8Emulation, Fp8ActivationsArePreparedAsPerTokenE4m3ValuesOthersAsBefore) {
  std::mt19937 rng(ingot::testing::testSeed());
  const QuantKernels& base = quantKernels(detectSimdLevel());
  const QuantKernels& emu = w8a8EmulatingQuantKernels();
  QuantMatrix fp8;
  fp8.format = QuantFormat::kFp8;
  fp8.N = 4;
  fp8.K = fp8.block = 96;
  QuantMatrix int4 = fp8;
  int4.format = QuantFormat::kInt4Min;
  int4.block = 32;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int trial = 0; trial < 20; ++trial) {
    const float spread = std::ldexp(1.0f, static_cast<int>(rng() % 40) - 20);
    std::vector<float> x(96);
    for (float& v : x) v = normal(rng) * spread;
    // The emulated row, by hand: absmax / 448, each value rounded to E4M3 at that scale.
    float absmax = 0.0f;
    for (float v : x) absmax = std::max(absmax, std::fabs(v));
    const float s = absmax / 448.0f, inv = 1.0f / s;  // the quantizer multiplies by 1 / s
    std::vector<float> q(96);
    for (size_t k = 0; k < 96; ++k) {
      const float r = x[k] * inv;
      // Nearest E4M3 value to r, ties to even code: search all 126 finite magnitudes.
      float best = 0.0f;
      int bestCode = 0;
      for (int c = 0; c <= 0x7e; ++c) {
        const float m = e4m3fnToF32(static_cast<uint8_t>(c));
        const float d = std::fabs(std::fabs(r) - m), bd = std::fabs(std::fabs(r) - best);
        if (d < bd || (d == bd && (c & 1) == 0 && (bestCode & 1) == 1)) best = m, bestCode = c;
      }
      q[k] = std::copysign(best, r) * s;
    }
    std::vector<float> want(static_cast<size_t>(base.prepared_floats(fp8)), NAN),
        got(want.size(), NAN);
    base.prepare(fp8, q.data(), want.data());
    emu.prepare(fp8, x.data(), got.data());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], std::fabs(want[i]) * 1e-6f + 1e-30f)
          << "trial " << trial << ", element " << i;
    std::vector<float> a(static_cast<size_t>(base.prepared_floats(int4)), NAN), b(a.size(), NAN);
    base.prepare(int4, x.data(), a.data());
    emu.prepare(int4, x.data(), b.data());
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "int4 unchanged";
  }
}

}  // namespace
}  // namespace ingot::testing
