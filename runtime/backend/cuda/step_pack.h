// Host-side planning of a CUDA step: packed step inputs (with graph-bucket padding), decode
// buckets, the split-KV choice and the KV pool's size from free memory. No CUDA headers, so
// all of it is tested on machines without a GPU.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/backend/step_inputs.h"
#include "core/base/status.h"

namespace ingot {

/// Capacities of one packed step: a decode graph's fixed bucket shape, or an eager step's
/// own sizes. Every field >= the step's.
struct StepDims {
  int32_t tokens = 0;      ///< T
  int32_t requests = 0;    ///< R
  int32_t max_blocks = 0;  ///< block-table row length
  int32_t logit_rows = 0;  ///< L
};

/// Where each input array starts in the packed int32 buffer (in words), and its length.
struct StepLayout {
  int64_t tokens = 0, positions = 0, slot_mapping = 0, seq_lens = 0, query_start = 0,
          block_tables = 0, logit_rows = 0;
  /// An fp8 KV pool's write runs (packKvRuns): run_tokens [tokens], run_starts [tokens + 1].
  int64_t run_tokens = 0, run_starts = 0;
  int64_t words = 0;
};

/// The packed layout for `dims`: each array starts on a 16-word (64-byte) boundary.
StepLayout stepLayout(const StepDims& dims);

/// The dims of `in` itself (an eager step).
StepDims stepDims(const StepInputs& in);

/// Writes `in` into `out` (stepLayout(dims).words int32s) padded up to `dims`, so that a
/// graph captured for `dims` computes the real rows exactly as an eager step would:
///   - padded tokens: id 0, position 0, KV slot -1 (no KV write);
///   - each padded token is a request of its own (query_start grows by one), seq_len 1,
///     every block-table entry `pad_block` (a real block: the kernels read one key there,
///     whose output row is discarded);
///   - requests past in.num_requests with no padded token left: zero new tokens, seq_len 1
///     (they are only reached when dims.requests > dims.tokens, which buckets never ask for);
///   - block-table rows are widened to dims.max_blocks with `pad_block`;
///   - logit rows past in's: row 0 (computed, never read back).
/// Fails when `in` does not fit `dims`.
Status packStepInputs(const StepInputs& in, const StepDims& dims, int32_t pad_block,
                      int32_t* out);

/// The KV-write runs of an fp8 pool (codegen/cuda/kernels/kv_fp8.cuh) into `out` (the
/// buffer packStepInputs filled for `dims`): the tokens of `in` with a KV slot grouped by
/// the block they write, in token order within a group (the order the CPU appends a
/// block-head's rows in), as run_tokens, and run_starts[r] for r <= dims.tokens with runs
/// past the real ones empty, so a graph captured with dims.tokens runs serves any step that
/// fits. Padded tokens (slot -1) are in no run. Returns the number of real runs.
int32_t packKvRuns(const StepInputs& in, const StepDims& dims, int32_t block_size, int32_t* out);

/// Whether a step may replay a decode graph: one new token per request (query_start =
/// 0, 1, ..., R), logits for every token in order, and no extra inputs.
bool isPlainDecode(const StepInputs& in);

/// Batch sizes that get a decode graph, up to `max_batch`: 1, 2, 4, 8, then every 8 up to
/// 64, every 16 up to 128, every 32 beyond: few graphs, and a batch pads at most 7, 15 or 31
/// rows.
std::vector<int32_t> decodeBuckets(int32_t max_batch);

/// The smallest bucket >= tokens, or -1 when there is none.
int32_t decodeBucket(int64_t tokens, const std::vector<int32_t>& buckets);

/// Split-KV of the decode kernel.
struct SplitPlan {
  int32_t num_splits = 1;
  int32_t keys_per_split = 0;  ///< a multiple of the key tile
};

/// Splits for a step whose longest request has `max_len` keys and `ctas` = requests x kv
/// heads CTAs before splitting, on `sms` SMs: enough to fill two waves, each split at least
/// `min_keys` keys, keys_per_split rounded up to `key_tile`. One split when ctas already fill
/// the GPU or max_len is short.
SplitPlan chooseSplits(int64_t max_len, int64_t ctas, int32_t sms, int32_t key_tile,
                       int32_t min_keys = 256);

/// KV pool blocks for a GPU with `free_bytes` of `total_bytes` free after weights and
/// buffers are allocated: the pool may grow until `utilization` x total is in use (vLLM's
/// --gpu-memory-utilization; other processes' use counts), keeping `reserve_bytes` back
/// for what comes later (CUDA graphs, cuBLASLt). Fails, naming the numbers, when fewer than
/// `min_blocks` blocks fit.
StatusOr<int64_t> kvBlocksForMemory(uint64_t free_bytes, uint64_t total_bytes,
                                    double utilization, uint64_t reserve_bytes,
                                    uint64_t block_bytes, int64_t min_blocks);

}  // namespace ingot
