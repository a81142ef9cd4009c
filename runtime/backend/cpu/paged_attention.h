// Paged attention on CPU: GQA over KV blocks, mask/score regions from variant bytecode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/region/region_program.h"
#include "runtime/backend/cpu/kernels.h"
#include "runtime/backend/cpu/kv_fp8.h"
#include "runtime/backend/cpu/thread_pool.h"
#include "core/base/status.h"

namespace ingot {

/// Geometry of the KV pool [num_blocks, layers, 2 (K, V), block_size, kv_heads, head_dim]
/// (the program's kv_cache buffer); offsets count elements (f32 or fp8 codes). An fp8 pool
/// also has one scale per (block, layer, K/V, kv head) (kv_fp8.h).
struct KvCacheLayout {
  int64_t num_layers = 0;
  int64_t block_size = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;

  int64_t rowFloats() const { return num_kv_heads * head_dim; }
  int64_t blockFloats() const { return num_layers * 2 * block_size * rowFloats(); }
  /// Offset (in floats) of the K (kv = 0) or V (kv = 1) row of `slot_in_block` of
  /// `block` in `layer`; the row holds all kv heads.
  int64_t rowOffset(int64_t block, int64_t layer, int64_t kv, int64_t slot_in_block) const {
    return (((block * num_layers + layer) * 2 + kv) * block_size + slot_in_block) * rowFloats();
  }
  /// Scales per block of an fp8 pool, and the index of one block-head's scale.
  int64_t blockScales() const { return num_layers * 2 * num_kv_heads; }
  int64_t scaleIndex(int64_t block, int64_t layer, int64_t kv, int64_t head) const {
    return ((block * num_layers + layer) * 2 + kv) * num_kv_heads + head;
  }
};

/// What attention reads: an f32 pool, or fp8 codes with their scales (kv_fp8.h) and the
/// SIMD decoder that turns a block-head's rows into f32 just before they are used.
struct KvCacheView {
  const float* f32 = nullptr;      ///< set for an f32 pool
  const uint8_t* codes = nullptr;  ///< set for an fp8 pool, with scales and decode
  const float* scales = nullptr;
  Fp8RowsDecoder decode = nullptr;
};

/// Writes k[t] and v[t] ([kv_heads * head_dim] each) of tokens [t0, t1) into
/// slot_mapping[t] of `layer`. Slots must be in range (StepInputs::validate).
void kvWriteRows(float* cache, const KvCacheLayout& layout, int64_t layer, const float* k,
                 const float* v, const int32_t* slot_mapping, int64_t t0, int64_t t1);

/// A decoded attention variant plus what the evaluator loop needs to know about it.
struct AttentionVariantPrograms {
  const RegionProgram* mask = nullptr;   ///< null: nothing is masked
  const RegionProgram* score = nullptr;  ///< null: identity
  /// False when the mask never reads its `h` argument: it is then evaluated once per
  /// (q, kv) and shared by the heads of a GQA group.
  bool mask_reads_head = true;
  /// The mask is exactly `kv <= q` (causal), apart from a window: evaluated natively,
  /// without the interpreter.
  bool mask_is_causal = false;
  /// The mask is `rest && q - kv < window` (a sliding window): keys before q - window + 1
  /// are hidden without evaluating it, and KV blocks wholly before every query's window are
  /// not read. 0: no window. The flags above and below describe `rest`.
  int64_t window = 0;
  /// The mask is `kv <= q && ...`: no key after the query's own slot is visible.
  bool mask_implies_causal = false;
  /// The mask is `kv <= q && (kv < E || ...)` with E reading only the request index `b`
  /// (e.g. the first slot of a speculative tree): register of E, else -1. Keys below E are
  /// then visible without evaluating the mask, so only keys from E on (the tree) pay the
  /// interpreter.
  int prefix_bound_reg = -1;

  /// Fills the flags from the programs' instructions.
  void analyze();
};

/// The batch layout shared by every attention step of one serving step.
struct AttentionBatch {
  const int32_t* block_tables = nullptr;  ///< [num_requests, max_blocks]
  int64_t max_blocks = 0;
  const int32_t* seq_lens = nullptr;      ///< [num_requests]
  const int32_t* query_start = nullptr;   ///< [num_requests + 1]
  int64_t num_requests = 0;
  int64_t num_tokens = 0;
};

struct AttentionParams {
  int64_t layer = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  float scale = 1.0f;
  AttentionVariantPrograms variant;
  const RegionOperandView* extra = nullptr;  ///< the op's extra operands
  size_t num_extra = 0;
};

/// Per-worker buffers reused across calls.
struct AttentionScratch {
  std::vector<std::vector<float>> scores;
  std::vector<std::vector<uint8_t>> visible;
  std::vector<std::vector<float>> softmax;
  /// (request, token range) of every work item, kv heads aside.
  struct Item {
    int64_t b, t0, t1;
  };
  std::vector<Item> items;
  /// Per request: keys below this are visible without evaluating the mask.
  std::vector<int64_t> visible_below;
  /// Per worker: a tree token's visible keys, and their gathered K and V rows.
  std::vector<std::vector<int64_t>> tree_keys;
  std::vector<std::vector<float>> gathered;
};

/// out[t, h*D:(h+1)*D] = softmax_kv(score(scale * q.k)) . v for every new token t, over
/// kv in [0, seq_lens[b]) where the mask holds (q = the token's KV slot within its request,
/// the mask region's `q` argument of docs/attention-variants.md). A query with every slot
/// masked gets zeros.
/// Each output depends only on its own token's inputs, so batching does not change it.
/// Errors: a region that traps or reads outside an extra operand.
/// An fp8 cache gives the same results as an f32 cache holding its decoded values.
Status pagedAttention(const float* q, const KvCacheView& cache, const KvCacheLayout& layout,
                      const AttentionBatch& batch, const AttentionParams& params, float* out,
                      ThreadPool& pool, const CpuKernels& kernels, AttentionScratch& scratch);

/// pagedAttention over an f32 pool.
inline Status pagedAttention(const float* q, const float* cache, const KvCacheLayout& layout,
                             const AttentionBatch& batch, const AttentionParams& params,
                             float* out, ThreadPool& pool, const CpuKernels& kernels,
                             AttentionScratch& scratch) {
  KvCacheView view;
  view.f32 = cache;
  return pagedAttention(q, view, layout, batch, params, out, pool, kernels, scratch);
}

}  // namespace ingot
