// CpuKernels: the vectorized inner loops of the CPU backend, one table per SimdLevel.
#pragma once

#include <cstdint>

#include "runtime/backend/cpu/simd_level.h"

namespace ingot {

/// Element type of a linear layer's weight as the kernels read it (from the mapping).
enum class WeightType : uint8_t { kF32 = 0, kF16 = 1, kBF16 = 2 };
constexpr int kNumWeightTypes = 3;

/// y[t, n] = sum_k x[t, k] * w[n, k] (+ bias[n]) for t < T.
struct LinearArgs {
  const float* x = nullptr;  ///< [T, x_stride] f32 rows
  int64_t x_stride = 0;
  const void* w = nullptr;   ///< [N, K] row-major, elements of type `w_type`
  WeightType w_type = WeightType::kF32;
  const float* bias = nullptr;  ///< [N] or null
  float* y = nullptr;           ///< [T, y_stride]
  int64_t y_stride = 0;
  int64_t T = 0;
  int64_t K = 0;
  /// x rounded to bf16 ([T, x_stride]); what bf16-weight kernels of a table with
  /// bf16_activations read instead of x (the caller fills it with round_to_bf16).
  const uint16_t* x_bf16 = nullptr;
};

/// Computes the outputs of rows [n_begin, n_end) of w for every token. Each y[t, n] is
/// reduced in an order that depends only on K (never on T, the row range or the thread),
/// so one token or many, alone or batched, give bitwise-identical results.
using LinearKernel = void (*)(const LinearArgs& args, int64_t n_begin, int64_t n_end);

struct CpuKernels {
  SimdLevel level = SimdLevel::kScalar;
  LinearKernel linear[kNumWeightTypes] = {};
  /// The bf16-weight linear multiplies bf16-rounded activations (LinearArgs::x_bf16):
  /// PyTorch's bf16 matmul numerics (products exact, f32 sums) at twice the f32 rate.
  bool bf16_activations = false;
  /// out[i] = x[i] rounded to the nearest even bf16; set when bf16_activations is.
  void (*round_to_bf16)(const float* x, int64_t n, uint16_t* out) = nullptr;
  /// sum_i a[i] * b[i]
  float (*dot)(const float* a, const float* b, int64_t n) = nullptr;
  /// y[i] += alpha * x[i]
  void (*axpy)(float alpha, const float* x, float* y, int64_t n) = nullptr;
  /// Attention scores of `rows` query rows against n keys:
  /// s[r * s_stride + i] = scale * sum_d q[r * q_stride + d] * k[i * k_stride + d], d < D.
  /// Each score is reduced in an order that depends only on D.
  void (*qk)(const float* q, int64_t q_stride, int64_t rows, const float* k, int64_t k_stride,
             int64_t n, int64_t D, float scale, float* s, int64_t s_stride) = nullptr;
  /// s[i] = exp(s[i] - shift) (exactly 0 where s[i] is -inf); returns the sum of the new
  /// s[i], reduced in an order that depends only on n. Relative error within 2^-22.
  float (*exp_shifted)(float* s, int64_t n, float shift) = nullptr;
  /// The value update of online softmax for `rows` output rows over n values:
  /// o[r * o_stride + d] = alpha[r] * o[...] + sum_i p[r * p_stride + i] * v[i * v_stride + d],
  /// summed in order of i.
  void (*pv)(const float* p, int64_t p_stride, int64_t rows, const float* v, int64_t v_stride,
             int64_t n, int64_t D, const float* alpha, float* o, int64_t o_stride) = nullptr;
};

/// The portable exp_shifted, which tables without a vector one use.
float expShifted(float* s, int64_t n, float shift);

/// The kernel table for `level` (which the CPU must support).
const CpuKernels& cpuKernels(SimdLevel level);

// One table per instruction set (kernels_<isa>.cc); the AVX ones fall back to the scalar
// table when the compiler cannot target x86.
const CpuKernels& scalarKernels();
const CpuKernels& avx2Kernels();
const CpuKernels& avx512Kernels();
const CpuKernels& avx512Bf16Kernels();

}  // namespace ingot
