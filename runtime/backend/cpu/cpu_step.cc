// CpuStep: the thread-pool helpers the CPU functions of the op definitions share.
#include "runtime/backend/cpu/cpu_step.h"

#include <algorithm>

#include "runtime/backend/cpu/cpu_ops.h"

namespace ingot {

void CpuStep::rows(int64_t width, const std::function<void(int64_t, int64_t)>& fn) const {
  if (tokens * width < kMinParallelElements) fn(0, tokens);
  else pool->parallelRanges(tokens, 1, fn);
}

void CpuStep::roundInputsToBf16(LinearArgs& args) const {
  if (!kernels->bf16_activations || args.w_type != WeightType::kBF16) return;
  // Rounded once per call, read by every weight row.
  if (x_bf16->size() < static_cast<size_t>(args.T * args.x_stride))
    x_bf16->resize(args.T * args.x_stride);
  uint16_t* xb = x_bf16->data();
  auto round = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      kernels->round_to_bf16(args.x + t * args.x_stride, args.K, xb + t * args.x_stride);
  };
  // args.T, not the step's token count: the logits linear reads only gathered rows.
  if (args.T * args.K < kMinParallelElements) round(0, args.T);
  else pool->parallelRanges(args.T, 1, round);
  args.x_bf16 = xb;
}

void CpuStep::columns(int64_t N, int64_t macs,
                      const std::function<void(int64_t, int64_t)>& fn) const {
  if (macs < kMinParallelMacs) fn(0, N);
  else pool->parallelRanges(N, kRowGrain, fn);
}

void CpuStep::linear(LinearArgs args, int64_t N) const {
  const LinearKernel kernel = kernels->linear[static_cast<int>(args.w_type)];
  roundInputsToBf16(args);
  columns(N, args.T * N * args.K, [&](int64_t n0, int64_t n1) { kernel(args, n0, n1); });
}

QuantLinearArgs CpuStep::prepareQuantized(const QuantMatrix& w, const float* x) const {
  const QuantKernels& qk = *quant_kernels;
  const int64_t T = tokens;
  const int64_t stride = qk.prepared_floats(w);
  if (xq->size() < static_cast<size_t>(T * stride)) xq->resize(T * stride);
  float* prepared = xq->data();
  auto prepare = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) qk.prepare(w, x + t * w.K, prepared + t * stride);
  };
  if (T * w.K < kMinParallelElements) prepare(0, T);
  else pool->parallelRanges(T, 1, prepare);
  QuantLinearArgs a;
  a.w = &w;
  a.xq = prepared;
  a.xq_stride = stride;
  a.y_stride = w.N;
  a.T = T;
  return a;
}

void CpuStep::quantizedLinear(const QuantMatrix& w, const float* x, const float* bias,
                              float* y) const {
  QuantLinearArgs a = prepareQuantized(w, x);
  a.bias = bias;
  a.y = y;
  const QuantKernels& qk = *quant_kernels;
  columns(w.N, tokens * w.N * w.K, [&](int64_t n0, int64_t n1) { qk.linear(a, n0, n1); });
}

void CpuStep::gatedLinear(const PlannedStep& gate, const PlannedStep& up, bool gelu,
                          const float* x, float* y) const {
  const int64_t T = tokens, N = gate.weight.rows(), K = gate.weight.cols();
  if (gate_rows->size() < static_cast<size_t>(T * N)) gate_rows->resize(T * N);
  float* g = gate_rows->data();
  // The up product lands in y; the activation reads the gate rows and overwrites it.
  auto activate = [&](int64_t t0, int64_t t1, int64_t n0, int64_t n1) {
    for (int64_t t = t0; t < t1; ++t) {
      if (gelu) geluMulRange(g, y, y, t * N + n0, t * N + n1);
      else siluMulRange(g, y, y, t * N + n0, t * N + n1);
    }
  };
  // Each task takes its columns through both products and the activation a block of
  // kGatedTokens tokens at a time, so the block's gate and up values are still in cache
  // when they are combined (the kernels' results do not depend on the token range).
  constexpr int64_t kGatedTokens = 64;
  const int64_t macs = 2 * T * N * K;
  if (gate.quantized) {
    // One format, K and block (planGatedLinear checks it): one preparation serves both.
    const QuantLinearArgs prepared = prepareQuantized(gate.quant, x);
    const QuantKernels& qk = *quant_kernels;
    columns(N, macs, [&](int64_t n0, int64_t n1) {
      for (int64_t t0 = 0; t0 < T; t0 += kGatedTokens) {
        QuantLinearArgs a = prepared;
        a.T = std::min(kGatedTokens, T - t0);
        a.xq = prepared.xq + t0 * prepared.xq_stride;
        a.y = g + t0 * N;
        QuantLinearArgs b = a;
        b.w = &up.quant;
        b.y = y + t0 * N;
        qk.linear(a, n0, n1);
        qk.linear(b, n0, n1);
        activate(t0, t0 + a.T, n0, n1);
      }
    });
    return;
  }
  LinearArgs whole;
  whole.K = K;
  whole.x = x;
  whole.x_stride = K;
  whole.w = gate.weight.data;
  whole.w_type = gate.weight.type;
  whole.y_stride = N;
  whole.T = T;
  roundInputsToBf16(whole);
  const LinearKernel kernel = kernels->linear[static_cast<int>(whole.w_type)];
  columns(N, macs, [&](int64_t n0, int64_t n1) {
    for (int64_t t0 = 0; t0 < T; t0 += kGatedTokens) {
      LinearArgs a = whole;
      a.T = std::min(kGatedTokens, T - t0);
      a.x = x + t0 * K;
      if (whole.x_bf16) a.x_bf16 = whole.x_bf16 + t0 * K;
      a.y = g + t0 * N;
      LinearArgs b = a;
      b.w = up.weight.data;
      b.y = y + t0 * N;
      kernel(a, n0, n1);
      kernel(b, n0, n1);
      activate(t0, t0 + a.T, n0, n1);
    }
  });
}

}  // namespace ingot
