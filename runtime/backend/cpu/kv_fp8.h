// FP8 E4M3 KV cache blocks: per-block-head power-of-two scales, appends and the row decoder.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/backend/cpu/simd_level.h"
#include "core/base/status.h"

namespace ingot {

struct KvCacheLayout;

/// The FP8 KV pool. Codes sit in the f32 pool's layout [num_blocks, layers, 2 (K, V),
/// block_size, kv_heads, head_dim] with one byte (f8E4M3FN) per element; `scales` holds one
/// f32 per (block, layer, K/V, kv head) (KvCacheLayout::scaleIndex), and element x of that
/// block-head reads back as e4m3(code) * scale.
///
/// Scales are powers of two in [kFp8KvMinScale, kFp8KvMaxScale], never zero or NaN: the
/// smallest 2^e with absmax <= 448 * 2^e over the rows written so far. A block fills token
/// by token; when a new row's absmax needs a larger scale, the block-head's other rows are
/// re-encoded to it first. The ratio of old to new scale is a power of two, so that
/// re-encoding is exact except for codes that fall into E4M3's subnormal range at the new
/// scale (magnitudes below 2^-6 * scale, i.e. under 2^-14.8 of the block's absmax), which
/// round once more to a multiple of 2^-9 * scale.
///
/// Rows are always appended in slot order, one at a time, however a step batches them, so
/// a block's bytes do not depend on chunking or batching: one token or many, alone or
/// batched, give bitwise-identical caches (and logits).
struct Fp8KvPool {
  uint8_t* codes = nullptr;
  float* scales = nullptr;
};

/// Largest finite E4M3 magnitude.
constexpr float kFp8Max = 448.0f;
/// Scale bounds: 2^-100 keeps every decoded product a normal f32 (the smallest, 2^-9 *
/// 2^-100, is far above FLT_MIN); 2^110 keeps 256 * scale (the SIMD decoder's factor)
/// finite. Magnitudes above 448 * 2^110 saturate to +-448 * 2^110.
constexpr int kFp8KvMinScaleExp = -100;
constexpr int kFp8KvMaxScaleExp = 110;

/// The scale a block-head needs for rows of largest magnitude `absmax` (finite, >= 0).
float fp8KvScaleFor(float absmax);

/// The initial scale of every block-head (a zeroed pool reads back as zeros).
float fp8KvMinScale();

/// Fails, naming the layer, the token and K or V, when a row of k or v (tokens [0, T),
/// `row` floats each) holds a NaN or an infinity: an FP8 cache cannot represent them, and a
/// scale derived from them would poison every row of the block.
Status checkKvRowsFinite(const float* k, const float* v, int64_t T, int64_t row, int64_t layer);

/// Appends the new tokens' K and V (rows [0, T) of k and v) of `layer` at slot_mapping[t],
/// in token order, for the (K/V, kv head) pairs [item0, item1) (item = kv * kv_heads +
/// head): pairs are independent, so callers split the work by them. A row written at
/// offset 0 of a block starts that block-head afresh (scale reset to the minimum): every
/// row after it belongs to a former owner of the block. Rows must be finite
/// (checkKvRowsFinite).
void kvWriteRowsFp8(const Fp8KvPool& pool, const KvCacheLayout& layout, int64_t layer,
                    const float* k, const float* v, const int32_t* slot_mapping, int64_t T,
                    int64_t item0, int64_t item1);

/// Copies every layer's K and V of block `src` to `dst` (codes and scales, exactly).
void kvCopyBlockFp8(const Fp8KvPool& pool, const KvCacheLayout& layout, int64_t src,
                    int64_t dst);

/// Moves every layer's K and V row of slot `from` to slot `to`, pair by pair in order.
/// Within one block the codes are copied; across blocks the row is decoded and appended to
/// the destination block-head without a reset (its other rows stay live), so the move is
/// exact unless the destination's scale is larger (then rounding as for re-encoding above).
void kvCopySlotsFp8(const Fp8KvPool& pool, const KvCacheLayout& layout,
                    const std::vector<std::pair<int32_t, int32_t>>& moves);

/// out[r * out_stride + d] = e4m3(codes[r * stride + d]) * scale for r < rows, d < D: exact
/// (scale is a power of two in range), the same on every SIMD level.
using Fp8RowsDecoder = void (*)(const uint8_t* codes, int64_t stride, int64_t rows, int64_t D,
                                float scale, float* out, int64_t out_stride);

/// The decoder for `level` (kv_fp8_kernels.cc).
Fp8RowsDecoder fp8RowsDecoder(SimdLevel level);

}  // namespace ingot
