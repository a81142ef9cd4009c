// Scheduler: iteration-level continuous batching over a paged KV cache (no backend).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "core/base/status.h"
#include "runtime/kv/kv_cache_manager.h"
#include "runtime/sched/step_plan.h"

namespace ingot {

/// Limits of one step. Defaults follow vLLM's chunked-prefill defaults in spirit.
struct SchedulerOptions {
  /// Token budget of one step: decodes (1 each) plus prefill chunks.
  int32_t max_batched_tokens = 512;
  /// Cap on running sequences (prefilling or decoding); clamped to max_batched_tokens so
  /// every running decode always fits in a step.
  int32_t max_running = 64;
  /// Largest prefill chunk of one sequence in one step; 0 = the whole remaining budget.
  int32_t max_prefill_chunk = 0;
  /// Prefill a step may carry when it also carries decodes, in tokens (see
  /// prefill_context_cost_keys), when the decodes themselves cost less: prefill may always
  /// cost prefill_share_while_decoding of the step's decodes. 0 = no
  /// limit beyond the budget. Bounds how much a long prompt arriving slows the running
  /// decoders (their inter-token latency) at the cost of that prompt's time to first token.
  int32_t max_prefill_while_decoding = 16;
  /// Share of the step's decode cost that prefill may add next to them (above the floor
  /// max_prefill_while_decoding). Below 1 leaves room for what the cost model misses.
  double prefill_share_while_decoding = 0.75;
  /// Prompts (plus any re-prefilled output) of more tokens than this are "long": only they
  /// are held to the prefill cost while decoding, so ordinary prompts keep the batch full
  /// (vLLM likewise treats prompts above long_prefill_token_threshold apart). < 0 = where
  /// attention makes a token cost 1.5 decode tokens (prefill_context_cost_keys / 2), at
  /// least 256: from there on a prompt's chunks would slow the decoders for many steps.
  int32_t long_prefill_tokens = -1;
  /// Makes max_prefill_while_decoding a cost rather than a token count: a prefill token at
  /// position p counts as 1 + p / prefill_context_cost_keys tokens, since its attention over
  /// p keys costs as much as the rest of its work once p reaches this many keys (the
  /// model's linear MACs per token over its attention MACs per key; see
  /// prefillContextCostKeys()). 0 = every prefill token counts as one; < 0 = the engine
  /// derives it from the model's shape.
  int32_t prefill_context_cost_keys = -1;
  /// Blocks that admission leaves free while anything runs, so running decodes can grow
  /// without preempting at once (vLLM's 1% watermark); < 0 = 1% of the pool, at least 1.
  int32_t admission_watermark_blocks = -1;
};

/// Keys of context at which one token's attention costs as much as its linear layers:
/// (q, k, v, o and MLP MACs per layer) / (2 * heads * head_dim attention MACs per key).
int32_t prefillContextCostKeys(int64_t hidden, int64_t intermediate, int64_t num_heads,
                               int64_t num_kv_heads, int64_t head_dim);

/// Decides, step by step, which sequences run and with how many tokens.
///
/// Each step: every running decode gets its one token first (highest priority first), then
/// prefill chunks of running prefills, then newly admitted waiting requests, within the
/// token budget and the running cap. Priority: lower value first, then arrival order.
/// When a decode needs a KV block and none is free, the lowest-priority newest running
/// sequence is preempted by recompute: its blocks are freed and it waits again holding its
/// prompt and generated tokens, which are re-prefilled when it is readmitted. Requests are
/// never dropped; add() refuses only a request that could not fit even in an empty pool.
///
/// Protocol per step: schedule() -> run the plan -> completeStep(plan) -> for every entry
/// with needs_logits, appendToken() or finish(). cancel()/add() go between steps.
/// Not thread-safe.
class Scheduler {
 public:
  Scheduler(KvCacheManager* kv, const SchedulerOptions& options);
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  /// Queues a request. Fails for a duplicate id, an empty prompt, or a prompt longer
  /// than maxSequenceTokens().
  Status add(RequestId id, std::vector<int32_t> prompt, int32_t priority = 0);
  /// Forgets a request now; a running one's KV blocks go back at once. False if unknown.
  bool cancel(RequestId id);
  /// Plans the next step (may preempt; may admit waiting requests).
  StepPlan schedule();
  /// Records that the backend computed `plan`'s tokens (marks their KV computed).
  Status completeStep(const StepPlan& plan);
  /// Appends a sampled token to a request whose last step had needs_logits; its KV is
  /// computed in a later step. Fails once the sequence would exceed maxSequenceTokens().
  Status appendToken(RequestId id, int32_t token);
  /// Ends a request normally (same effect as cancel, but an unknown id is an error).
  Status finish(RequestId id);
  /// Speculative decoding: `draft` tokens (a flattened tree under the request's last
  /// token, root excluded) to run with the request's next decode token in the next
  /// schedule(). Their KV slots follow the decode token's. They are dropped (the decode
  /// runs alone) when the request does not decode in that step, the step's budget cannot
  /// take them, the sequence would outgrow maxSequenceTokens(), or the pool lacks free
  /// blocks for them (drafts never preempt or evict). Fails for an unknown request.
  Status setDraft(RequestId id, std::vector<int32_t> draft);
  /// True when the request's next step is a decode (its KV is complete and one sampled
  /// token waits to be fed back).
  bool isDecodeReady(RequestId id) const;
  /// After completeStep() of a step that ran a draft for `id`: keeps the KV of the
  /// `accepted` tokens (already moved to the positions right after the decode token),
  /// appends them to the request and releases the rest of the draft's slots. Then
  /// appendToken() the bonus token as usual. Fails when no draft is pending or more tokens
  /// are accepted than were drafted.
  Status acceptDraft(RequestId id, const std::vector<int32_t>& accepted);

  /// Starts `child` as a copy of `parent` (sharing its KV blocks copy-on-write): for
  /// parallel samples after the parent's prompt is computed. The child joins running.
  Status fork(RequestId parent, RequestId child);

  bool hasWork() const { return !requests_.empty(); }
  bool contains(RequestId id) const { return requests_.count(id) != 0; }
  int32_t numRunning() const { return static_cast<int32_t>(running_.size()); }
  int32_t numWaiting() const { return static_cast<int32_t>(waiting_.size()); }
  int64_t numPreemptions() const { return num_preemptions_; }
  /// Every known token of a request (prompt then generated), or null if unknown.
  const std::vector<int32_t>* tokens(RequestId id) const;
  /// Longest sequence (prompt + output) the pool can hold: blocks * block size.
  int32_t maxSequenceTokens() const { return max_seq_tokens_; }
  const SchedulerOptions& options() const { return options_; }

 private:
  /// Queue order: priority, then arrival, then id.
  using Key = std::tuple<int32_t, int64_t, RequestId>;
  struct Request {
    Key key;
    std::vector<int32_t> tokens;  // prompt + generated
    SeqId kv_seq = -1;            // -1 while waiting
    int32_t num_in_kv = 0;        // tokens in the KV block table
    int32_t num_computed = 0;     // tokens whose KV is written
    std::vector<int32_t> draft;   // speculative tokens for the next schedule() only
    int32_t pending_draft = 0;    // draft tokens in the KV table awaiting acceptDraft()
  };

  void preempt(Request& r);
  void release(Request& r);
  /// Adds a chunk of up to `budget` tokens of a prefilling request to the plan.
  int32_t planPrefill(RequestId id, Request& r, int32_t budget, StepPlan* plan);
  /// Prefill tokens from position `start` whose cost (see prefill_context_cost_keys) fits
  /// in `*cost`, at least one while any cost is left; subtracts what they cost.
  int32_t prefillTokensWithinCost(int32_t start, int32_t want, double* cost) const;
  /// Cost of computing the token at `position` (1 + position / prefill_context_cost_keys).
  double tokenCost(int32_t position) const;
  int32_t watermark() const;

  KvCacheManager* kv_;
  SchedulerOptions options_;
  int32_t max_seq_tokens_ = 0;
  std::map<RequestId, Request> requests_;
  std::set<Key> waiting_;
  std::set<Key> running_;
  int64_t next_arrival_ = 0;
  int64_t num_preemptions_ = 0;
  std::vector<RequestId> drafted_;  // requests with a draft set for the next schedule()
};

}  // namespace ingot
