//===- WeightEncoders.h - quantized linear weights in artifact byte layout -*- C++ -*-===//
//
// Encodes an f32 weight [N, K] (N output channels, K inputs, row-major) into the byte
// layout the runtime reads (schemas/artifact.fbs), and decodes it back for tests:
// sub-byte values two per byte (element 2i in the low nibble, element 2i+1 in the high
// nibble), scales row-major [N, K / block] ([N] per channel). Also re-packs GGUF Q4_0 /
// Q4_1 blocks into the int4 group-wise layout exactly: integer shuffles and bit copies,
// no float round trip. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <vector>

#include "core/base/status.h"

namespace ingot::quant {

/// How a weight is encoded; each names one artifact QuantKind (+ ZeroKind).
enum class WeightEncoding {
  /// U4 weight, f16 scale and f16 min per group: w = scale * q + min (GGUF Q4_1 style;
  /// min = the group's minimum, scale = (max - min) / 15).
  Int4Min,
  /// U4 weight, f16 scale and f16 zero (always 8) per group: w = scale * (q - zero)
  /// (GGUF Q4_0 style; scale = the group's signed value of largest magnitude / -8).
  Int4Zero,
  /// E4M3FN weight, f32 scale per output channel = absmax / 448.
  Fp8PerChannel,
  /// E2M1 weight, E4M3FN scale per 16 inputs, one f32 global scale g = absmax / (448 * 6):
  /// w = q * scale * g.
  Nvfp4,
  /// E2M1 weight, E8M0 scale per 32 inputs: w = q * 2^e, e = floor(log2(blockmax)) - 2.
  Mxfp4,
};

/// How FP4 block scales are chosen. The bytes mean the same either way.
enum class ScaleChoice {
  /// From the block's absolute maximum, as the formats define: NVFP4
  /// s = e4m3(blockmax / (6 g)), MXFP4 e = floor(log2(blockmax)) - 2.
  Absmax,
  /// The absmax scale or one near it (NVFP4: the E4M3 codes from about 0.6x to one step
  /// above; MXFP4: e or e + 1), whichever gives the block the least squared error.
  MinError,
};

/// Elements per scale along K of the fixed-block formats (NVFP4: 16, OCP MX: 32).
inline constexpr int64_t kNvfp4BlockSize = 16;
inline constexpr int64_t kMxfp4BlockSize = 32;
/// Elements per GGUF Q4_0 / Q4_1 block (ggml's QK4_0 / QK4_1).
inline constexpr int64_t kGgmlQ4BlockSize = 32;
/// Group sizes the int4 encodings accept.
inline constexpr int64_t kInt4GroupSizes[] = {32, 64, 128};
/// The zero point of Q4_0-style int4 (an f16 8.0).
inline constexpr float kInt4Zero = 8.0f;

/// The tensors of one encoded weight, each in artifact byte layout.
struct EncodedWeight {
  /// [N, K] packed: U4 or E2M1 two per byte, E4M3FN one per byte.
  std::vector<uint8_t> weight;
  /// [N, K / block] (f16 for int4, E4M3FN for NVFP4, E8M0 for MXFP4) or [N] f32 (FP8).
  std::vector<uint8_t> scale;
  /// Int4: [N, K / group] f16 mins or zeros; empty otherwise.
  std::vector<uint8_t> offset;
  /// NVFP4: one f32; empty otherwise.
  std::vector<uint8_t> globalScale;
};

/// Elements per scale along K: the group for int4, 16 / 32 for NVFP4 / MXFP4, K for FP8.
int64_t blockSizeOf(WeightEncoding encoding, int64_t group, int64_t k);

/// Checks that [n, k] can be encoded (k a multiple of the block, an accepted int4 group).
Status checkEncodable(WeightEncoding encoding, int64_t n, int64_t k, int64_t group);

/// Encodes `values` ([n, k] row-major). `group` is the int4 group size (ignored otherwise);
/// `choice` applies to NVFP4 and MXFP4 block scales and to Int4Min ranges (MinError: the
/// group's [min, max] or that range shrunk by kInt4ClipRatios, clipping outliers).
/// `columnWeights` ([k], >= 0, optional): with MinError, each block minimises
/// sum_k c_k (w - w_hat)^2 instead of the plain squared error; c_k = E[x_k^2] of the
/// layer's input makes that the expected output error of the block (activation-aware
/// clipping, `--calib`). Fails on shapes checkEncodable rejects and on non-finite values.
StatusOr<EncodedWeight> encodeWeight(const float *values, int64_t n, int64_t k,
                                     WeightEncoding encoding, int64_t group,
                                     ScaleChoice choice = ScaleChoice::Absmax,
                                     const float *columnWeights = nullptr);

/// Range shrink factors Int4Min tries under ScaleChoice::MinError (1 = the group's own
/// [min, max]); a few steps down to 0.7x, as far as clipping pays on LLM weights.
inline constexpr float kInt4ClipRatios[] = {1.0f, 0.95f, 0.9f, 0.85f, 0.8f, 0.75f, 0.7f};

/// Re-packs GGUF blocks of a [n, k] tensor (rows of k / 32 blocks, 20 bytes each for Q4_1
/// with `hasMin`, 18 for Q4_0) into Int4Min (Q4_1) or Int4Zero (Q4_0) with group 32: the
/// f16 scale and min are copied bit for bit, the nibbles moved from ggml's block order
/// (element j in the low nibble of byte j, element j + 16 in its high nibble) to the
/// canonical one.
StatusOr<EncodedWeight> repackGgmlQ4(const uint8_t *blocks, int64_t n, int64_t k, bool hasMin);

/// Decodes `encoded` back to f32 [n, k] the way a reference runtime would: int4 as
/// `scale * q + min` / `scale * (q - zero)`, FP formats as `q * scale (* g)`, all in f32
/// without fused multiply-adds (so a Q4_x import decodes exactly as ggml dequantizes).
Status decodeWeight(const EncodedWeight &encoded, int64_t n, int64_t k, WeightEncoding encoding,
                    int64_t group, float *out);

} // namespace ingot::quant
