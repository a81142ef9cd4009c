// Engine: drains the inbox, plans a step, runs it as one backend call, samples, reports.
#include "runtime/engine/engine.h"

#include <algorithm>
#include <utility>

#include "core/region/region_program.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/paged_attention.h"
#include "runtime/backend/cpu/tp_cpu_backend.h"
#include "runtime/spec/accepted_kv.h"
#include "runtime/spec/verify.h"

namespace ingot {
namespace {

/// Default KV pool: 16k tokens (~0.75 GB of f32 KV for SmolLM2-135M), or one max_context
/// sequence if that is larger. Servers size the pool explicitly.
constexpr int64_t kDefaultKvPoolTokens = 16384;

/// Request `plan.seqs[i]`'s draft tree, or null (indexed like plan.seqs).
using TreeOf = std::vector<const FlatTree*>;

/// The step inputs of a plan: decodes (with their draft trees) and prefill chunks side by
/// side; one logits row for each sequence that samples, one per node for a tree. `rows`
/// gets, per plan entry, its first logits row (-1: none). With `tree_inputs`, fills the
/// program's tree_start / tree_bits inputs into `tree_start`, `tree_bits` (owned by the
/// caller, viewed by the returned inputs).
StepInputs buildStepInputs(const StepPlan& plan, const TreeOf& trees, bool tree_inputs,
                           std::vector<int32_t>* rows, std::vector<int32_t>* tree_start,
                           std::vector<int32_t>* tree_bits, int64_t tree_bits_shape[3],
                           int64_t tree_start_shape[1]) {
  StepInputs in;
  in.num_requests = static_cast<int32_t>(plan.seqs.size());
  int32_t max_nodes = 1;
  for (const ScheduledSeq& s : plan.seqs) {
    in.max_blocks_per_request =
        std::max(in.max_blocks_per_request, static_cast<int32_t>(s.blocks.size()));
    if (s.num_draft > 0) max_nodes = std::max(max_nodes, s.numTokens());
  }
  in.block_tables.assign(static_cast<size_t>(in.num_requests) * in.max_blocks_per_request, 0);
  in.tokens.reserve(plan.num_tokens);
  in.query_start.push_back(0);
  rows->assign(plan.seqs.size(), -1);
  const int32_t words = (max_nodes + 31) / 32;
  if (tree_inputs) {
    tree_start->assign(plan.seqs.size(), 0);
    tree_bits->assign(plan.seqs.size() * static_cast<size_t>(max_nodes) * words, 0);
  }
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const ScheduledSeq& s = plan.seqs[i];
    const FlatTree* tree = s.num_draft > 0 ? trees[i] : nullptr;
    std::copy(s.blocks.begin(), s.blocks.end(),
              in.block_tables.begin() + static_cast<int64_t>(i) * in.max_blocks_per_request);
    const int32_t first = static_cast<int32_t>(in.tokens.size());
    in.tokens.insert(in.tokens.end(), s.tokens.begin(), s.tokens.end());
    // Tree nodes take rope positions by depth (siblings share one); slots stay distinct.
    for (int32_t p = 0; p < s.numTokens(); ++p)
      in.positions.push_back(s.start + (tree ? tree->depths[p] : p));
    in.slot_mapping.insert(in.slot_mapping.end(), s.slots.begin(), s.slots.end());
    in.seq_lens.push_back(s.seqLen());
    in.query_start.push_back(static_cast<int32_t>(in.tokens.size()));
    if (tree_inputs) {
      // Without a tree, every key is before "the tree": plain causal attention.
      (*tree_start)[i] = tree ? s.start : s.seqLen();
      if (tree) {
        const std::vector<int32_t> mask = tree->ancestorMaskWords32(words);
        std::copy(mask.begin(), mask.end(),
                  tree_bits->begin() + static_cast<int64_t>(i) * max_nodes * words);
      }
    }
    if (tree) {
      (*rows)[i] = static_cast<int32_t>(in.logit_rows.size());
      for (int32_t p = 0; p < s.numTokens(); ++p) in.logit_rows.push_back(first + p);
    } else if (s.needs_logits) {
      (*rows)[i] = static_cast<int32_t>(in.logit_rows.size());
      in.logit_rows.push_back(static_cast<int32_t>(in.tokens.size()) - 1);
    }
  }
  // Only mid-prompt chunks: the program still yields one row, which nobody reads.
  if (in.logit_rows.empty()) in.logit_rows.push_back(static_cast<int32_t>(in.tokens.size()) - 1);
  if (tree_inputs) {
    tree_start_shape[0] = in.num_requests;
    tree_bits_shape[0] = in.num_requests;
    tree_bits_shape[1] = max_nodes;
    tree_bits_shape[2] = words;
    in.extra_inputs.push_back({RegionType::kI32, tree_start_shape, 1, tree_start->data()});
    in.extra_inputs.push_back({RegionType::kI32, tree_bits_shape, 3, tree_bits->data()});
  }
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

/// The widest sliding window among the artifact's attention variants (0: none): the
/// variants' masks as the CPU backend analyzes them.
static int64_t slidingWindowOf(const Artifact& artifact) {
  const auto* variants = artifact.manifest().attention_variants();
  int64_t widest = 0;
  if (!variants) return 0;
  for (const schema::AttentionVariantDef* v : *variants) {
    if (!v->mask_bytecode() || v->mask_bytecode()->size() == 0) continue;
    StatusOr<RegionProgram> mask =
        decodeRegionBytecode(v->mask_bytecode()->data(), v->mask_bytecode()->size());
    if (!mask.ok()) continue;  // the backend has refused such an artifact already
    AttentionVariantPrograms programs;
    programs.mask = &*mask;
    programs.analyze();
    widest = std::max(widest, programs.window);
  }
  return widest;
}

StatusOr<std::unique_ptr<Engine>> Engine::create(const Artifact& artifact,
                                                 const EngineOptions& options) {
  const schema::ModelConfigDef* config = artifact.manifest().config();
  if (!config) return invalidArgument(artifact.source() + ": artifact has no model config");
  std::unique_ptr<Engine> e(new Engine());
  e->options_ = options;
  const int32_t block_size = std::max(1, config->kv_block_size());
  const int64_t max_context = maxContextOf(*config);
  int64_t blocks = options.num_kv_blocks > 0 ? options.num_kv_blocks : defaultKvBlocks(*config);
  StatusOr<std::unique_ptr<Backend>> backend = [&]() -> StatusOr<std::unique_ptr<Backend>> {
    if (options.backend_factory) {
      BackendRequest request;
      request.num_threads = options.num_threads;
      request.num_kv_blocks = options.num_kv_blocks;  // 0: the backend sizes its pool
      request.kv_dtype = options.kv_dtype;
      request.max_model_len = options.max_model_len;
      return options.backend_factory(artifact, request);
    }
    CpuBackendOptions backend_options;
    backend_options.num_threads = options.num_threads;
    backend_options.num_kv_blocks = blocks;
    backend_options.kv_dtype = options.kv_dtype;
    // A tensor-parallel artifact runs as its ranks on threads (TpCpuBackend).
    return createCpuServingBackend(artifact, backend_options);
  }();
  if (!backend.ok()) return backend.status();
  e->backend_ = std::move(backend).value();
  blocks = e->backend_->numKvBlocks();
  if (!e->backend_->takesTreeInputs() && e->backend_->numExtraInputs() > 0)
    return unimplemented(artifact.source() + ": the program takes " +
                         std::to_string(e->backend_->numExtraInputs()) +
                         " extra attention inputs the engine cannot fill (it fills only "
                         "tree_start and tree_bits)");
  const SpeculativeOptions& spec = options.speculative;
  if (spec.source != DraftSource::kNone) {
    if (spec.max_branches < 1 || spec.max_draft_tokens < 1 || spec.max_draft_tokens > 63)
      return invalidArgument("speculative decoding: max_branches must be >= 1 and "
                             "max_draft_tokens in [1, 63]");
    if ((spec.source == DraftSource::kSelf || spec.source == DraftSource::kDraftModel) &&
        options.backend_factory)
      return unimplemented("speculative decoding with a draft model runs its draft on the CPU "
                           "backend only; it is not supported with another backend yet");
    if (spec.source == DraftSource::kSelf || spec.source == DraftSource::kDraftModel) {
      const Artifact* draft = &artifact;
      int32_t program = -1;
      if (spec.source == DraftSource::kDraftModel) {
        if (!spec.draft)
          return invalidArgument("speculative decoding from a draft model needs the draft artifact");
        draft = spec.draft;
        program = 0;
        const schema::ModelConfigDef* dc = draft->manifest().config();
        if (!dc || dc->vocab_size() != config->vocab_size())
          return invalidArgument(draft->source() + ": the draft model's vocabulary (" +
                                 std::to_string(dc ? dc->vocab_size() : 0) +
                                 " tokens) differs from the target's (" +
                                 std::to_string(config->vocab_size()) +
                                 "); speculative decoding needs the same tokenizer");
        const schema::TokenizerDef* dt = draft->manifest().tokenizer();
        const schema::TokenizerDef* tt = artifact.manifest().tokenizer();
        if (dt && tt && dt->tokens() && tt->tokens()) {
          bool same = dt->tokens()->size() == tt->tokens()->size();
          for (uint32_t i = 0; same && i < dt->tokens()->size(); ++i)
            same = dt->tokens()->Get(i)->string_view() == tt->tokens()->Get(i)->string_view();
          if (!same)
            return invalidArgument(draft->source() +
                                   ": the draft model's tokenizer differs from the target's");
        }
      } else {
        for (uint32_t i = 1; i < artifact.manifest().programs()->size(); ++i)
          if (artifact.manifest().programs()->Get(i)->role() == schema::ProgramRole::Draft) {
            program = static_cast<int32_t>(i);
            break;
          }
        if (program < 0)
          return invalidArgument(artifact.source() +
                                 ": self-speculation needs a draft program; compile with "
                                 "--draft-layers N");
      }
      StatusOr<std::unique_ptr<DraftModel>> d =
          DraftModel::create(*draft, program, options.num_threads, blocks);
      if (!d.ok()) return d.status();
      e->draft_ = std::move(d).value();
    }
    if (spec.max_branches > 1 && !e->backend_->takesTreeInputs())
      return invalidArgument(artifact.source() +
                             ": speculative trees (more than one branch) need an artifact whose "
                             "attention reads tree_start/tree_bits; recompile it, or use chains "
                             "(one branch)");
    if (spec.max_branches > 1 && slidingWindowOf(artifact) > 0)
      return unimplemented(artifact.source() +
                           ": speculative trees (more than one branch) with sliding-window "
                           "attention layers: a sibling's KV slot is not its position, so its "
                           "window would end early; use chains (one branch)");
  }
  e->kv_ = std::make_unique<KvCacheManager>(static_cast<int32_t>(blocks), block_size,
                                            options.enable_prefix_cache);
  e->kv_->trackFreedBlocks(e->backend_->wantsFreedKvBlocks());
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
    if (speculates(p.params)) {
      live.proposer = std::make_unique<NgramProposer>(options_.speculative.ngram);
      live.proposer->append(p.prompt);
      live.depth = AdaptiveDepth(options_.speculative.adaptive);
    }
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
      if (live.proposer) {
        child.proposer = std::make_unique<NgramProposer>(*live.proposer);
        child.depth = live.depth;
      }
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
    forget(id);
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

bool Engine::speculates(const SamplingParams& params) const {
  // Penalties would make each tree node's distribution depend on its own path, and
  // logprobs are reported per sampled row: such requests decode one token at a time.
  return options_.speculative.source != DraftSource::kNone && !params.logprobs &&
         params.repetition_penalty == 1.0f && params.presence_penalty == 0.0f &&
         params.frequency_penalty == 0.0f;
}

FinishReason Engine::emitToken(Live& live, int32_t token, RequestOutput* out) {
  const SamplingParams& params = live.sampler.params();
  ++live.generated;
  ++counters_.generation_tokens;
  if (live.proposer) live.proposer->append(token);
  out->token_ids.push_back(token);
  FinishReason reason = finishAfterToken(params, token, live.generated, isEos(token));
  const bool stop_token = reason == FinishReason::kStop;
  if (reason == FinishReason::kNone && live.num_prompt + live.generated >= max_model_len_)
    reason = FinishReason::kLength;
  if (options_.token_text && !stop_token) {
    if (live.stop) {
      out->text += live.stop->push(options_.token_text(token));
      if (live.stop->stopped()) reason = FinishReason::kStop;
      else if (reason != FinishReason::kNone) out->text += live.stop->finish();
    } else {
      out->text += options_.token_text(token);
    }
  } else if (live.stop && stop_token) {
    out->text += live.stop->finish();
  }
  return reason;
}

void Engine::report(RequestId id, RequestOutput out, FinishReason reason,
                    std::vector<RequestOutput>* outputs) {
  Live& live = live_.at(id);
  out.id = id;
  out.finish_reason = reason;
  out.num_prompt_tokens = live.num_prompt;
  out.num_generated_tokens = live.generated;
  if (reason != FinishReason::kNone) {
    (void)sched_->finish(id);
    live_.erase(id);
    forget(id);
  }
  outputs->push_back(std::move(out));
}

void Engine::sampleOne(RequestId id, const float* logits, std::vector<RequestOutput>* outputs) {
  Live& live = live_.at(id);
  const SamplingParams& params = live.sampler.params();
  SampleLogprobs lp;
  const int32_t token =
      live.sampler.sample(logits, backend_->vocabSize(), params.logprobs ? &lp : nullptr);
  emitSampled(id, token, params.logprobs ? &lp : nullptr, outputs);
}

void Engine::emitSampled(RequestId id, int32_t token, SampleLogprobs* logprobs,
                         std::vector<RequestOutput>* outputs) {
  Live& live = live_.at(id);
  RequestOutput out;
  if (logprobs) out.logprobs.push_back(std::move(*logprobs));
  FinishReason reason = emitToken(live, token, &out);
  if (reason == FinishReason::kNone && !sched_->appendToken(id, token).ok())
    reason = FinishReason::kLength;  // unreachable while max_model_len <= pool tokens
  report(id, std::move(out), reason, outputs);
}

void Engine::forget(RequestId id) {
  if (draft_) draft_->release(id);
}

StatusOr<std::vector<RequestOutput>> Engine::step() {
  std::vector<RequestOutput> outputs;
  drainInbox(&outputs);
  proposeDrafts();
  const StepPlan plan = sched_->schedule();
  if (!plan.empty()) {
    for (const BlockCopy& c : plan.copies)
      INGOT_RETURN_IF_ERROR(backend_->copyKvBlocks(c.src, c.dst));
    TreeOf trees(plan.seqs.size(), nullptr);
    bool any_tree = false;
    for (size_t i = 0; i < plan.seqs.size(); ++i) {
      if (plan.seqs[i].num_draft == 0) continue;
      trees[i] = &*live_.at(plan.seqs[i].id).tree;
      any_tree = true;
    }
    std::vector<int32_t> rows, tree_start, tree_bits;
    int64_t tree_bits_shape[3], tree_start_shape[1];
    const StepInputs inputs = buildStepInputs(plan, trees, backend_->takesTreeInputs(), &rows, &tree_start,
                                              &tree_bits, tree_bits_shape, tree_start_shape);
    // Where the backend samples (the CUDA backend keeps the logits on the GPU), a step whose
    // rows are all plain requests (no trees, penalties, logprobs or parallel samples) gets
    // tokens back instead of logits; each request draws its uniform from its own stream.
    if (backend_->wantsFreedKvBlocks())
      INGOT_RETURN_IF_ERROR(backend_->kvBlocksFreed(kv_->takeFreedBlocks()));
    bool on_backend = !any_tree && backend_->samplesOnBackend();
    for (size_t i = 0; on_backend && i < plan.seqs.size(); ++i) {
      if (rows[i] < 0) continue;
      const Live& live = live_.at(plan.seqs[i].id);
      on_backend = live.sampler.samplesWithoutHistory() && live.pending_forks.empty();
    }
    if (on_backend) {
      row_sampling_.assign(inputs.logit_rows.size(), RowSampling());
      for (size_t i = 0; i < plan.seqs.size(); ++i) {
        if (rows[i] < 0) continue;
        Sampler& sampler = live_.at(plan.seqs[i].id).sampler;
        const SamplingParams& p = sampler.params();
        row_sampling_[rows[i]] = {p.temperature, p.top_k, p.top_p, p.min_p,
                                  p.greedy() ? 0.0 : sampler.nextUniform()};
      }
      INGOT_RETURN_IF_ERROR(backend_->stepAndSample(inputs, row_sampling_, &sampled_));
    } else {
      INGOT_RETURN_IF_ERROR(backend_->step(inputs, &logits_));
    }
    INGOT_RETURN_IF_ERROR(sched_->completeStep(plan));
    counters_.computed_tokens += plan.num_tokens;
    ++counters_.steps;
    counters_.spec_target_passes += any_tree ? 1 : 0;
    const int64_t vocab = backend_->vocabSize();
    for (size_t i = 0; i < plan.seqs.size(); ++i) {
      if (rows[i] < 0) continue;
      if (on_backend) {
        Live& live = live_.at(plan.seqs[i].id);
        const int32_t token = sampled_[rows[i]];
        live.sampler.recordOutput(token);
        emitSampled(plan.seqs[i].id, token, nullptr, &outputs);
        continue;
      }
      const float* row = logits_.data() + static_cast<int64_t>(rows[i]) * vocab;
      if (trees[i]) INGOT_RETURN_IF_ERROR(verifyDraft(plan.seqs[i], row, &outputs));
      else sampleRow(plan.seqs[i].id, row, &outputs);
    }
    // Trees the scheduler dropped (no budget or blocks this step) are proposed anew.
    for (auto& [id, live] : live_) live.tree.reset();
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
