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
namespace {

/// Mask region argument numbers (schemas/region_bytecode.h).
constexpr uint8_t kMaskArgHead = 1;
constexpr uint8_t kMaskArgQ = 2;
constexpr uint8_t kMaskArgKv = 3;

/// True when `program` is exactly: q, kv arguments, one compare meaning kv <= q, yield.
bool isCausalMask(const RegionProgram& program) {
  int qReg = -1, kvReg = -1, cmpReg = -1;
  const RegionInstruction* cmp = nullptr;
  for (const RegionInstruction& ins : program.instructions()) {
    switch (ins.opcode) {
      case RegionOpcode::kArgument:
        if (ins.a8 == kMaskArgQ) qReg = ins.dst;
        else if (ins.a8 == kMaskArgKv) kvReg = ins.dst;
        break;
      case RegionOpcode::kCmpI:
        if (cmp) return false;
        cmp = &ins;
        cmpReg = ins.dst;
        break;
      case RegionOpcode::kYield:
        if (!cmp || ins.src[0] != cmpReg) return false;
        break;
      default:
        return false;
    }
  }
  if (!cmp || qReg < 0 || kvReg < 0) return false;
  const auto p = static_cast<CmpIPredicate>(cmp->a8);
  const int lhs = cmp->src[0], rhs = cmp->src[1];
  // q and kv are non-negative, so signed and unsigned orders agree.
  if ((p == CmpIPredicate::kUle || p == CmpIPredicate::kSle) && lhs == kvReg && rhs == qReg)
    return true;
  if ((p == CmpIPredicate::kUge || p == CmpIPredicate::kSge) && lhs == qReg && rhs == kvReg)
    return true;
  return false;
}

}  // namespace

void AttentionVariantPrograms::analyze() {
  mask_reads_head = false;
  mask_is_causal = false;
  if (!mask) return;
  for (const RegionInstruction& ins : mask->instructions())
    if (ins.opcode == RegionOpcode::kArgument && ins.a8 == kMaskArgHead) mask_reads_head = true;
  mask_is_causal = isCausalMask(*mask);
}

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

using AttentionItem = AttentionScratch::Item;

}  // namespace

Status pagedAttention(const float* q, const float* cache, const KvCacheLayout& layout,
                      const AttentionBatch& batch, const AttentionParams& params, float* out,
                      ThreadPool& pool, const CpuKernels& kernels, AttentionScratch& scratch) {
  const int64_t H = params.num_heads, Hkv = params.num_kv_heads, D = params.head_dim;
  const int64_t group = H / Hkv;
  const int64_t bs = layout.block_size;
  const int64_t rowFloats = layout.rowFloats();
  if (params.variant.mask) {
    INGOT_RETURN_IF_ERROR(params.variant.mask->checkOperands(params.extra, params.num_extra));
  }
  if (params.variant.score) {
    INGOT_RETURN_IF_ERROR(params.variant.score->checkOperands(params.extra, params.num_extra));
  }

  // Tiles of up to kQueryTile consecutive new tokens of one request.
  std::vector<AttentionItem>& items = scratch.items;
  items.clear();
  for (int64_t b = 0; b < batch.num_requests; ++b)
    for (int64_t t = batch.query_start[b]; t < batch.query_start[b + 1]; t += kQueryTile)
      items.push_back({b, t, std::min<int64_t>(t + kQueryTile, batch.query_start[b + 1])});

  // Per worker: scores/probabilities [tile token][head][key in block], the running max and
  // sum and the rescale factor per (tile token, head), the mask of one block.
  const int64_t rowsPerTile = kQueryTile * group;
  scratch.scores.resize(pool.size());
  scratch.visible.resize(pool.size());
  scratch.softmax.resize(pool.size());
  for (int w = 0; w < pool.size(); ++w) {
    scratch.scores[w].resize(rowsPerTile * bs);
    scratch.visible[w].resize(kQueryTile * bs);
    scratch.softmax[w].resize(3 * rowsPerTile);
  }

  std::atomic<bool> failed{false};
  std::mutex errorMutex;
  Status firstError;
  auto fail = [&](const Status& s) {
    std::lock_guard<std::mutex> lock(errorMutex);
    if (firstError.ok()) firstError = s;
    failed.store(true);
  };
  const AttentionVariantPrograms& variant = params.variant;
  const float negInf = -std::numeric_limits<float>::infinity();
  const bool perHeadMask = variant.mask && !variant.mask_is_causal && variant.mask_reads_head;
  const bool sharedMask = variant.mask && !variant.mask_is_causal && !variant.mask_reads_head;

  const int64_t numItems = static_cast<int64_t>(items.size());
  pool.parallelForDynamic(numItems * Hkv, [&](int64_t index, int worker) {
    if (failed.load(std::memory_order_relaxed)) return;
    const AttentionItem& item = items[index / Hkv];
    const int64_t g = index % Hkv;
    const int64_t b = item.b, tileTokens = item.t1 - item.t0;
    const int64_t len = batch.seq_lens[b];
    const int64_t newTokens = batch.query_start[b + 1] - batch.query_start[b];
    const int64_t firstSlot = len - newTokens + (item.t0 - batch.query_start[b]);
    const int32_t* blocks = batch.block_tables + b * batch.max_blocks;
    float* scores = scratch.scores[worker].data();
    uint8_t* visible = scratch.visible[worker].data();
    float* runMax = scratch.softmax[worker].data();
    float* runSum = runMax + rowsPerTile;
    float* alpha = runSum + rowsPerTile;

    // Keys a token may see at most: a causal token sees up to its own slot.
    int64_t keysOf[kQueryTile];
    int64_t tileKeys = 0;
    for (int64_t i = 0; i < tileTokens; ++i) {
      keysOf[i] = variant.mask_is_causal ? firstSlot + i + 1 : len;
      tileKeys = std::max(tileKeys, keysOf[i]);
      std::memset(out + (item.t0 + i) * H * D + g * group * D, 0, group * D * sizeof(float));
    }
    std::fill(runMax, runMax + rowsPerTile, negInf);
    std::fill(runSum, runSum + rowsPerTile, 0.f);

    for (int64_t start = 0; start < tileKeys; start += bs) {
      const int64_t block = blocks[start / bs];
      const float* krows = cache + layout.rowOffset(block, params.layer, 0, 0) + g * D;
      const float* vrows = cache + layout.rowOffset(block, params.layer, 1, 0) + g * D;
      // The next block's rows of this head come from L3 or DRAM at a stride the hardware
      // prefetcher does not follow across blocks: ask for them while this block computes.
      if (start + bs < tileKeys) {
        const int64_t next = blocks[start / bs + 1];
        for (int64_t kv = 0; kv < 2; ++kv) {
          const char* base = reinterpret_cast<const char*>(
              cache + layout.rowOffset(next, params.layer, kv, 0) + g * D);
          for (int64_t r = 0; r < bs; ++r)
            for (int64_t off = 0; off < D * static_cast<int64_t>(sizeof(float)); off += 64)
              __builtin_prefetch(base + r * rowFloats * sizeof(float) + off);
        }
      }
      for (int64_t i = 0; i < tileTokens; ++i) {
        const int64_t n = std::min(bs, keysOf[i] - start);
        if (n <= 0) continue;
        const int64_t t = item.t0 + i, qSlot = firstSlot + i;
        uint8_t* vis = visible + i * bs;
        if (sharedMask) {
          bool any = false;
          for (int64_t j = 0; j < n; ++j) {
            StatusOr<bool> m = variant.mask->evalMaskPrechecked(b, g * group, qSlot, start + j,
                                                                params.extra, params.num_extra);
            if (!m.ok()) return fail(m.status());
            vis[j] = *m;
            any = any || *m;
          }
          if (!any) continue;  // the whole block is hidden from this token
        }
        float* s = scores + i * group * bs;
        kernels.qk(q + t * H * D + g * group * D, D, group, krows, rowFloats, n, D, params.scale,
                   s, bs);
        for (int64_t j = 0; j < group; ++j) {
          const int64_t h = g * group + j;
          float* sj = s + j * bs;
          for (int64_t kv = 0; kv < n; ++kv) {
            bool shown = true;
            if (sharedMask) {
              shown = vis[kv];
            } else if (perHeadMask) {
              StatusOr<bool> m = variant.mask->evalMaskPrechecked(b, h, qSlot, start + kv,
                                                                  params.extra, params.num_extra);
              if (!m.ok()) return fail(m.status());
              shown = *m;
            }
            if (!shown) {
              sj[kv] = negInf;
            } else if (variant.score) {
              StatusOr<float> r = variant.score->evalScorePrechecked(
                  sj[kv], b, h, qSlot, start + kv, params.extra, params.num_extra);
              if (!r.ok()) return fail(r.status());
              sj[kv] = *r;
            }
          }
          // Online softmax: rescale what was summed so far to the new running maximum.
          const int64_t row = i * group + j;
          float blockMax = negInf;
          for (int64_t kv = 0; kv < n; ++kv) blockMax = std::max(blockMax, sj[kv]);
          const float newMax = std::max(runMax[row], blockMax);
          if (newMax == negInf) {  // nothing visible yet
            alpha[row] = 1.f;
            std::fill(sj, sj + n, 0.f);
            continue;
          }
          alpha[row] = runMax[row] == negInf ? 0.f : std::exp(runMax[row] - newMax);
          const float sum = kernels.exp_shifted(sj, n, newMax);
          runSum[row] = runSum[row] * alpha[row] + sum;
          runMax[row] = newMax;
        }
        kernels.pv(s, bs, group, vrows, rowFloats, n, D, alpha + i * group,
                   out + t * H * D + g * group * D, D);
      }
    }
    // Normalize; a row that saw nothing keeps its zeros.
    for (int64_t i = 0; i < tileTokens; ++i)
      for (int64_t j = 0; j < group; ++j) {
        const float sum = runSum[i * group + j];
        if (sum == 0.f) continue;
        const float inv = 1.0f / sum;
        float* o = out + (item.t0 + i) * H * D + (g * group + j) * D;
        for (int64_t d = 0; d < D; ++d) o[d] *= inv;
      }
  });
  return firstError;
}

}  // namespace ingot
