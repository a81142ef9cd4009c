// Paged attention on CPU: one work item per (token, kv head), two passes over the KV.
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

Status pagedAttention(const float* q, const float* cache, const KvCacheLayout& layout,
                      const AttentionBatch& batch, const AttentionParams& params, float* out,
                      ThreadPool& pool, const CpuKernels& kernels, AttentionScratch& scratch) {
  const int64_t H = params.num_heads, Hkv = params.num_kv_heads, D = params.head_dim;
  const int64_t group = H / Hkv;
  const int64_t T = batch.num_tokens;
  if (params.variant.mask) {
    INGOT_RETURN_IF_ERROR(params.variant.mask->checkOperands(params.extra, params.num_extra));
  }
  if (params.variant.score) {
    INGOT_RETURN_IF_ERROR(params.variant.score->checkOperands(params.extra, params.num_extra));
  }

  scratch.request_of_token.assign(T, 0);
  int64_t maxLen = 0;
  for (int64_t b = 0; b < batch.num_requests; ++b) {
    for (int64_t t = batch.query_start[b]; t < batch.query_start[b + 1]; ++t)
      scratch.request_of_token[t] = static_cast<int32_t>(b);
    maxLen = std::max<int64_t>(maxLen, batch.seq_lens[b]);
  }
  scratch.scores.resize(pool.size());
  scratch.visible.resize(pool.size());
  for (int w = 0; w < pool.size(); ++w) {
    if (static_cast<int64_t>(scratch.scores[w].size()) < group * maxLen)
      scratch.scores[w].resize(group * maxLen);
    if (static_cast<int64_t>(scratch.visible[w].size()) < maxLen)
      scratch.visible[w].resize(maxLen);
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

  pool.parallelForDynamic(T * Hkv, [&](int64_t item, int worker) {
    if (failed.load(std::memory_order_relaxed)) return;
    const int64_t t = item / Hkv, g = item % Hkv;
    const int64_t b = scratch.request_of_token[t];
    const int64_t len = batch.seq_lens[b];
    const int64_t newTokens = batch.query_start[b + 1] - batch.query_start[b];
    const int64_t qSlot = len - newTokens + (t - batch.query_start[b]);
    const int32_t* blocks = batch.block_tables + b * batch.max_blocks;
    float* scores = scratch.scores[worker].data();
    uint8_t* visible = scratch.visible[worker].data();

    // Mask, shared by the group's heads unless it reads h.
    bool perHeadMask = false;
    if (!variant.mask) {
      std::memset(visible, 1, len);
    } else if (variant.mask_is_causal) {
      for (int64_t kv = 0; kv < len; ++kv) visible[kv] = kv <= qSlot;
    } else if (!variant.mask_reads_head) {
      for (int64_t kv = 0; kv < len; ++kv) {
        StatusOr<bool> m = variant.mask->evalMaskPrechecked(b, g * group, qSlot, kv, params.extra,
                                                  params.num_extra);
        if (!m.ok()) return fail(m.status());
        visible[kv] = *m;
      }
    } else {
      perHeadMask = true;
    }

    // Pass 1: scores.
    for (int64_t kv = 0; kv < len; ++kv) {
      const float* krow =
          cache + layout.rowOffset(blocks[kv / layout.block_size], params.layer, 0,
                                   kv % layout.block_size) + g * D;
      for (int64_t j = 0; j < group; ++j) {
        const int64_t h = g * group + j;
        float& s = scores[j * len + kv];
        if (perHeadMask) {
          StatusOr<bool> m = variant.mask->evalMaskPrechecked(b, h, qSlot, kv, params.extra,
                                                    params.num_extra);
          if (!m.ok()) return fail(m.status());
          if (!*m) {
            s = negInf;
            continue;
          }
        } else if (!visible[kv]) {
          s = negInf;
          continue;
        }
        float v = params.scale * kernels.dot(q + t * H * D + h * D, krow, D);
        if (variant.score) {
          StatusOr<float> r = variant.score->evalScorePrechecked(v, b, h, qSlot, kv, params.extra,
                                                       params.num_extra);
          if (!r.ok()) return fail(r.status());
          v = *r;
        }
        s = v;
      }
    }

    // Pass 2: softmax and the weighted sum of V, per head.
    for (int64_t j = 0; j < group; ++j) {
      const int64_t h = g * group + j;
      float* o = out + t * H * D + h * D;
      std::memset(o, 0, D * sizeof(float));
      float* sj = scores + j * len;
      float mx = negInf;
      for (int64_t kv = 0; kv < len; ++kv) mx = std::max(mx, sj[kv]);
      if (mx == negInf) continue;  // nothing visible (or only -inf scores): zeros
      float sum = 0.f;
      for (int64_t kv = 0; kv < len; ++kv) {
        const float p = sj[kv] == negInf ? 0.f : std::exp(sj[kv] - mx);
        sj[kv] = p;
        sum += p;
      }
      for (int64_t kv = 0; kv < len; ++kv) {
        if (sj[kv] == 0.f) continue;
        const float* vrow =
            cache + layout.rowOffset(blocks[kv / layout.block_size], params.layer, 1,
                                     kv % layout.block_size) + g * D;
        kernels.axpy(sj[kv], vrow, o, D);
      }
      const float inv = 1.0f / sum;
      for (int64_t d = 0; d < D; ++d) o[d] *= inv;
    }
  });
  return firstError;
}

}  // namespace ingot
