// Engine: drains the inbox, plans a step, runs it as one backend call, samples, reports.
#include "runtime/engine/engine.h"

#include <algorithm>
#include <utility>

namespace ingot {
namespace {

/// Default KV pool: 16k tokens (~0.75 GB of f32 KV for SmolLM2-135M), or one max_context
/// sequence if that is larger. Servers size the pool explicitly.
constexpr int64_t kDefaultKvPoolTokens = 16384;

/// The eight step inputs of a plan: decodes and prefill chunks side by side, one logits
/// row for each sequence that samples. `rows` gets the plan index of each logits row.
StepInputs buildStepInputs(const StepPlan& plan, std::vector<int32_t>* rows) {
  StepInputs in;
  in.num_requests = static_cast<int32_t>(plan.seqs.size());
  for (const ScheduledSeq& s : plan.seqs)
    in.max_blocks_per_request =
        std::max(in.max_blocks_per_request, static_cast<int32_t>(s.blocks.size()));
  in.block_tables.assign(static_cast<size_t>(in.num_requests) * in.max_blocks_per_request, 0);
  in.tokens.reserve(plan.num_tokens);
  in.query_start.push_back(0);
  rows->clear();
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const ScheduledSeq& s = plan.seqs[i];
    std::copy(s.blocks.begin(), s.blocks.end(),
              in.block_tables.begin() + static_cast<int64_t>(i) * in.max_blocks_per_request);
    in.tokens.insert(in.tokens.end(), s.tokens.begin(), s.tokens.end());
    for (int32_t p = 0; p < s.numTokens(); ++p) in.positions.push_back(s.start + p);
    in.slot_mapping.insert(in.slot_mapping.end(), s.slots.begin(), s.slots.end());
    in.seq_lens.push_back(s.seqLen());
    in.query_start.push_back(static_cast<int32_t>(in.tokens.size()));
    if (s.needs_logits) {
      in.logit_rows.push_back(static_cast<int32_t>(in.tokens.size()) - 1);
      rows->push_back(static_cast<int32_t>(i));
    }
  }
  // Only mid-prompt chunks: the program still yields one row, which nobody reads.
  if (in.logit_rows.empty()) in.logit_rows.push_back(static_cast<int32_t>(in.tokens.size()) - 1);
  return in;
}

}  // namespace

namespace {
/// The model's context, or 2048 where the artifact does not say.
int64_t maxContextOf(const schema::ModelConfigDef& config) {
  return config.max_context() > 0 ? config.max_context() : 2048;
}
}  // namespace

int64_t Engine::defaultKvBlocks(const schema::ModelConfigDef& config) {
  const int64_t block_size = std::max(1, config.kv_block_size());
  return (std::max<int64_t>(maxContextOf(config), kDefaultKvPoolTokens) + block_size - 1) /
         block_size;
}

StatusOr<std::unique_ptr<Engine>> Engine::create(const Artifact& artifact,
                                                 const EngineOptions& options) {
  const schema::ModelConfigDef* config = artifact.manifest().config();
  if (!config) return invalidArgument(artifact.source() + ": artifact has no model config");
  std::unique_ptr<Engine> e(new Engine());
  e->options_ = options;
  const int32_t block_size = std::max(1, config->kv_block_size());
  const int64_t max_context = maxContextOf(*config);
  const int64_t blocks =
      options.num_kv_blocks > 0 ? options.num_kv_blocks : defaultKvBlocks(*config);
  CpuBackendOptions backend_options;
  backend_options.num_threads = options.num_threads;
  backend_options.num_kv_blocks = blocks;
  StatusOr<std::unique_ptr<CpuBackend>> backend = CpuBackend::create(artifact, backend_options);
  if (!backend.ok()) return backend.status();
  e->backend_ = std::move(backend).value();
  e->kv_ = std::make_unique<KvCacheManager>(static_cast<int32_t>(blocks), block_size,
                                            options.enable_prefix_cache);
  SchedulerOptions scheduler = options.scheduler;
  if (scheduler.prefill_context_cost_keys < 0)
    scheduler.prefill_context_cost_keys = std::max<int32_t>(
        1, static_cast<int32_t>(prefillContextCostKeys(config->hidden_size(),
                                                       config->intermediate_size(),
                                                       config->num_heads(),
                                                       config->num_kv_heads(),
                                                       config->head_dim()) /
                                e->backend_->attentionMacCost()));
  e->sched_ = std::make_unique<Scheduler>(e->kv_.get(), scheduler);
  int64_t len = options.max_model_len > 0 ? options.max_model_len : max_context;
  e->max_model_len_ = static_cast<int32_t>(std::min<int64_t>(len, e->sched_->maxSequenceTokens()));
  if (options.eos_token_ids) {
    e->eos_ = *options.eos_token_ids;
  } else {
    if (config->eos_token_ids())
      for (int64_t t : *config->eos_token_ids()) e->eos_.push_back(static_cast<int32_t>(t));
    const schema::TokenizerDef* tok = artifact.manifest().tokenizer();
    if (tok && tok->eos_token_id() >= 0) e->eos_.push_back(static_cast<int32_t>(tok->eos_token_id()));
  }
  e->snapshotMetrics(0);
  return e;
}

Engine::~Engine() = default;

StatusOr<RequestId> Engine::addRequest(std::vector<int32_t> prompt, const SamplingParams& params,
                                       int32_t priority, int32_t n) {
  INGOT_RETURN_IF_ERROR(params.validate());
  if (n < 1 || n > 128) return invalidArgument("n must be in [1, 128], got " + std::to_string(n));
  if (prompt.empty()) return invalidArgument("empty prompt");
  const int64_t vocab = backend_->vocabSize();
  for (int32_t t : prompt)
    if (t < 0 || t >= vocab)
      return invalidArgument("prompt token " + std::to_string(t) + " outside the vocabulary of " +
                             std::to_string(vocab));
  if (static_cast<int64_t>(prompt.size()) >= max_model_len_)
    return invalidArgument("prompt of " + std::to_string(prompt.size()) +
                           " tokens leaves no room to generate within the limit of " +
                           std::to_string(max_model_len_) + " tokens");
  std::lock_guard<std::mutex> lock(mu_);
  const RequestId id = next_id_;
  next_id_ += n;
  inbox_.push_back(Pending{id, std::move(prompt), params, priority, n});
  num_unfinished_ += n;
  return id;
}

void Engine::cancel(RequestId id) {
  std::lock_guard<std::mutex> lock(mu_);
  cancels_.push_back(id);
}

bool Engine::hasWork() const {
  std::lock_guard<std::mutex> lock(mu_);
  return num_unfinished_ > 0;
}

EngineMetrics Engine::metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  return snapshot_;
}

bool Engine::isEos(int32_t token) const {
  return std::find(eos_.begin(), eos_.end(), token) != eos_.end();
}

void Engine::drainInbox(std::vector<RequestOutput>* outputs) {
  std::vector<Pending> adds;
  std::vector<RequestId> cancels;
  {
    std::lock_guard<std::mutex> lock(mu_);
    adds.swap(inbox_);
    cancels.swap(cancels_);
  }
  for (Pending& p : adds) {
    Live live(p.params);
    live.sampler.setPrompt(p.prompt);
    live.num_prompt = static_cast<int32_t>(p.prompt.size());
    if (options_.token_text && !p.params.stop.empty())
      live.stop = std::make_unique<StopMatcher>(p.params.stop);
    live.priority = p.priority;
    counters_.prompt_tokens += static_cast<int64_t>(live.num_prompt) * p.n;
    for (int32_t i = 1; i < p.n; ++i) {
      SamplingParams child_params = p.params;
      child_params.seed = p.params.seed + static_cast<uint64_t>(i);
      Live child(child_params);
      child.sampler.setPrompt(p.prompt);
      child.num_prompt = live.num_prompt;
      child.priority = p.priority;
      if (live.stop) child.stop = std::make_unique<StopMatcher>(p.params.stop);
      child.awaiting_fork = true;
      child.prompt = p.prompt;
      live.pending_forks.push_back(p.id + i);
      live_.emplace(p.id + i, std::move(child));
    }
    // Cannot fail: the id is fresh and the prompt fits (max_model_len <= pool tokens).
    (void)sched_->add(p.id, std::move(p.prompt), p.priority);
    live_.emplace(p.id, std::move(live));
  }
  for (RequestId id : cancels) {
    auto it = live_.find(id);
    if (it == live_.end()) continue;
    // Samples still waiting for this request's prompt start on their own.
    std::vector<RequestId> orphans = std::move(it->second.pending_forks);
    for (RequestId child : orphans) detachFork(child);
    if (it->second.awaiting_fork) {
      for (auto& [other_id, other] : live_) {
        auto& forks = other.pending_forks;
        forks.erase(std::remove(forks.begin(), forks.end(), id), forks.end());
      }
    }
    sched_->cancel(id);
    RequestOutput out;
    out.id = id;
    out.cancelled = true;
    out.num_prompt_tokens = it->second.num_prompt;
    out.num_generated_tokens = it->second.generated;
    outputs->push_back(std::move(out));
    live_.erase(it);
  }
}

void Engine::detachFork(RequestId child) {
  Live& c = live_.at(child);
  c.awaiting_fork = false;
  (void)sched_->add(child, std::move(c.prompt), c.priority);
  c.prompt.clear();
}

void Engine::sampleRow(RequestId id, const float* logits, std::vector<RequestOutput>* outputs) {
  // Parallel samples share this request's computed prompt and draw from the same logits.
  std::vector<RequestId> forks = std::move(live_.at(id).pending_forks);
  for (RequestId child : forks) {
    Live& c = live_.at(child);
    if (!sched_->fork(id, child).ok()) {
      detachFork(child);
      continue;
    }
    c.awaiting_fork = false;
    c.prompt.clear();
  }
  sampleOne(id, logits, outputs);
  for (RequestId child : forks)
    if (live_.count(child) && sched_->contains(child) && live_.at(child).generated == 0 &&
        sched_->tokens(child)->size() == static_cast<size_t>(live_.at(child).num_prompt))
      sampleOne(child, logits, outputs);
}

void Engine::sampleOne(RequestId id, const float* logits, std::vector<RequestOutput>* outputs) {
  Live& live = live_.at(id);
  const SamplingParams& params = live.sampler.params();
  RequestOutput out;
  out.id = id;
  SampleLogprobs lp;
  const int32_t token =
      live.sampler.sample(logits, backend_->vocabSize(), params.logprobs ? &lp : nullptr);
  ++live.generated;
  ++counters_.generation_tokens;
  out.token_ids.push_back(token);
  if (params.logprobs) out.logprobs.push_back(std::move(lp));
  FinishReason reason = finishAfterToken(params, token, live.generated, isEos(token));
  const bool stop_token = reason == FinishReason::kStop;
  if (reason == FinishReason::kNone && live.num_prompt + live.generated >= max_model_len_)
    reason = FinishReason::kLength;
  if (options_.token_text && !stop_token) {
    if (live.stop) {
      out.text = live.stop->push(options_.token_text(token));
      if (live.stop->stopped()) reason = FinishReason::kStop;
      else if (reason != FinishReason::kNone) out.text += live.stop->finish();
    } else {
      out.text = options_.token_text(token);
    }
  } else if (live.stop && stop_token) {
    out.text = live.stop->finish();
  }
  if (reason == FinishReason::kNone && !sched_->appendToken(id, token).ok())
    reason = FinishReason::kLength;  // unreachable while max_model_len <= pool tokens
  out.finish_reason = reason;
  out.num_prompt_tokens = live.num_prompt;
  out.num_generated_tokens = live.generated;
  if (reason != FinishReason::kNone) {
    (void)sched_->finish(id);
    live_.erase(id);
  }
  outputs->push_back(std::move(out));
}

StatusOr<std::vector<RequestOutput>> Engine::step() {
  std::vector<RequestOutput> outputs;
  drainInbox(&outputs);
  const StepPlan plan = sched_->schedule();
  if (!plan.empty()) {
    for (const BlockCopy& c : plan.copies)
      INGOT_RETURN_IF_ERROR(backend_->copyKvBlocks(c.src, c.dst));
    std::vector<int32_t> rows;
    const StepInputs inputs = buildStepInputs(plan, &rows);
    INGOT_RETURN_IF_ERROR(backend_->step(inputs, &logits_));
    INGOT_RETURN_IF_ERROR(sched_->completeStep(plan));
    counters_.computed_tokens += plan.num_tokens;
    ++counters_.steps;
    const int64_t vocab = backend_->vocabSize();
    for (size_t r = 0; r < rows.size(); ++r)
      sampleRow(plan.seqs[rows[r]].id, logits_.data() + static_cast<int64_t>(r) * vocab, &outputs);
  }
  snapshotMetrics(static_cast<int32_t>(plan.seqs.size()));
  int64_t finished = 0;
  for (const RequestOutput& o : outputs) finished += o.finished() ? 1 : 0;
  std::lock_guard<std::mutex> lock(mu_);
  num_unfinished_ -= finished;
  return outputs;
}

void Engine::snapshotMetrics(int32_t batch_size) {
  counters_.prefix_cache_hit_tokens = kv_->prefixHitTokens();
  counters_.preemptions = sched_->numPreemptions();
  counters_.last_batch_size = batch_size;
  counters_.running = sched_->numRunning();
  counters_.waiting = sched_->numWaiting();
  const KvUsage u = kv_->usage();
  counters_.kv_blocks_used = u.used;
  counters_.kv_blocks_total = u.total;
  std::lock_guard<std::mutex> lock(mu_);
  snapshot_ = counters_;
}

}  // namespace ingot
