// DraftModel: a small model (or the target's early-exit draft program) proposing greedy
// draft chains for speculative decoding, on its own backend and paged KV cache.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/artifact/artifact_reader.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "core/base/status.h"
#include "runtime/kv/kv_cache_manager.h"
#include "runtime/sched/step_plan.h"

namespace ingot {

/// One request's drafting job: continue `history` (prompt and output so far; its last
/// token is the next input of the target) by `k` tokens.
struct DraftQuery {
  RequestId id = -1;
  const std::vector<int32_t>* history = nullptr;
  int32_t k = 0;
};

/// Runs program `program` of an artifact (0: a separate draft model; the target's draft
/// program for self-speculation) over its own KV pool. Per request it keeps a KV sequence
/// and reuses it across steps: the KV of tokens that are still a prefix of the history
/// (including draft tokens the target accepted) stays; the rest is recomputed in the step's
/// first pass together with the new tokens. Each propose() runs 1 + (k - 1) batched passes:
/// catch-up chunks with the first draft token, then one token per request per pass.
/// Drafts are greedy (argmax, ties to the lowest id), so the target verifies them as
/// deterministic proposals. Not thread-safe.
class DraftModel {
 public:
  static StatusOr<std::unique_ptr<DraftModel>> create(const Artifact& artifact, int32_t program,
                                                      int num_threads, int64_t num_kv_blocks);

  /// drafts[i] = up to queries[i].k tokens (empty where the pool could not hold the
  /// request; it simply does not speculate this step). With `alternatives`, also the
  /// draft's next `width - 1` likeliest tokens at each of those positions
  /// ((*alternatives)[i][j]: after drafts[i][0..j), excluding drafts[i][j]), for static
  /// trees that hang them as leaves beside the greedy chain.
  Status propose(const std::vector<DraftQuery>& queries,
                 std::vector<std::vector<int32_t>>* drafts, int32_t width = 1,
                 std::vector<std::vector<std::vector<int32_t>>>* alternatives = nullptr);
  /// Forgets a finished or cancelled request's KV.
  void release(RequestId id);
  int64_t vocabSize() const { return backend_->vocabSize(); }
  int32_t numSequences() const { return kv_->numSequences(); }
  /// Draft forward passes run so far (for /metrics and tests).
  int64_t passes() const { return passes_; }

 private:
  struct Seq {
    SeqId seq = -1;
    /// Leading tokens of the KV table whose K/V are written.
    int32_t written = 0;
  };
  DraftModel() = default;

  std::unique_ptr<CpuBackend> backend_;
  std::unique_ptr<KvCacheManager> kv_;
  std::unordered_map<RequestId, Seq> seqs_;
  std::vector<float> logits_;
  int64_t passes_ = 0;
};

}  // namespace ingot
