// Host test of the quantizing rms_norm / silu_mul (kernels/fp8_producers.cuh): their codes and
// row scales equal ingot_fp8_quantize_rows' on the same f32 output rows, bit for bit.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "test/kernels/w8a8_test_data.h"
#include "codegen/cuda/kernels/fp8_producers.cuh"

namespace ingot::w8a8 {
namespace {

constexpr unsigned char kPoisonCode = 0xAB;

/// The producer's tail as its CTA runs it on row t of `out` (already written): each thread's
/// absmax over the columns it wrote, the CTA maximum in the device's order (butterfly within
/// a warp, then the warps in turn; NaN sticks), then the quantizer's encodeRow.
void emulateProducerTail(const QuantizeRowsParams &p, int t) {
  const float *row = p.x + static_cast<long>(t) * p.x_stride;
  float warpMax[kW8a8Threads / 32];
  for (int w = 0; w < kW8a8Threads / 32; ++w) {
    float lanes[32];
    for (int l = 0; l < 32; ++l) lanes[l] = producerThreadAbsMax(row, p.K, 32 * w + l, kW8a8Threads);
    for (int off = 16; off > 0; off >>= 1) {
      float next[32];
      for (int l = 0; l < 32; ++l) {
        const float o = lanes[l ^ off], m = lanes[l];
        next[l] = (o > m || o != o) ? o : m;
      }
      std::memcpy(lanes, next, sizeof(lanes));
    }
    warpMax[w] = lanes[0];
  }
  float m = warpMax[0];
  for (int w = 1; w < kW8a8Threads / 32; ++w)
    m = (warpMax[w] > m || warpMax[w] != warpMax[w]) ? warpMax[w] : m;
  const float s = rowScale(m);
  p.row_scales[t] = s;
  for (int tid = 0; tid < kW8a8Threads; ++tid) threadEncode(p, t, tid, kW8a8Threads, rowInverse(s));
}

/// Runs both quantizations of `out` [rows, width] into poisoned buffers and compares them.
void expectProducerCodesMatchQuantizer(const std::vector<float> &out, int rows, int width,
                                       const char *what) {
  const long stride = (width + kFp8Align - 1) / kFp8Align * kFp8Align;
  std::vector<unsigned char> fused(rows * stride, kPoisonCode), separate(rows * stride, kPoisonCode);
  std::vector<float> fusedScales(rows, NAN), separateScales(rows, NAN);
  const QuantizeRowsParams fp =
      producerCodes(out.data(), fused.data(), fusedScales.data(), stride, width, rows);
  ASSERT_EQ(checkQuantizeRowsParams(fp), nullptr);
  ASSERT_EQ(checkProducerCodes(fused.data(), fusedScales.data(), stride, width, rows), nullptr);
  for (int t = 0; t < rows; ++t) emulateProducerTail(fp, t);
  QuantizeRowsParams qp = fp;
  qp.codes = separate.data();
  qp.row_scales = separateScales.data();
  testing::emulateQuantizeRows(qp);
  for (int t = 0; t < rows; ++t) {
    uint32_t a, b;
    std::memcpy(&a, &fusedScales[t], 4);
    std::memcpy(&b, &separateScales[t], 4);
    ASSERT_EQ(a, b) << what << " width " << width << " row " << t << " scale";
    for (long c = 0; c < stride; ++c)
      ASSERT_EQ(fused[t * stride + c], separate[t * stride + c])
          << what << " width " << width << " row " << t << " column " << c;
    for (long c = width; c < stride; ++c) ASSERT_EQ(fused[t * stride + c], 0) << "padding code";
  }
}

std::vector<float> randomRow(std::mt19937 &rng, size_t n, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float &x : v) x = d(rng);
  return v;
}

constexpr int kWidths[] = {64, 120, 576, 1000, 1536, 2049};

TEST(Fp8Producers, RmsNormCodesEqualTheQuantizerOnItsOutputRows) {
  std::mt19937 rng(std::random_device{}());
  for (int dim : kWidths) {
    const int rows = 6;
    const float eps = 1e-5f;
    std::vector<float> x = randomRow(rng, rows * dim, 2.0f), gamma = randomRow(rng, dim, 0.5f);
    // Row 4: tiny inputs, so eps dominates and the outputs are far below one; row 5 is zero.
    for (int d = 0; d < dim; ++d) {
      x[4 * dim + d] *= 1e-30f;
      x[5 * dim + d] = 0.0f;
    }
    std::vector<float> out(rows * dim, NAN);
    for (int t = 0; t < rows; ++t) {
      float squares = 0.0f;
      for (int d = 0; d < dim; ++d) squares += x[t * dim + d] * x[t * dim + d];
      const float inv = fused::rmsInverse(squares, dim, eps);
      for (int d = 0; d < dim; ++d)
        out[t * dim + d] = fused::rmsNormElement(x[t * dim + d], inv, gamma[d]);
    }
    expectProducerCodesMatchQuantizer(out, rows, dim, "rms_norm");
  }
}

TEST(Fp8Producers, SiluMulCodesEqualTheQuantizerOnItsOutputRows) {
  std::mt19937 rng(std::random_device{}());
  for (int width : kWidths) {
    const int rows = 5;
    std::vector<float> gate = randomRow(rng, rows * width, 3.0f),
                       up = randomRow(rng, rows * width, 1.0f), out(rows * width, NAN);
    // Row 3: tiny products (some subnormal, flushed by the encoder); row 4: a large gate.
    for (int d = 0; d < width; ++d) {
      gate[3 * width + d] *= 1e-20f;
      up[3 * width + d] *= 1e-19f;
      gate[4 * width + d] *= 1e3f;
    }
    for (int i = 0; i < rows * width; ++i) out[i] = fused::siluMul(gate[i], up[i]);
    expectProducerCodesMatchQuantizer(out, rows, width, "silu_mul");
  }
}

TEST(Fp8Producers, TiesTinyRowsNanAndInfEncodeAsTheQuantizerDoes) {
  std::mt19937 rng(std::random_device{}());
  for (int width : kWidths) {
    const int rows = 6;
    std::vector<float> out(rows * width);
    std::uniform_int_distribution<int> code(0, 0x7d), pick(0, width - 1);
    for (int d = 0; d < width; ++d) {
      // Row 0: absmax 448 (scale 1) and every other value midway between two E4M3 codes.
      const unsigned c = static_cast<unsigned>(code(rng));
      float lo, hi;
      const unsigned loBits = c, hiBits = c + 1;
      // Decode two neighbouring positive codes (e4m3: 4 exponent bits, bias 7, 3 mantissa).
      auto decode = [](unsigned b) {
        const int e = static_cast<int>(b >> 3), m = static_cast<int>(b & 7u);
        return e == 0 ? std::ldexp(static_cast<float>(m), -9)
                      : std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
      };
      lo = decode(loBits);
      hi = decode(hiBits);
      out[d] = (d & 1 ? -1.0f : 1.0f) * (lo + hi) / 2.0f;
      // Row 1: subnormal and barely normal f32 values; row 2: all below 448 * 2^-126.
      out[width + d] = std::ldexp(static_cast<float>(code(rng) + 1), -140 + d % 20);
      out[2 * width + d] = std::ldexp(static_cast<float>(code(rng) + 1), -130);
      out[3 * width + d] = static_cast<float>(d % 7) - 3.0f;
      out[4 * width + d] = static_cast<float>(d % 5) - 2.0f;
      out[5 * width + d] = 0.0f;
    }
    out[pick(rng)] = 448.0f;
    out[3 * width + pick(rng)] = std::numeric_limits<float>::quiet_NaN();
    out[4 * width + pick(rng)] = -std::numeric_limits<float>::infinity();
    expectProducerCodesMatchQuantizer(out, rows, width, "constructed");
  }
}

TEST(Fp8Producers, TheAbsmaxIsFoundInEveryColumnEveryThreadOwns) {
  // Row c has its one largest magnitude in column c: every column of every thread's share
  // (first and later passes) must reach the scale.
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> small(-1.0f, 1.0f);
  for (int width : {300, 600}) {
    std::vector<float> out(static_cast<size_t>(width) * width);
    for (int r = 0; r < width; ++r)
      for (int d = 0; d < width; ++d) out[r * width + d] = d == r ? (r & 1 ? -9.5f : 7.25f) : small(rng);
    expectProducerCodesMatchQuantizer(out, width, width, "absmax column");
  }
}

TEST(Fp8Producers, BadCodeBuffersAreNamed) {
  unsigned char codes[32];
  float scales[1];
  EXPECT_EQ(checkProducerCodes(codes, scales, 16, 16, 1), nullptr);
  EXPECT_NE(checkProducerCodes(nullptr, scales, 16, 16, 1), nullptr);
  EXPECT_NE(checkProducerCodes(codes, scales, 24, 20, 1), nullptr) << "stride not a multiple of 16";
  EXPECT_NE(checkProducerCodes(codes, scales, 16, 20, 1), nullptr) << "stride below the width";
  EXPECT_NE(checkProducerCodes(codes, scales, 16, 0, 1), nullptr) << "no columns";
}

}  // namespace
}  // namespace ingot::w8a8
