// StepInputs: the eight per-step program inputs of a serving step, and their validation.
#pragma once

#include <cstdint>
#include <vector>

#include "core/region/region_program.h"
#include "core/base/status.h"

namespace ingot {

/// The model facts a step's inputs are checked against.
struct ModelShape {
  /// Token ids must lie in [0, vocab_size).
  int64_t vocab_size = 0;
  /// Tokens per KV block (ModelConfigDef.kv_block_size).
  int32_t kv_block_size = 16;
};

/// One batched serving step: R requests, each with some new tokens (T in all), KV through
/// block tables. Mirrors programs[0]'s input buffers 0..7 (the kv_cache, buffer 2, is the
/// backend's own pool). See the contract in schemas/artifact.fbs and DESIGN.md.
struct StepInputs {
  /// [T] new token ids.
  std::vector<int32_t> tokens;
  /// [T] rope position of each new token.
  std::vector<int32_t> positions;
  /// [num_requests x max_blocks_per_request], row-major: KV blocks of each request.
  /// Entries past a request's used blocks (ceil(seq_len / block_size)) are ignored.
  std::vector<int32_t> block_tables;
  int32_t num_requests = 0;
  int32_t max_blocks_per_request = 0;
  /// [R] KV length of each request AFTER this step (new tokens included).
  std::vector<int32_t> seq_lens;
  /// [R + 1] CSR offsets of each request's new tokens in the T rows.
  std::vector<int32_t> query_start;
  /// [T] KV slot (block * block_size + offset) each new token's K/V is written to.
  std::vector<int32_t> slot_mapping;
  /// [L] which of the T rows produce logits (output row i = logits of row logit_rows[i]).
  std::vector<int32_t> logit_rows;
  /// Program inputs after the eight (buffers 8, 9, ... in order): extra attention operands
  /// read by mask/score regions (document ids, tree masks). Not owned.
  std::vector<RegionOperandView> extra_inputs;

  int64_t numTokens() const { return static_cast<int64_t>(tokens.size()); }

  /// Checks that every size agrees, query_start is a CSR over the tokens, each request's
  /// seq_len covers its new tokens and fits its block-table row, every used block and slot
  /// is inside a pool of `num_kv_blocks` blocks, no two tokens write one slot, token ids
  /// are in the vocabulary, positions are non-negative and logit rows name tokens. A step
  /// that passes cannot make the backend read or write out of bounds.
  Status validate(const ModelShape& shape, int64_t num_kv_blocks) const;
};

}  // namespace ingot
