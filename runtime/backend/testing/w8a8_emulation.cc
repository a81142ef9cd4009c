// W8A8 on the CPU: the quantized kernels with fp8 activations rounded per token to E4M3 first.
#include "runtime/backend/testing/w8a8_emulation.h"

#include <algorithm>
#include <vector>

#include "codegen/cuda/kernels/fp8_w8a8.cuh"
#include "runtime/backend/cpu/quant_formats.h"
#include "runtime/backend/cpu/simd_level.h"

namespace ingot::testing {
namespace {

/// The table wrapped (its function pointers take no context, hence a global).
const QuantKernels* gBase = nullptr;

/// One token's activations as the W8A8 quantizer leaves them (code x row scale), then the
/// base table's preparation.
void prepareW8a8(const QuantMatrix& w, const float* x, float* out) {
  if (w.format != QuantFormat::kFp8) return gBase->prepare(w, x, out);
  float absmax = 0.0f;
  for (int64_t k = 0; k < w.K; ++k) absmax = std::max(absmax, w8a8::flushedAbs(x[k]));
  const float s = w8a8::rowScale(absmax), inv = w8a8::rowInverse(s);
  std::vector<float> q(static_cast<size_t>(w.K));
  for (int64_t k = 0; k < w.K; ++k)
    q[k] = e4m3fnToF32(static_cast<uint8_t>(w8a8::activationCode(x[k], inv))) * s;
  gBase->prepare(w, q.data(), out);
}

}  // namespace

const QuantKernels& w8a8EmulatingQuantKernels() {
  static const QuantKernels table = [] {
    gBase = &quantKernels(detectSimdLevel());
    QuantKernels t = *gBase;
    t.prepare = prepareW8a8;
    return t;
  }();
  return table;
}

}  // namespace ingot::testing
