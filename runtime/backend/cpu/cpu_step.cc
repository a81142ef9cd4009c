// CpuStep: the thread-pool helpers the CPU functions of the op definitions share.
#include "runtime/backend/cpu/cpu_step.h"

namespace ingot {

void CpuStep::rows(int64_t width, const std::function<void(int64_t, int64_t)>& fn) const {
  if (tokens * width < kMinParallelElements) fn(0, tokens);
  else pool->parallelRanges(tokens, 1, fn);
}

void CpuStep::linear(LinearArgs args, int64_t N) const {
  const LinearKernel kernel = kernels->linear[static_cast<int>(args.w_type)];
  if (kernels->bf16_activations && args.w_type == WeightType::kBF16) {
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
  if (args.T * N * args.K < kMinParallelMacs) kernel(args, 0, N);
  else pool->parallelRanges(N, kRowGrain, [&](int64_t n0, int64_t n1) { kernel(args, n0, n1); });
}

void CpuStep::quantizedLinear(const QuantMatrix& w, const float* x, const float* bias,
                              float* y) const {
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
  a.bias = bias;
  a.y = y;
  a.y_stride = w.N;
  a.T = T;
  if (T * w.N * w.K < kMinParallelMacs) qk.linear(a, 0, w.N);
  else pool->parallelRanges(w.N, kRowGrain, [&](int64_t n0, int64_t n1) { qk.linear(a, n0, n1); });
}

}  // namespace ingot
