// Scheduler: decode-first continuous batching, chunked prefill, priorities, preemption.
#include "runtime/sched/scheduler.h"

#include <algorithm>
#include <string>
#include <utility>

namespace ingot {
namespace {

Status unknownRequest(RequestId id) {
  return notFound("scheduler: unknown request " + std::to_string(id));
}

/// The smallest derived long-prompt threshold (vLLM's 4% of an 8k context, rounded).
constexpr int32_t kMinLongPrefillTokens = 256;

}  // namespace

Scheduler::Scheduler(KvCacheManager* kv, const SchedulerOptions& options)
    : kv_(kv), options_(options) {
  options_.max_batched_tokens = std::max(1, options_.max_batched_tokens);
  options_.max_running =
      std::clamp(options_.max_running, 1, options_.max_batched_tokens);
  if (options_.max_prefill_chunk <= 0) options_.max_prefill_chunk = options_.max_batched_tokens;
  if (options_.long_prefill_tokens < 0)
    options_.long_prefill_tokens = std::max(kMinLongPrefillTokens, options_.prefill_context_cost_keys / 2);
  const int32_t total = kv_->usage().total;
  if (options_.admission_watermark_blocks < 0)
    options_.admission_watermark_blocks = std::max(1, total / 100);
  max_seq_tokens_ = total * kv_->blockSize();
}

Status Scheduler::add(RequestId id, std::vector<int32_t> prompt, int32_t priority) {
  if (requests_.count(id)) return invalidArgument("scheduler: duplicate request id " + std::to_string(id));
  if (prompt.empty()) return invalidArgument("scheduler: empty prompt");
  if (static_cast<int64_t>(prompt.size()) > max_seq_tokens_)
    return invalidArgument("scheduler: prompt of " + std::to_string(prompt.size()) +
                           " tokens exceeds the KV pool's " + std::to_string(max_seq_tokens_));
  Request r;
  r.key = Key{priority, next_arrival_++, id};
  r.tokens = std::move(prompt);
  waiting_.insert(r.key);
  requests_.emplace(id, std::move(r));
  return okStatus();
}

void Scheduler::release(Request& r) {
  if (r.kv_seq >= 0) {
    (void)kv_->free(r.kv_seq);
    running_.erase(r.key);
  } else {
    waiting_.erase(r.key);
  }
  r.kv_seq = -1;
  r.num_in_kv = 0;
  r.num_computed = 0;
}

bool Scheduler::cancel(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return false;
  release(it->second);
  requests_.erase(it);
  return true;
}

Status Scheduler::finish(RequestId id) {
  if (!cancel(id)) return unknownRequest(id);
  return okStatus();
}

void Scheduler::preempt(Request& r) {
  // Recompute: drop the KV (its computed full blocks stay in the prefix cache) and wait
  // again with every token, so readmission re-prefills prompt + output.
  release(r);
  waiting_.insert(r.key);
  ++num_preemptions_;
}

const std::vector<int32_t>* Scheduler::tokens(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : &it->second.tokens;
}

Status Scheduler::appendToken(RequestId id, int32_t token) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return unknownRequest(id);
  if (static_cast<int64_t>(it->second.tokens.size()) + 1 > max_seq_tokens_)
    return failedPrecondition("scheduler: request " + std::to_string(id) +
                              " would exceed the KV pool's " + std::to_string(max_seq_tokens_) +
                              " tokens");
  it->second.tokens.push_back(token);
  return okStatus();
}

Status Scheduler::setDraft(RequestId id, std::vector<int32_t> draft) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return unknownRequest(id);
  it->second.draft = std::move(draft);
  drafted_.push_back(id);
  return okStatus();
}

bool Scheduler::isDecodeReady(RequestId id) const {
  auto it = requests_.find(id);
  if (it == requests_.end()) return false;
  const Request& r = it->second;
  return r.kv_seq >= 0 && r.pending_draft == 0 && r.num_computed == r.num_in_kv &&
         static_cast<int32_t>(r.tokens.size()) == r.num_in_kv + 1;
}

Status Scheduler::acceptDraft(RequestId id, const std::vector<int32_t>& accepted) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return unknownRequest(id);
  Request& r = it->second;
  const int32_t a = static_cast<int32_t>(accepted.size());
  if (r.pending_draft == 0 || r.kv_seq < 0)
    return failedPrecondition("scheduler: request " + std::to_string(id) +
                              " has no draft to accept");
  if (a > r.pending_draft)
    return invalidArgument("scheduler: " + std::to_string(a) + " tokens accepted of a draft of " +
                           std::to_string(r.pending_draft));
  const int32_t kept = r.num_computed + a;
  INGOT_RETURN_IF_ERROR(kv_->truncate(r.kv_seq, kept));
  INGOT_RETURN_IF_ERROR(kv_->rewriteTokens(r.kv_seq, r.num_computed, accepted));
  INGOT_RETURN_IF_ERROR(kv_->markComputed(r.kv_seq, kept));
  r.tokens.insert(r.tokens.end(), accepted.begin(), accepted.end());
  r.num_computed = kept;
  r.num_in_kv = kept;
  r.pending_draft = 0;
  return okStatus();
}

Status Scheduler::fork(RequestId parent, RequestId child) {
  auto it = requests_.find(parent);
  if (it == requests_.end()) return unknownRequest(parent);
  if (requests_.count(child)) return invalidArgument("scheduler: duplicate request id " + std::to_string(child));
  Request& p = it->second;
  if (p.kv_seq < 0) return failedPrecondition("scheduler: fork of a waiting request");
  StatusOr<SeqId> seq = kv_->fork(p.kv_seq);
  if (!seq.ok()) return seq.status();
  Request c;
  // Right behind the parent in every order (same priority and arrival, larger id).
  c.key = Key{std::get<0>(p.key), std::get<1>(p.key), child};
  c.tokens = p.tokens;
  c.kv_seq = *seq;
  c.num_in_kv = p.num_in_kv;
  c.num_computed = p.num_computed;
  running_.insert(c.key);
  requests_.emplace(child, std::move(c));
  return okStatus();
}

int32_t Scheduler::watermark() const {
  return running_.empty() ? 0 : options_.admission_watermark_blocks;
}

int32_t prefillContextCostKeys(int64_t hidden, int64_t intermediate, int64_t num_heads,
                               int64_t num_kv_heads, int64_t head_dim) {
  const int64_t linear = 2 * hidden * num_heads * head_dim +      // q, o
                         2 * hidden * num_kv_heads * head_dim +   // k, v
                         3 * hidden * intermediate;               // gate, up, down
  const int64_t perKey = 2 * num_heads * head_dim;                // q.k and p.v
  if (perKey <= 0 || linear <= 0) return 0;
  return static_cast<int32_t>(std::max<int64_t>(1, linear / perKey));
}

double Scheduler::tokenCost(int32_t position) const {
  const double keys = options_.prefill_context_cost_keys;
  return keys > 0 ? 1.0 + position / keys : 1.0;
}

int32_t Scheduler::prefillTokensWithinCost(int32_t start, int32_t want, double* cost) const {
  if (*cost <= 0) return 0;
  int32_t n = 0;
  while (n < want) {
    const double c = tokenCost(start + n);
    if (n > 0 && c > *cost) break;
    *cost -= c;
    ++n;
  }
  return n;
}

int32_t Scheduler::planPrefill(RequestId id, Request& r, int32_t budget, StepPlan* plan) {
  const int32_t n = std::min({r.num_in_kv - r.num_computed, budget, options_.max_prefill_chunk});
  if (n <= 0) return 0;
  const BlockTable* table = kv_->table(r.kv_seq);
  ScheduledSeq s;
  s.id = id;
  s.kv_seq = r.kv_seq;
  s.start = r.num_computed;
  s.tokens.assign(r.tokens.begin() + s.start, r.tokens.begin() + s.start + n);
  s.slots.reserve(n);
  for (int32_t p = s.start; p < s.start + n; ++p) s.slots.push_back(table->slotOf(p));
  s.blocks.assign(table->blocks().begin(), table->blocks().end());
  s.needs_logits = s.seqLen() == static_cast<int32_t>(r.tokens.size());
  plan->seqs.push_back(std::move(s));
  plan->num_tokens += n;
  return n;
}

StepPlan Scheduler::schedule() {
  StepPlan plan;
  int32_t budget = options_.max_batched_tokens;
  double decodeCost = 0;  // of this step's decodes, in prefill-token units

  // 1. Decodes: each running sequence whose KV is complete and that has one new token.
  // Highest priority first; a victim is always taken from the back, so it is never one
  // already planned.
  std::vector<Key> order(running_.begin(), running_.end());
  std::set<RequestId> decoded;
  for (const Key& key : order) {
    if (budget == 0) break;
    if (!running_.count(key)) continue;  // preempted as a victim meanwhile
    const RequestId id = std::get<2>(key);
    Request& r = requests_.at(id);
    const bool decode = r.num_computed == r.num_in_kv &&
                        static_cast<int32_t>(r.tokens.size()) == r.num_in_kv + 1;
    if (!decode) continue;
    const std::vector<int32_t> token{r.tokens.back()};
    // A draft rides along only where it costs nothing else: budget, length and free blocks.
    int32_t k = static_cast<int32_t>(r.draft.size());
    if (k > 0 && (budget < 1 + k ||
                  static_cast<int64_t>(r.tokens.size()) + k > max_seq_tokens_ ||
                  kv_->blocksNeededToAppend(r.kv_seq, 1 + k) > kv_->usage().free))
      k = 0;
    std::vector<int32_t> withDraft = token;
    withDraft.insert(withDraft.end(), r.draft.begin(), r.draft.begin() + k);
    StatusOr<AppendResult> appended = kv_->appendTokens(r.kv_seq, withDraft);
    if (k > 0 && !appended.ok()) {
      k = 0;
      withDraft = token;
      appended = kv_->appendTokens(r.kv_seq, token);
    }
    while (!appended.ok()) {
      const Key victim_key = *running_.rbegin();
      Request& victim = requests_.at(std::get<2>(victim_key));
      plan.preempted.push_back(std::get<2>(victim_key));
      preempt(victim);
      if (victim_key == key) break;
      appended = kv_->appendTokens(r.kv_seq, token);
    }
    if (!appended.ok()) continue;  // preempted itself
    r.num_in_kv += 1 + k;
    decoded.insert(id);
    decodeCost += (1 + k) * tokenCost(r.num_in_kv - 1);
    const BlockTable* table = kv_->table(r.kv_seq);
    ScheduledSeq s;
    s.id = id;
    s.kv_seq = r.kv_seq;
    s.start = r.num_computed;
    s.tokens = std::move(withDraft);
    s.slots = appended->slots;
    s.blocks.assign(table->blocks().begin(), table->blocks().end());
    s.needs_logits = true;
    s.is_decode = true;
    s.num_draft = k;
    plan.copies.insert(plan.copies.end(), appended->copies.begin(), appended->copies.end());
    plan.seqs.push_back(std::move(s));
    plan.num_tokens += 1 + k;
    plan.num_decodes += 1;
    budget -= 1 + k;
  }
  // Drafts are for this step only.
  for (RequestId id : drafted_)
    if (auto it = requests_.find(id); it != requests_.end()) it->second.draft.clear();
  drafted_.clear();

  // While decodes run, prefill is limited by cost too, so their step time stays bounded.
  const bool costLimited = plan.num_decodes > 0 && options_.max_prefill_while_decoding > 0;
  // Prefill may cost a share of the decodes themselves (so it at most doubles the step),
  // and at least max_prefill_while_decoding.
  double cost = costLimited ? std::max<double>(options_.max_prefill_while_decoding,
                                              options_.prefill_share_while_decoding * decodeCost)
                            : 0;
  // Only long prompts are held to it: a short one is done in a step or two, as in vLLM,
  // which treats prompts above long_prefill_token_threshold alike. (While a request
  // prefills, its tokens are all in its KV: prompt plus any output being recomputed.)
  auto isLong = [&](const Request& r) {
    return costLimited && static_cast<int32_t>(r.tokens.size()) > options_.long_prefill_tokens;
  };
  auto planChunk = [&](RequestId id, Request& r) {
    const int32_t cap =
        isLong(r) ? prefillTokensWithinCost(r.num_computed,
                                            std::min({budget, options_.max_prefill_chunk,
                                                      r.num_in_kv - r.num_computed}),
                                            &cost)
                  : budget;
    budget -= planPrefill(id, r, cap, &plan);
  };

  // 2. Chunks of running prefills (their blocks were allocated at admission).
  for (const Key& key : running_) {
    if (budget == 0) break;
    const RequestId id = std::get<2>(key);
    Request& r = requests_.at(id);
    if (r.num_computed < r.num_in_kv && !decoded.count(id)) planChunk(id, r);
  }

  // 3. Admission in priority order while budget, cap and blocks allow. The head waits
  // rather than letting lower priorities pass it.
  while (budget > 0 && !waiting_.empty() &&
         static_cast<int32_t>(running_.size()) < options_.max_running) {
    const Key key = *waiting_.begin();
    const RequestId id = std::get<2>(key);
    Request& r = requests_.at(id);
    if (isLong(r) && cost <= 0) break;  // not admitted (no blocks taken) without a chunk
    const int32_t needed = static_cast<int32_t>(r.tokens.size()) + watermark() * kv_->blockSize();
    if (!kv_->canAdmit(needed)) break;
    StatusOr<SequenceKv> admitted = kv_->admit(r.tokens);
    if (!admitted.ok()) break;
    waiting_.erase(waiting_.begin());
    running_.insert(key);
    r.kv_seq = admitted->id;
    r.num_in_kv = static_cast<int32_t>(r.tokens.size());
    r.num_computed = admitted->num_cached_tokens;
    planChunk(id, r);
  }
  return plan;
}

Status Scheduler::completeStep(const StepPlan& plan) {
  for (const ScheduledSeq& s : plan.seqs) {
    auto it = requests_.find(s.id);
    if (it == requests_.end() || it->second.kv_seq != s.kv_seq) continue;  // cancelled
    if (s.num_draft > 0) {
      // Only the decode token is computed for good; the draft waits for acceptDraft().
      INGOT_RETURN_IF_ERROR(kv_->markComputed(s.kv_seq, s.start + 1));
      it->second.num_computed = s.start + 1;
      it->second.pending_draft = s.num_draft;
      continue;
    }
    INGOT_RETURN_IF_ERROR(kv_->markComputed(s.kv_seq, s.seqLen()));
    it->second.num_computed = s.seqLen();
  }
  return okStatus();
}

}  // namespace ingot
