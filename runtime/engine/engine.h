// Engine: continuous-batching generation — scheduler, paged KV cache, backend, sampling.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/artifact/artifact_reader.h"
#include "runtime/backend/backend.h"
#include "runtime/backend/kv_dtype.h"
#include "core/base/status.h"
#include "runtime/engine/draft_model.h"
#include "runtime/generate/sampler.h"
#include "runtime/generate/stop_matcher.h"
#include "runtime/kv/kv_cache_manager.h"
#include "runtime/sched/scheduler.h"
#include "runtime/spec/adaptive_depth.h"
#include "runtime/spec/ngram_proposer.h"
#include "runtime/spec/token_tree.h"

namespace ingot {

/// Where speculative draft tokens come from.
enum class DraftSource {
  kNone,
  /// Prompt lookup: n-gram matches against the prompt and the text generated so far.
  kPromptLookup,
  /// Self-speculation: the target artifact's draft program (its first layers and its
  /// head, compiled with `ingot compile --draft-layers N`), greedy chains.
  kSelf,
  /// A separate draft artifact with the same vocabulary (SpeculativeOptions::draft),
  /// greedy chains.
  kDraftModel,
};

/// Speculative decoding: each decoding request may carry a tree of draft tokens that the
/// target verifies in the same (one) forward pass; lossless — greedy output is exactly
/// what it is without speculation, sampled output follows the same distribution (recursive
/// rejection sampling, runtime/spec/verify.h).
struct SpeculativeOptions {
  DraftSource source = DraftSource::kNone;
  /// Branches of a draft tree (distinct continuations). More than 1 needs an artifact
  /// whose attention reads the tree mask (programs compiled by this version); chains
  /// (1) run on any artifact since a chain is plain causal attention.
  int32_t max_branches = 1;
  /// Draft nodes of one tree at most (root excluded).
  int32_t max_draft_tokens = 32;
  NgramConfig ngram;
  /// kDraftModel: the draft artifact (must outlive the engine).
  const Artifact* draft = nullptr;
  /// Depth per request from its recent acceptance; speculation stops above
  /// adaptive.max_batch_size running requests.
  AdaptiveDepthConfig adaptive;
};

/// Options from the command line's --speculative SOURCE (off | prompt-lookup | self |
/// draft-model; the draft artifact is set by the caller),
/// --spec-tokens (deepest draft; the adaptive depth starts at half of it) and
/// --spec-branches; errors name the bad value.
StatusOr<SpeculativeOptions> speculativeOptions(const std::string& source, int32_t max_depth,
                                                int32_t branches);

struct EngineOptions {
  /// Backend worker threads including the caller; 0 = all cores.
  int num_threads = 0;
  /// Blocks in the KV pool; 0 = 16384 tokens' worth (or one max_context, if larger).
  int64_t num_kv_blocks = 0;
  /// KV pool element type; unset = the artifact's. fp8 holds ~4x the tokens per byte.
  std::optional<KvDtype> kv_dtype;
  bool enable_prefix_cache = true;
  SchedulerOptions scheduler;
  /// Longest sequence (prompt + output); 0 = the model's max_context. Never above what
  /// the KV pool holds.
  int32_t max_model_len = 0;
  /// Tokens that end generation unless ignore_eos; unset = the artifact's eos_token_ids
  /// (model config) plus its tokenizer's eos_token_id.
  std::optional<std::vector<int32_t>> eos_token_ids;
  /// The text of one token; when set, the engine detokenizes with it to honour stop
  /// strings and fills RequestOutput::text. Unset: stop strings are the caller's business.
  std::function<std::string(int32_t)> token_text;
  SpeculativeOptions speculative;
  /// The backend to run on (the CLI's --device); unset = the CPU backend. Its KV pool size
  /// (num_kv_blocks above when set, else the backend's choice) is the engine's.
  BackendFactory backend_factory;
};

/// What one step produced for one request.
struct RequestOutput {
  RequestId id = -1;
  /// Tokens generated in this step: one, several (accepted speculative tokens, then the
  /// target's own), or none for a cancellation.
  std::vector<int32_t> token_ids;
  /// One entry per token when SamplingParams::logprobs is set.
  std::vector<SampleLogprobs> logprobs;
  /// Text safe to emit now (only with EngineOptions::token_text).
  std::string text;
  FinishReason finish_reason = FinishReason::kNone;
  /// The request was cancelled (cancel()); it produces nothing more.
  bool cancelled = false;
  int32_t num_prompt_tokens = 0;
  int64_t num_generated_tokens = 0;

  bool finished() const { return cancelled || finish_reason != FinishReason::kNone; }
};

/// Counters and gauges for /metrics (a snapshot taken at the end of each step).
struct EngineMetrics {
  int64_t prompt_tokens = 0;         // prompt tokens of accepted requests
  int64_t generation_tokens = 0;     // tokens sampled
  int64_t prefix_cache_hit_tokens = 0;
  int64_t computed_tokens = 0;       // tokens run through the backend (prefill + decode)
  int64_t preemptions = 0;
  int64_t steps = 0;
  int32_t last_batch_size = 0;       // sequences in the last step
  int32_t running = 0;
  int32_t waiting = 0;
  int32_t kv_blocks_used = 0;
  int32_t kv_blocks_total = 0;
  // Speculative decoding.
  int64_t spec_trees = 0;            // draft trees verified (one target row set each)
  int64_t spec_draft_tokens = 0;     // draft tokens run through the target
  int64_t spec_path_tokens = 0;      // draft tokens on the trees' longest paths
  int64_t spec_accepted_tokens = 0;  // draft tokens accepted
  int64_t spec_target_passes = 0;    // steps that verified at least one tree
};

/// Runs many requests at once over one backend: each step() plans a batch (decodes first,
/// then prefill chunks, within a token budget), runs it as ONE backend step, samples each
/// request's next token with its own Sampler, and reports what changed.
///
/// Threading: one thread drives step()/hasWork(); addRequest(), cancel() and metrics() may
/// be called from any thread (requests and cancellations go through a locked inbox that
/// step() drains first).
class Engine {
 public:
  /// The artifact must outlive the engine.
  static StatusOr<std::unique_ptr<Engine>> create(const Artifact& artifact,
                                                  const EngineOptions& options);
  /// Blocks of the KV pool when EngineOptions::num_kv_blocks is 0: 16384 tokens' worth,
  /// or one max_context if larger.
  static int64_t defaultKvBlocks(const schema::ModelConfigDef& config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Queues a request; it joins a batch at the next step. Fails for invalid params, an
  /// empty prompt, token ids outside the vocabulary, or a prompt of max_model_len tokens
  /// or more.
  ///
  /// `n` > 1 asks for parallel samples: ids id, id+1, ..., id+n-1 are independent
  /// requests (sample i seeded with params.seed + i) whose prompt is computed once — the
  /// samples fork the first one's KV blocks (copy-on-write) when its prompt is done.
  StatusOr<RequestId> addRequest(std::vector<int32_t> prompt, const SamplingParams& params,
                                 int32_t priority = 0, int32_t n = 1);
  /// Cancels a request at the next step: its KV blocks return then, and that step reports
  /// it with `cancelled`. Unknown or finished ids are ignored.
  void cancel(RequestId id);
  /// One iteration. Returns an output for every request that got a token, finished or was
  /// cancelled. An error is a backend failure; the engine should not be stepped further.
  StatusOr<std::vector<RequestOutput>> step();
  /// True while any request is queued, waiting or running.
  bool hasWork() const;
  EngineMetrics metrics() const;

  int32_t maxModelLen() const { return max_model_len_; }
  const Backend& backend() const { return *backend_; }
  const KvCacheManager& kvCache() const { return *kv_; }

 private:
  struct Pending {
    RequestId id;
    std::vector<int32_t> prompt;
    SamplingParams params;
    int32_t priority;
    int32_t n;
  };
  struct Live {
    explicit Live(const SamplingParams& p) : sampler(p) {}
    Sampler sampler;
    std::unique_ptr<StopMatcher> stop;
    int32_t num_prompt = 0;
    int64_t generated = 0;
    int32_t priority = 0;
    /// Parallel samples waiting to fork this request's KV once its prompt is computed.
    std::vector<RequestId> pending_forks;
    /// Forks from another request (not yet known to the scheduler).
    bool awaiting_fork = false;
    std::vector<int32_t> prompt;  // kept only while awaiting_fork
    /// Speculation (null when the request does not speculate): the draft source's view of
    /// the text, the adaptive depth, and this step's tree.
    std::unique_ptr<NgramProposer> proposer;
    AdaptiveDepth depth;
    std::optional<FlatTree> tree;
  };

  Engine() = default;
  void drainInbox(std::vector<RequestOutput>* outputs);
  void sampleRow(RequestId id, const float* logits, std::vector<RequestOutput>* outputs);
  void sampleOne(RequestId id, const float* logits, std::vector<RequestOutput>* outputs);
  /// Emits `token` (already recorded by the request's sampler) with its logprobs, if any.
  void emitSampled(RequestId id, int32_t token, SampleLogprobs* logprobs,
                   std::vector<RequestOutput>* outputs);
  /// Records one generated token in `out`; the reason it ends the request, or kNone.
  FinishReason emitToken(Live& live, int32_t token, RequestOutput* out);
  /// Ends `out` with `reason` (finishing the request when it is set) and reports it.
  void report(RequestId id, RequestOutput out, FinishReason reason,
              std::vector<RequestOutput>* outputs);
  /// Speculation for the step about to be planned: a draft tree for every request that
  /// decodes next and whose draft source proposes something.
  void proposeDrafts();
  /// Verifies request `id`'s tree against its rows of logits (one per tree node), emits
  /// the accepted tokens and the bonus token, and commits the accepted path's KV.
  Status verifyDraft(const ScheduledSeq& seq, const float* logits,
                     std::vector<RequestOutput>* outputs);
  bool speculates(const SamplingParams& params) const;
  /// Forgets a request that ended (its draft model KV goes).
  void forget(RequestId id);
  /// Starts `child` as its own scheduler request (its parent went away before forking).
  void detachFork(RequestId child);
  bool isEos(int32_t token) const;
  void snapshotMetrics(int32_t batch_size);

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<KvCacheManager> kv_;
  std::unique_ptr<Scheduler> sched_;
  EngineOptions options_;
  std::vector<int32_t> eos_;
  int32_t max_model_len_ = 0;
  std::unordered_map<RequestId, Live> live_;
  std::vector<float> logits_;
  /// Steps sampled on the backend: each logit row's parameters, and the tokens it picked.
  std::vector<RowSampling> row_sampling_;
  std::vector<int32_t> sampled_;
  std::vector<double> target_probs_;  // sampled verification scratch
  std::unique_ptr<DraftModel> draft_;  // kSelf / kDraftModel
  EngineMetrics counters_;  // engine thread only

  mutable std::mutex mu_;  // guards everything below
  std::vector<Pending> inbox_;
  std::vector<RequestId> cancels_;
  RequestId next_id_ = 0;
  int64_t num_unfinished_ = 0;  // accepted and not yet reported finished
  EngineMetrics snapshot_;
};

}  // namespace ingot
