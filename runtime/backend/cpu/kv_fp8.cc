// FP8 E4M3 KV cache: scale choice, token-by-token appends with re-encoding, copies.
#include "runtime/backend/cpu/kv_fp8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "runtime/backend/cpu/paged_attention.h"
#include "runtime/backend/cpu/quant_formats.h"

namespace ingot {
namespace {

/// One block-head of one layer's K or V: rows at `stride` bytes, and its scale.
struct BlockHead {
  uint8_t* rows;
  float* scale;
};

BlockHead blockHead(const Fp8KvPool& pool, const KvCacheLayout& layout, int64_t block,
                    int64_t layer, int64_t kv, int64_t head) {
  return {pool.codes + layout.rowOffset(block, layer, kv, 0) + head * layout.head_dim,
          pool.scales + layout.scaleIndex(block, layer, kv, head)};
}

/// E4M3 values of all 256 codes (NaN codes included, though appends never write them).
struct E4m3Table {
  float v[256];
  E4m3Table() {
    for (int c = 0; c < 256; ++c) v[c] = e4m3fnToF32(static_cast<uint8_t>(c));
  }
};
const E4m3Table& e4m3Table() {
  static const E4m3Table table;
  return table;
}

/// Appends x [D] as row `off` of `bh`; `fresh` first resets the scale (the block's first
/// row). Other rows are re-encoded when the scale must grow.
void appendRow(const BlockHead& bh, const KvCacheLayout& layout, int64_t off, const float* x,
               bool fresh) {
  const int64_t D = layout.head_dim, stride = layout.rowFloats();
  if (fresh) *bh.scale = fp8KvMinScale();
  float absmax = 0.0f;
  for (int64_t d = 0; d < D; ++d) absmax = std::max(absmax, std::fabs(x[d]));
  const float need = fp8KvScaleFor(absmax);
  if (need > *bh.scale) {
    // old / new is 2^-k: exact for every code that stays normal at the new scale.
    const float ratio = *bh.scale / need;
    const float* table = e4m3Table().v;
    for (int64_t r = 0; r < layout.block_size; ++r) {
      if (r == off) continue;
      uint8_t* row = bh.rows + r * stride;
      for (int64_t d = 0; d < D; ++d) row[d] = f32ToE4m3fn(table[row[d]] * ratio);
    }
    *bh.scale = need;
  }
  const float inv = 1.0f / *bh.scale;  // a power of two: x * inv is x / scale exactly
  uint8_t* row = bh.rows + off * stride;
  for (int64_t d = 0; d < D; ++d) row[d] = f32ToE4m3fn(x[d] * inv);
}

}  // namespace

float fp8KvMinScale() { return std::ldexp(1.0f, kFp8KvMinScaleExp); }

float fp8KvScaleFor(float absmax) {
  const float q = absmax / kFp8Max;
  if (!(q > 0.0f)) return fp8KvMinScale();
  int e = 0;
  const float m = std::frexp(q, &e);  // q = m * 2^e, m in [0.5, 1)
  if (m == 0.5f) --e;                 // q is a power of two itself
  return std::ldexp(1.0f, std::clamp(e, kFp8KvMinScaleExp, kFp8KvMaxScaleExp));
}

Status checkKvRowsFinite(const float* k, const float* v, int64_t T, int64_t row, int64_t layer) {
  for (int kv = 0; kv < 2; ++kv) {
    const float* x = kv == 0 ? k : v;
    for (int64_t i = 0; i < T * row; ++i)
      if (!std::isfinite(x[i]))
        return invalidArgument("kv_write layer " + std::to_string(layer) + ": the " +
                               (kv == 0 ? "key" : "value") + " of token " +
                               std::to_string(i / row) + " holds " +
                               (std::isnan(x[i]) ? "NaN" : "an infinity") +
                               ", which an fp8 KV cache cannot store");
  }
  return okStatus();
}

void kvWriteRowsFp8(const Fp8KvPool& pool, const KvCacheLayout& layout, int64_t layer,
                    const float* k, const float* v, const int32_t* slot_mapping, int64_t T,
                    int64_t item0, int64_t item1) {
  const int64_t Hkv = layout.num_kv_heads, D = layout.head_dim, row = layout.rowFloats();
  for (int64_t item = item0; item < item1; ++item) {
    const int64_t kv = item / Hkv, head = item % Hkv;
    const float* src = (kv == 0 ? k : v) + head * D;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t slot = slot_mapping[t];
      const int64_t block = slot / layout.block_size, off = slot % layout.block_size;
      appendRow(blockHead(pool, layout, block, layer, kv, head), layout, off, src + t * row,
                off == 0);
    }
  }
}

void kvCopyBlockFp8(const Fp8KvPool& pool, const KvCacheLayout& layout, int64_t src,
                    int64_t dst) {
  const int64_t codes = layout.blockFloats(), scales = layout.blockScales();
  std::memcpy(pool.codes + dst * codes, pool.codes + src * codes, codes);
  std::memcpy(pool.scales + dst * scales, pool.scales + src * scales, scales * sizeof(float));
}

void kvCopySlotsFp8(const Fp8KvPool& pool, const KvCacheLayout& layout,
                    const std::vector<std::pair<int32_t, int32_t>>& moves) {
  const int64_t bs = layout.block_size, D = layout.head_dim, stride = layout.rowFloats();
  const float* table = e4m3Table().v;
  std::vector<float> x(D);
  for (const auto& [from, to] : moves) {
    if (from == to) continue;
    const int64_t fb = from / bs, fo = from % bs, tb = to / bs, tof = to % bs;
    for (int64_t layer = 0; layer < layout.num_layers; ++layer)
      for (int64_t kv = 0; kv < 2; ++kv)
        for (int64_t head = 0; head < layout.num_kv_heads; ++head) {
          const BlockHead s = blockHead(pool, layout, fb, layer, kv, head);
          const BlockHead d = blockHead(pool, layout, tb, layer, kv, head);
          if (fb == tb) {
            std::memcpy(d.rows + tof * stride, s.rows + fo * stride, D);
            continue;
          }
          for (int64_t i = 0; i < D; ++i) x[i] = table[s.rows[fo * stride + i]] * *s.scale;
          appendRow(d, layout, tof, x.data(), /*fresh=*/false);
        }
  }
}

}  // namespace ingot
