// Paged attention on CPU: one work item per (tile of a request's new tokens, kv head),
// one pass over the KV blocks with online softmax.
#include "runtime/backend/cpu/paged_attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>

namespace ingot {

void kvWriteRows(float* cache, const KvCacheLayout& layout, int64_t layer, const float* k,
                 const float* v, const int32_t* slot_mapping, int64_t t0, int64_t t1) {
  const int64_t row = layout.rowFloats();
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t slot = slot_mapping[t];
    const int64_t block = slot / layout.block_size, off = slot % layout.block_size;
    std::memcpy(cache + layout.rowOffset(block, layer, 0, off), k + t * row, row * sizeof(float));
    std::memcpy(cache + layout.rowOffset(block, layer, 1, off), v + t * row, row * sizeof(float));
  }
}

namespace {

/// New tokens of one request handled by one work item: they share every K/V block read,
/// which stays in L1 while the tile's queries are scored against it.
constexpr int64_t kQueryTile = 8;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

using AttentionItem = AttentionScratch::Item;

/// The first error any work item meets; the items that start after it see `failed` and
/// stop at once.
struct FirstError {
  std::atomic<bool> failed{false};
  std::mutex mutex;
  Status status;

  void record(const Status& s) {
    std::lock_guard<std::mutex> lock(mutex);
    if (status.ok()) status = s;
    failed.store(true);
  }
};

/// What every work item of one call reads, and where it reports an error.
struct AttentionCall {
  const float* q;
  const KvCacheView& cache;
  const KvCacheLayout& layout;
  const AttentionParams& params;
  const CpuKernels& kernels;
  float* out;
  int64_t H, D, group, bs, rowFloats;
  bool fp8;
  bool perHeadMask;  ///< the interpreter evaluates the mask per (head, q, kv)
  bool sharedMask;   ///< ... once per (q, kv), shared by the heads of a GQA group
  FirstError& error;
};

/// One work item: new tokens [t0, t0 + tileTokens) of request b against kv head g, with
/// its worker's scratch.
struct TileWork {
  int64_t b, g, t0, tileTokens;
  int64_t len;            ///< the request's KV length
  int64_t firstSlot;      ///< the KV slot of token t0
  int64_t visibleBelow;   ///< keys below this are visible without evaluating the mask
  const int32_t* blocks;  ///< the request's block table
  /// Scores/probabilities [tile token][head][key in block], the running max and sum and
  /// the rescale factor per (tile token, head), the shared mask of one block.
  float* scores;
  float* runMax;
  float* runSum;
  float* alpha;
  uint8_t* visible;
  /// Decoded rows of an fp8 block (K, then V), [bs, D] each; also the tree's gathered rows.
  float* gk;
  float* gv;
  std::vector<int64_t>* treeKeys;  ///< a tree token's visible keys
};

/// Tiles of up to kQueryTile consecutive new tokens of one request, and the per-worker
/// buffers sized for them.
void prepareScratch(AttentionScratch& scratch, const AttentionBatch& batch, int workers,
                    int64_t group, int64_t bs, int64_t D) {
  std::vector<AttentionItem>& items = scratch.items;
  items.clear();
  for (int64_t b = 0; b < batch.num_requests; ++b)
    for (int64_t t = batch.query_start[b]; t < batch.query_start[b + 1]; t += kQueryTile)
      items.push_back({b, t, std::min<int64_t>(t + kQueryTile, batch.query_start[b + 1])});

  const int64_t rowsPerTile = kQueryTile * group;
  scratch.scores.resize(workers);
  scratch.visible.resize(workers);
  scratch.softmax.resize(workers);
  scratch.tree_keys.resize(workers);
  scratch.gathered.resize(workers);
  for (int w = 0; w < workers; ++w) {
    scratch.gathered[w].resize(2 * bs * D);
    scratch.scores[w].resize(rowsPerTile * bs);
    scratch.visible[w].resize(kQueryTile * bs);
    scratch.softmax[w].resize(3 * rowsPerTile);
  }
}

/// Per request, the keys below its prefix bound: visible (given kv <= q) without
/// evaluating the mask. Everything without a mask, nothing for a mask without a bound.
Status computeVisibleBelow(const AttentionBatch& batch, const AttentionParams& params,
                           std::vector<int64_t>& visibleBelow) {
  const AttentionVariantPrograms& variant = params.variant;
  visibleBelow.assign(batch.num_requests, variant.mask ? 0 : std::numeric_limits<int64_t>::max());
  if (!variant.mask || variant.prefix_bound_reg < 0) return okStatus();
  for (int64_t b = 0; b < batch.num_requests; ++b) {
    StatusOr<int64_t> bound = variant.mask->evalRegisterPrechecked(
        static_cast<uint16_t>(variant.prefix_bound_reg), b, 0, 0, 0, params.extra,
        params.num_extra);
    if (!bound.ok()) return bound.status();
    visibleBelow[b] = std::max<int64_t>(*bound, 0);
  }
  return okStatus();
}

/// Work item `index` (tile index / Hkv, kv head index % Hkv) on `worker`.
TileWork tileWork(const AttentionCall& call, const AttentionBatch& batch,
                  AttentionScratch& scratch, int64_t index, int worker) {
  const int64_t Hkv = call.params.num_kv_heads;
  const AttentionItem& item = scratch.items[index / Hkv];
  const int64_t b = item.b;
  const int64_t newTokens = batch.query_start[b + 1] - batch.query_start[b];
  const int64_t rowsPerTile = kQueryTile * call.group;
  TileWork tile;
  tile.b = b;
  tile.g = index % Hkv;
  tile.t0 = item.t0;
  tile.tileTokens = item.t1 - item.t0;
  tile.len = batch.seq_lens[b];
  tile.firstSlot = tile.len - newTokens + (item.t0 - batch.query_start[b]);
  tile.visibleBelow = scratch.visible_below[b];
  tile.blocks = batch.block_tables + b * batch.max_blocks;
  tile.scores = scratch.scores[worker].data();
  tile.runMax = scratch.softmax[worker].data();
  tile.runSum = tile.runMax + rowsPerTile;
  tile.alpha = tile.runSum + rowsPerTile;
  tile.visible = scratch.visible[worker].data();
  tile.gk = scratch.gathered[worker].data();
  tile.gv = tile.gk + call.bs * call.D;
  tile.treeKeys = &scratch.tree_keys[worker];
  return tile;
}

/// Rows [0, n) of `block`'s K and V for the tile's kv head, at *stride: in place in an f32
/// pool, else decoded into gk / gv.
inline void blockRows(const AttentionCall& call, const TileWork& tile, int64_t block, int64_t n,
                      const float** krows, const float** vrows, int64_t* stride) {
  const KvCacheView& cache = call.cache;
  const int64_t layer = call.params.layer, g = tile.g, D = call.D;
  if (!call.fp8) {
    *krows = cache.f32 + call.layout.rowOffset(block, layer, 0, 0) + g * D;
    *vrows = cache.f32 + call.layout.rowOffset(block, layer, 1, 0) + g * D;
    *stride = call.rowFloats;
    return;
  }
  for (int64_t kv = 0; kv < 2; ++kv)
    cache.decode(cache.codes + call.layout.rowOffset(block, layer, kv, 0) + g * D,
                 call.rowFloats, n, D, cache.scales[call.layout.scaleIndex(block, layer, kv, g)],
                 kv == 0 ? tile.gk : tile.gv, D);
  *krows = tile.gk;
  *vrows = tile.gv;
  *stride = D;
}

/// Copies (f32) or decodes (fp8) the K and V rows of the tile's kv head at KV slots
/// slots[0, n) into gk / gv, [n, D] each.
inline void gatherRows(const AttentionCall& call, const TileWork& tile, const int64_t* slots,
                       int64_t n) {
  const KvCacheView& cache = call.cache;
  const int64_t layer = call.params.layer, g = tile.g, D = call.D, bs = call.bs;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t slot = slots[j];
    const int64_t block = tile.blocks[slot / bs], off = slot % bs;
    for (int64_t kv = 0; kv < 2; ++kv) {
      const int64_t at = call.layout.rowOffset(block, layer, kv, off) + g * D;
      float* dst = (kv == 0 ? tile.gk : tile.gv) + j * D;
      if (call.fp8)
        cache.decode(cache.codes + at, call.rowFloats, 1, D,
                     cache.scales[call.layout.scaleIndex(block, layer, kv, g)], dst, D);
      else
        std::memcpy(dst, cache.f32 + at, D * sizeof(float));
    }
  }
}

/// The next block's rows of this head come from L3 or DRAM at a stride the hardware
/// prefetcher does not follow across blocks: ask for them while this block computes.
inline void prefetchBlockRows(const AttentionCall& call, int64_t g, int64_t block) {
  const int64_t D = call.D;
  const int64_t elem = call.fp8 ? 1 : static_cast<int64_t>(sizeof(float));
  for (int64_t kv = 0; kv < 2; ++kv) {
    const int64_t at = call.layout.rowOffset(block, call.params.layer, kv, 0) + g * D;
    const char* base = call.fp8 ? reinterpret_cast<const char*>(call.cache.codes + at)
                                : reinterpret_cast<const char*>(call.cache.f32 + at);
    for (int64_t r = 0; r < call.bs; ++r)
      for (int64_t off = 0; off < D * elem; off += 64)
        __builtin_prefetch(base + r * call.rowFloats * elem + off);
  }
}

/// The first KV slot inside query slot qSlot's window (0 without one).
inline int64_t windowStart(const AttentionCall& call, int64_t qSlot) {
  const int64_t w = call.params.variant.window;
  return w > 0 ? std::max<int64_t>(0, qSlot - w + 1) : 0;
}

/// Scores `sj` of head h, query slot qSlot, against n keys: masked by its window and `vis`
/// (null: by the per-head mask from key evalFrom on, if there is one) to -inf, the rest
/// through the score region. `slot0` + kv, or slots[kv] when given, is key kv's KV slot.
inline bool maskAndScore(const AttentionCall& call, int64_t b, int64_t h, int64_t qSlot,
                         float* sj, int64_t n, int64_t slot0, const int64_t* slots,
                         const uint8_t* vis, int64_t evalFrom) {
  const AttentionParams& params = call.params;
  const AttentionVariantPrograms& variant = params.variant;
  const int64_t first = windowStart(call, qSlot);
  for (int64_t kv = 0; kv < n; ++kv) {
    const int64_t slot = slots ? slots[kv] : slot0 + kv;
    bool shown = true;
    if (slot < first) {
      shown = false;
    } else if (vis) {
      shown = vis[kv];
    } else if (call.perHeadMask && !slots && kv >= evalFrom) {
      StatusOr<bool> m =
          variant.mask->evalMaskPrechecked(b, h, qSlot, slot, params.extra, params.num_extra);
      if (!m.ok()) return call.error.record(m.status()), false;
      shown = *m;
    }
    if (!shown) {
      sj[kv] = kNegInf;
    } else if (variant.score) {
      StatusOr<float> r = variant.score->evalScorePrechecked(sj[kv], b, h, qSlot, slot,
                                                             params.extra, params.num_extra);
      if (!r.ok()) return call.error.record(r.status()), false;
      sj[kv] = *r;
    }
  }
  return true;
}

/// Online softmax of score row `row` (its n scores at sj): rescale what was summed so far
/// to the new running maximum, and turn the scores into the block's probabilities.
inline void onlineSoftmaxStep(const AttentionCall& call, const TileWork& tile, int64_t row,
                              float* sj, int64_t n) {
  float* runMax = tile.runMax;
  float* runSum = tile.runSum;
  float* alpha = tile.alpha;
  float blockMax = kNegInf;
  for (int64_t kv = 0; kv < n; ++kv) blockMax = std::max(blockMax, sj[kv]);
  const float newMax = std::max(runMax[row], blockMax);
  if (newMax == kNegInf) {  // nothing visible yet
    alpha[row] = 1.f;
    std::fill(sj, sj + n, 0.f);
    return;
  }
  alpha[row] = runMax[row] == kNegInf ? 0.f : std::exp(runMax[row] - newMax);
  const float sum = call.kernels.exp_shifted(sj, n, newMax);
  runSum[row] = runSum[row] * alpha[row] + sum;
  runMax[row] = newMax;
}

/// Scores of tile token i against n keys (rows k/v at `stride`), masked and scored
/// (maskAndScore), then one online-softmax step and the p.v accumulation. False on an
/// error, which is recorded.
inline bool accumulate(const AttentionCall& call, const TileWork& tile, int64_t i,
                       const float* krows, const float* vrows, int64_t stride, int64_t n,
                       int64_t slot0, const int64_t* slots, const uint8_t* vis,
                       int64_t evalFrom) {
  const int64_t H = call.H, D = call.D, group = call.group, bs = call.bs, g = tile.g;
  const int64_t t = tile.t0 + i, qSlot = tile.firstSlot + i;
  float* s = tile.scores + i * group * bs;
  call.kernels.qk(call.q + t * H * D + g * group * D, D, group, krows, stride, n, D,
                  call.params.scale, s, bs);
  for (int64_t j = 0; j < group; ++j) {
    float* sj = s + j * bs;
    if (!maskAndScore(call, tile.b, g * group + j, qSlot, sj, n, slot0, slots, vis, evalFrom))
      return false;
    onlineSoftmaxStep(call, tile, i * group + j, sj, n);
  }
  call.kernels.pv(s, bs, group, vrows, stride, n, D, tile.alpha + i * group,
                  call.out + t * H * D + g * group * D, D);
  return true;
}

/// The pass over the request's blocks: tile token i sees keys [0, keysOf[i]), through the
/// shared mask where there is one. False on an error, which is recorded.
bool attendBlocks(const AttentionCall& call, const TileWork& tile, const int64_t* keysOf,
                  int64_t tileKeys) {
  const AttentionParams& params = call.params;
  const int64_t bs = call.bs;
  // A sliding window: blocks before every tile token's window are never read.
  int64_t firstKey = tileKeys;
  for (int64_t i = 0; i < tile.tileTokens; ++i)
    if (keysOf[i] > 0) firstKey = std::min(firstKey, windowStart(call, tile.firstSlot + i));
  for (int64_t start = firstKey / bs * bs; start < tileKeys; start += bs) {
    const int64_t block = tile.blocks[start / bs];
    const float* krows = nullptr;
    const float* vrows = nullptr;
    int64_t stride = 0;
    if (start + bs < tileKeys) prefetchBlockRows(call, tile.g, tile.blocks[start / bs + 1]);
    for (int64_t i = 0; i < tile.tileTokens; ++i) {
      const int64_t n = std::min(bs, keysOf[i] - start);
      if (n <= 0) continue;
      const int64_t qSlot = tile.firstSlot + i;
      uint8_t* vis = tile.visible + i * bs;
      // Keys [start, start + hidden) are before the token's window (maskAndScore hides
      // them); [start, start + evalFrom) are visible without evaluation.
      const int64_t hidden = std::clamp<int64_t>(windowStart(call, qSlot) - start, 0, n);
      if (hidden == n) continue;  // the whole block is before this token's window
      const int64_t evalFrom = std::clamp<int64_t>(tile.visibleBelow - start, 0, n);
      if (call.sharedMask) {
        bool any = evalFrom > hidden;
        std::memset(vis, 1, evalFrom);
        for (int64_t j = std::max(evalFrom, hidden); j < n; ++j) {
          StatusOr<bool> m = params.variant.mask->evalMaskPrechecked(
              tile.b, tile.g * call.group, qSlot, start + j, params.extra, params.num_extra);
          if (!m.ok()) return call.error.record(m.status()), false;
          vis[j] = *m;
          any = any || *m;
        }
        if (!any) continue;  // the whole block is hidden from this token
      }
      if (!krows) blockRows(call, tile, block, std::min(bs, tileKeys - start), &krows, &vrows,
                            &stride);
      if (!accumulate(call, tile, i, krows, vrows, stride, n, start, nullptr,
                      call.sharedMask ? vis : nullptr, evalFrom))
        return false;
    }
  }
  return true;
}

/// Tile token i of a speculative tree attends to the keys below the bound and to the tree
/// keys the mask shows, gathered into one virtual sequence in slot order: a tree node's
/// path then sits at the positions it has when decoded token by token, so it is scored in
/// the same blocks, in the same order — bitwise the logits of sequential decoding. False
/// on an error, which is recorded.
bool attendTreeToken(const AttentionCall& call, const TileWork& tile, int64_t i) {
  const AttentionParams& params = call.params;
  const int64_t bs = call.bs;
  const int64_t qSlot = tile.firstSlot + i, bound = tile.visibleBelow;
  // With a window the sequence starts at the block holding its first key; keys before it
  // are hidden by maskAndScore (not evaluated), so blocks fall where sequential decoding
  // has them even when the window starts inside the tree.
  const int64_t first = windowStart(call, qSlot);
  const int64_t base = first / bs * bs;
  std::vector<int64_t>& keys = *tile.treeKeys;
  keys.clear();
  for (int64_t kv = base; kv < std::max(bound, first); ++kv) keys.push_back(kv);
  for (int64_t kv = std::max(bound, first); kv <= qSlot; ++kv) {
    StatusOr<bool> m = params.variant.mask->evalMaskPrechecked(
        tile.b, tile.g * call.group, qSlot, kv, params.extra, params.num_extra);
    if (!m.ok()) return call.error.record(m.status()), false;
    if (*m) keys.push_back(kv);
  }
  const int64_t total = static_cast<int64_t>(keys.size());
  for (int64_t start = 0; start < total; start += bs) {
    const int64_t n = std::min(bs, total - start);
    if (base + start + n <= bound) {  // a whole block below the bound: read in place
      const float* krows = nullptr;
      const float* vrows = nullptr;
      int64_t stride = 0;
      blockRows(call, tile, tile.blocks[(base + start) / bs], n, &krows, &vrows, &stride);
      if (!accumulate(call, tile, i, krows, vrows, stride, n, base + start, nullptr, nullptr, n))
        return false;
      continue;
    }
    gatherRows(call, tile, keys.data() + start, n);
    if (!accumulate(call, tile, i, tile.gk, tile.gv, call.D, n, 0, keys.data() + start, nullptr,
                    n))
      return false;
  }
  return true;
}

/// Divides each output row by its softmax sum; a row that saw nothing keeps its zeros.
void normalizeTile(const AttentionCall& call, const TileWork& tile) {
  const int64_t H = call.H, D = call.D, group = call.group;
  for (int64_t i = 0; i < tile.tileTokens; ++i)
    for (int64_t j = 0; j < group; ++j) {
      const float sum = tile.runSum[i * group + j];
      if (sum == 0.f) continue;
      const float inv = 1.0f / sum;
      float* o = call.out + (tile.t0 + i) * H * D + (tile.g * group + j) * D;
      for (int64_t d = 0; d < D; ++d) o[d] *= inv;
    }
}

/// One work item: its outputs zeroed, the block pass, the tree tokens, the normalization.
void attendTile(const AttentionCall& call, const TileWork& tile) {
  const AttentionVariantPrograms& variant = call.params.variant;
  const int64_t H = call.H, D = call.D, group = call.group;
  // Keys a token may see at most: a causal token sees up to its own slot. A token inside
  // its request's speculative tree (at or past the prefix bound) is done apart, after.
  int64_t keysOf[kQueryTile];
  bool gathered[kQueryTile];
  int64_t tileKeys = 0;
  for (int64_t i = 0; i < tile.tileTokens; ++i) {
    keysOf[i] = variant.mask_implies_causal ? tile.firstSlot + i + 1 : tile.len;
    gathered[i] = call.sharedMask && variant.prefix_bound_reg >= 0 &&
                  tile.firstSlot + i >= tile.visibleBelow;
    if (gathered[i]) keysOf[i] = 0;
    tileKeys = std::max(tileKeys, keysOf[i]);
    std::memset(call.out + (tile.t0 + i) * H * D + tile.g * group * D, 0,
                group * D * sizeof(float));
  }
  std::fill(tile.runMax, tile.runMax + kQueryTile * group, kNegInf);
  std::fill(tile.runSum, tile.runSum + kQueryTile * group, 0.f);

  if (!attendBlocks(call, tile, keysOf, tileKeys)) return;
  for (int64_t i = 0; i < tile.tileTokens; ++i)
    if (gathered[i] && !attendTreeToken(call, tile, i)) return;
  normalizeTile(call, tile);
}

}  // namespace

Status pagedAttention(const float* q, const KvCacheView& cache, const KvCacheLayout& layout,
                      const AttentionBatch& batch, const AttentionParams& params, float* out,
                      ThreadPool& pool, const CpuKernels& kernels, AttentionScratch& scratch) {
  const int64_t H = params.num_heads, Hkv = params.num_kv_heads, D = params.head_dim;
  const int64_t group = H / Hkv;
  const AttentionVariantPrograms& variant = params.variant;
  if (variant.mask) {
    INGOT_RETURN_IF_ERROR(variant.mask->checkOperands(params.extra, params.num_extra));
  }
  if (variant.score) {
    INGOT_RETURN_IF_ERROR(variant.score->checkOperands(params.extra, params.num_extra));
  }
  prepareScratch(scratch, batch, pool.size(), group, layout.block_size, D);
  INGOT_RETURN_IF_ERROR(computeVisibleBelow(batch, params, scratch.visible_below));

  FirstError error;
  const bool evaluatedMask = variant.mask && !variant.mask_is_causal;
  const AttentionCall call{q, cache, layout, params, kernels, out, H, D, group,
                           layout.block_size, layout.rowFloats(), cache.codes != nullptr,
                           evaluatedMask && variant.mask_reads_head,
                           evaluatedMask && !variant.mask_reads_head, error};
  const int64_t numItems = static_cast<int64_t>(scratch.items.size());
  pool.parallelForDynamic(numItems * Hkv, [&](int64_t index, int worker) {
    if (error.failed.load(std::memory_order_relaxed)) return;
    attendTile(call, tileWork(call, batch, scratch, index, worker));
  });
  return error.status;
}

}  // namespace ingot
