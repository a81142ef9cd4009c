// StepPlan: what one scheduling iteration decided — which sequences run, with which tokens.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/kv/block_table.h"
#include "runtime/kv/kv_cache_manager.h"

namespace ingot {

/// Identifies a request across the scheduler and the engine.
using RequestId = int64_t;

/// One sequence's part of a step: `tokens` are its new tokens at positions
/// [start, start + tokens.size()), written to `slots`, attending over `blocks`.
struct ScheduledSeq {
  RequestId id = -1;
  SeqId kv_seq = -1;
  /// Position (KV index) of the first new token.
  int32_t start = 0;
  std::vector<int32_t> tokens;
  /// KV slot of each new token (the step's slot_mapping entries).
  std::vector<int32_t> slots;
  /// The sequence's block table (covers seq_len() tokens).
  std::vector<int32_t> blocks;
  /// The chunk reaches the sequence's last known token: its last row's logits pick the next
  /// token. False for a prefill chunk that more chunks follow.
  bool needs_logits = false;
  /// One generated token being fed back (as opposed to a prompt/recompute chunk).
  bool is_decode = false;
  /// Speculative draft tokens after the decode token: tokens[1..] (a flattened token tree
  /// whose root is tokens[0]); every row needs logits. 0 for an ordinary decode.
  int32_t num_draft = 0;

  int32_t numTokens() const { return static_cast<int32_t>(tokens.size()); }
  /// KV length of the sequence after this step.
  int32_t seqLen() const { return start + numTokens(); }
};

/// The scheduler's output for one step. Decodes come first in `seqs`, then prefill chunks.
struct StepPlan {
  std::vector<ScheduledSeq> seqs;
  /// Copy-on-write block copies the backend performs before the step, in order.
  std::vector<BlockCopy> copies;
  /// Requests preempted (blocks freed, back to waiting) while planning this step.
  std::vector<RequestId> preempted;
  /// Total new tokens (sum of seqs[i].tokens.size()); never above the token budget.
  int32_t num_tokens = 0;
  int32_t num_decodes = 0;

  bool empty() const { return seqs.empty(); }
};

}  // namespace ingot
