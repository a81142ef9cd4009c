// W8A8 on the CPU: the quantized kernels with fp8 activations rounded per token to E4M3 first.
#include "testing/w8a8_emulation.h"

#include <algorithm>
#include <vector>

#include "codegen/cuda/kernels/fp8_w8a8.cuh"
#include "runtime/backend/cpu/quant_formats.h"
#include "runtime/backend/cpu/simd_level.h"

namespace ingot::testing {
namespace {

/// The tables wrapped, by SIMD level (their function pointers take no context).
const QuantKernels* gBase[4] = {};

/// One token's activations as the W8A8 quantizer leaves them (code x row scale), then the
/// base table's preparation.
template <int Level>
void prepareW8a8(const QuantMatrix& w, const float* x, float* out) {
  const QuantKernels& base = *gBase[Level];
  if (w.format != QuantFormat::kFp8) return base.prepare(w, x, out);
  float absmax = 0.0f;
  for (int64_t k = 0; k < w.K; ++k) absmax = std::max(absmax, w8a8::flushedAbs(x[k]));
  const float s = w8a8::rowScale(absmax), inv = w8a8::rowInverse(s);
  std::vector<float> q(static_cast<size_t>(w.K));
  for (int64_t k = 0; k < w.K; ++k)
    q[k] = e4m3fnToF32(static_cast<uint8_t>(w8a8::activationCode(x[k], inv))) * s;
  base.prepare(w, q.data(), out);
}

template <int Level>
const QuantKernels& emulating() {
  static const QuantKernels table = [] {
    gBase[Level] = &quantKernels(static_cast<SimdLevel>(Level));
    QuantKernels t = *gBase[Level];
    t.prepare = prepareW8a8<Level>;
    return t;
  }();
  return table;
}

}  // namespace

const QuantKernels& w8a8EmulatingQuantKernels() {
  return w8a8EmulatingQuantKernels(detectSimdLevel());
}

const QuantKernels& w8a8EmulatingQuantKernels(SimdLevel level) {
  switch (level) {
    case SimdLevel::kScalar: return emulating<0>();
    case SimdLevel::kAvx2: return emulating<1>();
    case SimdLevel::kAvx512: return emulating<2>();
    case SimdLevel::kAvx512Bf16: return emulating<3>();
  }
  return emulating<0>();
}

}  // namespace ingot::testing
