// Quantized linear layers on the CPU: the packed-weight view and its kernel table per SimdLevel.
#pragma once

#include <cstdint>

#include "runtime/backend/cpu/simd_level.h"

namespace ingot {

/// How a quantized weight's packed bytes and scales combine into w[n, k] (schemas/artifact.fbs).
enum class QuantFormat : uint8_t {
  /// u4 codes q, two per byte; per group of `block` along K a scale s and a min m:
  /// w = s * q + m (GGUF Q4_1).
  kInt4Min = 0,
  /// u4 codes q; per group a scale s and a zero z: w = s * (q - z) (GPTQ/AWQ; Q4_0 is z = 8).
  kInt4Zero = 1,
  /// f8E4M3FN codes, one per byte; w = e4m3(q) * channel_scale[n] * global_scale (per-channel,
  /// or per-tensor with channel_scale null). The vector kernels read the NaN codes 0x7F/0xFF
  /// as +-480 (a quantizer never writes them); NaN block scales do give NaN.
  kFp8 = 2,
  /// f4E2M1FN codes, two per byte; per 16 along K an f8E4M3FN scale: w = e2m1(q) * e4m3(s) * g.
  kNvfp4 = 3,
  /// f4E2M1FN codes; per 32 along K an f8E8M0FNU scale: w = e2m1(q) * 2^(s - 127).
  kMxfp4 = 4,
};

/// Element type of an int4 group's scale and zero/min tensors.
enum class GroupScaleType : uint8_t { kF16 = 0, kBF16 = 1, kF32 = 2 };

/// A quantized [N, K] weight read in place (the artifact mapping or dummy storage). Codes
/// are row-major over [N, K], sub-byte ones two per byte with element 2i in the low nibble;
/// block scales are row-major [N, K / block].
struct QuantMatrix {
  QuantFormat format = QuantFormat::kInt4Min;
  int64_t N = 0;
  int64_t K = 0;
  /// Elements per scale along K (int4 group, 16, 32); K for kFp8.
  int64_t block = 0;
  const uint8_t* codes = nullptr;
  /// int4: [N, K / block] of `scale_type`; nvfp4: f8E4M3FN bytes; mxfp4: f8E8M0FNU bytes.
  const void* scales = nullptr;
  /// int4: the zeros or mins, [N, K / block] of `scale_type`.
  const void* zeros = nullptr;
  GroupScaleType scale_type = GroupScaleType::kF16;
  /// kFp8: f32 [N], or null for one scale per tensor (in global_scale).
  const float* channel_scales = nullptr;
  /// Multiplies every output: the nvfp4 tensor scale, the fp8 per-tensor scale; else 1.
  float global_scale = 1.0f;

  int64_t groups() const { return K / block; }
  /// Bytes of one row of codes.
  int64_t rowBytes() const { return format == QuantFormat::kFp8 ? K : K / 2; }
  /// Bytes a product reads: codes, scales and zeros (what matrixBytes() counts).
  int64_t bytes() const;
};

/// y[t, n] = sum_k x[t, k] * w[n, k] (+ bias[n]) for t < T, w a QuantMatrix.
struct QuantLinearArgs {
  const QuantMatrix* w = nullptr;
  /// Activations as QuantKernels::prepare wrote them: [T, xq_stride] floats.
  const float* xq = nullptr;
  int64_t xq_stride = 0;
  const float* bias = nullptr;  ///< [N] or null
  float* y = nullptr;           ///< [T, y_stride]
  int64_t y_stride = 0;
  int64_t T = 0;
};

/// The quantized-linear kernels of one SimdLevel. Activations are prepared once per call
/// (reordered to the table's lane layout, plus per-group sums for int4) and then read by
/// every weight row: so each y[t, n] is reduced in an order that depends only on the
/// matrix's shape, never on T, the row range or the thread, and one token or many, alone or
/// batched, give bitwise-identical results. All products and sums are f32.
struct QuantKernels {
  SimdLevel level = SimdLevel::kScalar;
  /// Floats per token that prepare() writes for `w`.
  int64_t (*prepared_floats)(const QuantMatrix& w) = nullptr;
  /// Prepares one token's activations x[0, K) into out[0, prepared_floats(w)).
  void (*prepare)(const QuantMatrix& w, const float* x, float* out) = nullptr;
  /// Computes rows [n_begin, n_end) of y for every token.
  void (*linear)(const QuantLinearArgs& args, int64_t n_begin, int64_t n_end) = nullptr;
};

/// The table for `level` (which the CPU must support); kAvx512Bf16 uses the AVX-512 one.
const QuantKernels& quantKernels(SimdLevel level);

// One table per instruction set (quant_kernels_<isa>.cc); the AVX ones fall back to the
// scalar table when the compiler cannot target x86.
const QuantKernels& scalarQuantKernels();
const QuantKernels& avx2QuantKernels();
const QuantKernels& avx512QuantKernels();

}  // namespace ingot
