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

constexpr uint8_t kMaskArgB = 0;

/// The instruction defining each register (null where none does).
std::vector<const RegionInstruction*> definitions(const RegionProgram& program) {
  std::vector<const RegionInstruction*> def(program.registerCount(), nullptr);
  for (const RegionInstruction& ins : program.instructions())
    if (ins.opcode != RegionOpcode::kYield && ins.dst < def.size()) def[ins.dst] = &ins;
  return def;
}

/// Whether register `reg` is the compare kv <= q (or q >= kv) of the arguments.
bool isCausalCompare(const std::vector<const RegionInstruction*>& def, uint16_t reg) {
  const RegionInstruction* cmp = def[reg];
  if (!cmp || cmp->opcode != RegionOpcode::kCmpI) return false;
  auto isArg = [&](uint16_t r, uint8_t arg) {
    return def[r] && def[r]->opcode == RegionOpcode::kArgument && def[r]->a8 == arg;
  };
  const auto p = static_cast<CmpIPredicate>(cmp->a8);
  const uint16_t lhs = cmp->src[0], rhs = cmp->src[1];
  // q and kv are non-negative, so signed and unsigned orders agree.
  if ((p == CmpIPredicate::kUle || p == CmpIPredicate::kSle) && isArg(lhs, kMaskArgKv) &&
      isArg(rhs, kMaskArgQ))
    return true;
  return (p == CmpIPredicate::kUge || p == CmpIPredicate::kSge) && isArg(lhs, kMaskArgQ) &&
         isArg(rhs, kMaskArgKv);
}

/// Whether register `reg` depends on no mask argument but `b` (constants, loads indexed by
/// such values and arithmetic on them).
bool readsOnlyRequest(const RegionProgram& program,
                      const std::vector<const RegionInstruction*>& def, uint16_t reg) {
  std::vector<uint16_t> work{reg};
  std::vector<bool> seen(def.size(), false);
  while (!work.empty()) {
    const uint16_t r = work.back();
    work.pop_back();
    if (seen[r]) continue;
    seen[r] = true;
    const RegionInstruction* ins = def[r];
    if (!ins) return false;
    if (ins->opcode == RegionOpcode::kArgument) {
      if (ins->a8 != kMaskArgB) return false;
      continue;
    }
    for (uint8_t i = 0; i < ins->num_src && i < 3; ++i) work.push_back(ins->src[i]);
    if (ins->opcode == RegionOpcode::kRegionLoad)
      for (uint32_t d = 0; d < ins->rank; ++d)
        work.push_back(program.loadIndices()[ins->first_index + d]);
  }
  return true;
}

/// E when `reg` is the compare kv < E (signed) or E > kv with E reading only `b`; else -1.
/// (Unsigned compares are left alone: a negative E would then make every key visible.)
int prefixBound(const RegionProgram& program, const std::vector<const RegionInstruction*>& def,
                uint16_t reg) {
  const RegionInstruction* cmp = def[reg];
  if (!cmp || cmp->opcode != RegionOpcode::kCmpI) return -1;
  auto isKv = [&](uint16_t r) {
    return def[r] && def[r]->opcode == RegionOpcode::kArgument && def[r]->a8 == kMaskArgKv;
  };
  const auto p = static_cast<CmpIPredicate>(cmp->a8);
  int bound = -1;
  if (p == CmpIPredicate::kSlt && isKv(cmp->src[0])) bound = cmp->src[1];
  if (p == CmpIPredicate::kSgt && isKv(cmp->src[1])) bound = cmp->src[0];
  if (bound < 0 || !readsOnlyRequest(program, def, static_cast<uint16_t>(bound))) return -1;
  return bound;
}

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
  mask_implies_causal = mask_is_causal;
  prefix_bound_reg = -1;
  if (mask_is_causal) return;
  // yield(andi(causal, rest)) in either order; rest = ori(kv < E, ...) in either order.
  const std::vector<const RegionInstruction*> def = definitions(*mask);
  const RegionInstruction& yield = mask->instructions().back();
  const RegionInstruction* conj = def[yield.src[0]];
  if (!conj || conj->opcode != RegionOpcode::kAndI) return;
  for (int side = 0; side < 2; ++side) {
    if (!isCausalCompare(def, conj->src[side])) continue;
    mask_implies_causal = true;
    const RegionInstruction* disj = def[conj->src[1 - side]];
    if (!disj || disj->opcode != RegionOpcode::kOrI) return;
    for (int alt = 0; alt < 2 && prefix_bound_reg < 0; ++alt)
      prefix_bound_reg = prefixBound(*mask, def, disj->src[alt]);
    return;
  }
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

Status pagedAttention(const float* q, const KvCacheView& cache, const KvCacheLayout& layout,
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
  scratch.tree_keys.resize(pool.size());
  scratch.gathered.resize(pool.size());
  for (int w = 0; w < pool.size(); ++w) {
    scratch.gathered[w].resize(2 * bs * D);
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

  // Keys below a request's prefix bound are visible (given kv <= q) without evaluation.
  std::vector<int64_t>& visibleBelow = scratch.visible_below;
  visibleBelow.assign(batch.num_requests, variant.mask ? 0 : std::numeric_limits<int64_t>::max());
  if (variant.mask && variant.prefix_bound_reg >= 0) {
    for (int64_t b = 0; b < batch.num_requests; ++b) {
      StatusOr<int64_t> bound = variant.mask->evalRegisterPrechecked(
          static_cast<uint16_t>(variant.prefix_bound_reg), b, 0, 0, 0, params.extra,
          params.num_extra);
      if (!bound.ok()) return bound.status();
      visibleBelow[b] = std::max<int64_t>(*bound, 0);
    }
  }

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
    // Decoded rows of an fp8 block (K, then V), [bs, D] each; also the tree's gathered rows.
    float* gk = scratch.gathered[worker].data();
    float* gv = gk + bs * D;
    const bool fp8 = cache.codes != nullptr;

    // Rows [0, n) of `block`'s K and V for this kv head, at *stride: in place in an f32
    // pool, else decoded into gk / gv.
    auto blockRows = [&](int64_t block, int64_t n, const float** krows, const float** vrows,
                         int64_t* stride) {
      if (!fp8) {
        *krows = cache.f32 + layout.rowOffset(block, params.layer, 0, 0) + g * D;
        *vrows = cache.f32 + layout.rowOffset(block, params.layer, 1, 0) + g * D;
        *stride = rowFloats;
        return;
      }
      for (int64_t kv = 0; kv < 2; ++kv)
        cache.decode(cache.codes + layout.rowOffset(block, params.layer, kv, 0) + g * D,
                     rowFloats, n, D, cache.scales[layout.scaleIndex(block, params.layer, kv, g)],
                     kv == 0 ? gk : gv, D);
      *krows = gk;
      *vrows = gv;
      *stride = D;
    };

    // Scores of token i against n keys (rows k/v at `stride`), masked by `vis` (null: all
    // shown), then one online-softmax step and the p.v accumulation. `slot0` + j, or
    // slots[j] when given, is key j's KV slot (for the mask and score regions).
    auto accumulate = [&](int64_t i, const float* krows, const float* vrows, int64_t stride,
                          int64_t n, int64_t slot0, const int64_t* slots, const uint8_t* vis,
                          int64_t evalFrom) -> bool {
      const int64_t t = item.t0 + i, qSlot = firstSlot + i;
      float* s = scores + i * group * bs;
      kernels.qk(q + t * H * D + g * group * D, D, group, krows, stride, n, D, params.scale, s,
                 bs);
      for (int64_t j = 0; j < group; ++j) {
        const int64_t h = g * group + j;
        float* sj = s + j * bs;
        for (int64_t kv = 0; kv < n; ++kv) {
          const int64_t slot = slots ? slots[kv] : slot0 + kv;
          bool shown = true;
          if (vis) {
            shown = vis[kv];
          } else if (perHeadMask && !slots && kv >= evalFrom) {
            StatusOr<bool> m = variant.mask->evalMaskPrechecked(b, h, qSlot, slot, params.extra,
                                                                params.num_extra);
            if (!m.ok()) return fail(m.status()), false;
            shown = *m;
          }
          if (!shown) {
            sj[kv] = negInf;
          } else if (variant.score) {
            StatusOr<float> r = variant.score->evalScorePrechecked(sj[kv], b, h, qSlot, slot,
                                                                   params.extra, params.num_extra);
            if (!r.ok()) return fail(r.status()), false;
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
      kernels.pv(s, bs, group, vrows, stride, n, D, alpha + i * group,
                 out + t * H * D + g * group * D, D);
      return true;
    };

    // Keys a token may see at most: a causal token sees up to its own slot. A token inside
    // its request's speculative tree (at or past the prefix bound) is done apart, below.
    int64_t keysOf[kQueryTile];
    bool gathered[kQueryTile];
    int64_t tileKeys = 0;
    for (int64_t i = 0; i < tileTokens; ++i) {
      keysOf[i] = variant.mask_implies_causal ? firstSlot + i + 1 : len;
      gathered[i] = sharedMask && variant.prefix_bound_reg >= 0 && firstSlot + i >= visibleBelow[b];
      if (gathered[i]) keysOf[i] = 0;
      tileKeys = std::max(tileKeys, keysOf[i]);
      std::memset(out + (item.t0 + i) * H * D + g * group * D, 0, group * D * sizeof(float));
    }
    std::fill(runMax, runMax + rowsPerTile, negInf);
    std::fill(runSum, runSum + rowsPerTile, 0.f);

    for (int64_t start = 0; start < tileKeys; start += bs) {
      const int64_t block = blocks[start / bs];
      const float* krows = nullptr;
      const float* vrows = nullptr;
      int64_t stride = 0;
      // The next block's rows of this head come from L3 or DRAM at a stride the hardware
      // prefetcher does not follow across blocks: ask for them while this block computes.
      if (start + bs < tileKeys) {
        const int64_t next = blocks[start / bs + 1];
        const int64_t elem = fp8 ? 1 : static_cast<int64_t>(sizeof(float));
        for (int64_t kv = 0; kv < 2; ++kv) {
          const int64_t at = layout.rowOffset(next, params.layer, kv, 0) + g * D;
          const char* base = fp8 ? reinterpret_cast<const char*>(cache.codes + at)
                                 : reinterpret_cast<const char*>(cache.f32 + at);
          for (int64_t r = 0; r < bs; ++r)
            for (int64_t off = 0; off < D * elem; off += 64)
              __builtin_prefetch(base + r * rowFloats * elem + off);
        }
      }
      for (int64_t i = 0; i < tileTokens; ++i) {
        const int64_t n = std::min(bs, keysOf[i] - start);
        if (n <= 0) continue;
        const int64_t qSlot = firstSlot + i;
        uint8_t* vis = visible + i * bs;
        // Keys [start, start + evalFrom) of this block are visible without evaluation.
        const int64_t evalFrom = std::clamp<int64_t>(visibleBelow[b] - start, 0, n);
        if (sharedMask) {
          bool any = evalFrom > 0;
          std::memset(vis, 1, evalFrom);
          for (int64_t j = evalFrom; j < n; ++j) {
            StatusOr<bool> m = variant.mask->evalMaskPrechecked(b, g * group, qSlot, start + j,
                                                                params.extra, params.num_extra);
            if (!m.ok()) return fail(m.status());
            vis[j] = *m;
            any = any || *m;
          }
          if (!any) continue;  // the whole block is hidden from this token
        }
        if (!krows) blockRows(block, std::min(bs, tileKeys - start), &krows, &vrows, &stride);
        if (!accumulate(i, krows, vrows, stride, n, start, nullptr, sharedMask ? vis : nullptr,
                        evalFrom))
          return;
      }
    }

    // Tokens of a speculative tree attend to the keys below the bound and to the tree keys
    // the mask shows, gathered into one virtual sequence in slot order: a tree node's path
    // then sits at the positions it has when decoded token by token, so it is scored in the
    // same blocks, in the same order — bitwise the logits of sequential decoding.
    for (int64_t i = 0; i < tileTokens; ++i) {
      if (!gathered[i]) continue;
      const int64_t qSlot = firstSlot + i, bound = visibleBelow[b];
      std::vector<int64_t>& keys = scratch.tree_keys[worker];
      keys.clear();
      for (int64_t kv = 0; kv < bound; ++kv) keys.push_back(kv);
      for (int64_t kv = bound; kv <= qSlot; ++kv) {
        StatusOr<bool> m = variant.mask->evalMaskPrechecked(b, g * group, qSlot, kv, params.extra,
                                                            params.num_extra);
        if (!m.ok()) return fail(m.status());
        if (*m) keys.push_back(kv);
      }
      const int64_t total = static_cast<int64_t>(keys.size());
      for (int64_t start = 0; start < total; start += bs) {
        const int64_t n = std::min(bs, total - start);
        if (start + n <= bound) {  // a whole block below the bound: read in place
          const float* krows = nullptr;
          const float* vrows = nullptr;
          int64_t stride = 0;
          blockRows(blocks[start / bs], n, &krows, &vrows, &stride);
          if (!accumulate(i, krows, vrows, stride, n, start, nullptr, nullptr, n)) return;
          continue;
        }
        for (int64_t j = 0; j < n; ++j) {
          const int64_t slot = keys[start + j];
          const int64_t block = blocks[slot / bs], off = slot % bs;
          for (int64_t kv = 0; kv < 2; ++kv) {
            const int64_t at = layout.rowOffset(block, params.layer, kv, off) + g * D;
            float* dst = (kv == 0 ? gk : gv) + j * D;
            if (fp8)
              cache.decode(cache.codes + at, rowFloats, 1, D,
                           cache.scales[layout.scaleIndex(block, params.layer, kv, g)], dst, D);
            else
              std::memcpy(dst, cache.f32 + at, D * sizeof(float));
          }
        }
        if (!accumulate(i, gk, gv, D, n, 0, keys.data() + start, nullptr, n)) return;
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
