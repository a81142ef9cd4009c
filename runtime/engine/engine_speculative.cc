// Engine, speculative decoding: the options' parsing, each step's drafts and their verification.
#include <algorithm>
#include <utility>

#include "runtime/engine/engine.h"
#include "runtime/spec/accepted_kv.h"
#include "runtime/spec/verify.h"

namespace ingot {

StatusOr<SpeculativeOptions> speculativeOptions(const std::string& source, int32_t max_depth,
                                                int32_t branches) {
  SpeculativeOptions o;
  if (source == "off" || source.empty()) return o;
  if (source == "prompt-lookup") o.source = DraftSource::kPromptLookup;
  else if (source == "self") o.source = DraftSource::kSelf;
  else if (source == "draft-model") o.source = DraftSource::kDraftModel;
  else
    return invalidArgument("--speculative must be off, prompt-lookup, self or draft-model, got '" +
                           source + "'");
  if (max_depth < 1 || max_depth > 32)
    return invalidArgument("--spec-tokens must be in [1, 32], got " + std::to_string(max_depth));
  if (branches < 1 || branches > 8)
    return invalidArgument("--spec-branches must be in [1, 8], got " + std::to_string(branches));
  o.max_branches = branches;
  o.adaptive.max_depth = max_depth;
  o.adaptive.initial_depth = std::max(1, max_depth / 2);
  o.max_draft_tokens = std::min(63, max_depth * branches);
  return o;
}

void Engine::proposeDrafts() {
  const SpeculativeOptions& spec = options_.speculative;
  if (spec.source == DraftSource::kNone) return;
  const int32_t batch = sched_->numRunning();
  const int32_t branches = backend_->takesTreeInputs() ? spec.max_branches : 1;
  std::vector<DraftQuery> queries;  // draft models read prompt + output (the proposer's history)
  for (auto& [id, live] : live_) {
    live.tree.reset();
    if (!live.proposer || !sched_->isDecodeReady(id)) continue;
    // Never draft past what the request may still emit: the bonus token always comes.
    const SamplingParams& params = live.sampler.params();
    int64_t room = static_cast<int64_t>(max_model_len_) - live.num_prompt - live.generated;
    if (params.max_tokens) room = std::min<int64_t>(room, *params.max_tokens - live.generated - 1);
    const int32_t depth =
        static_cast<int32_t>(std::min<int64_t>(live.depth.nextDepth(batch), room));
    if (depth <= 0) continue;
    if (draft_) {
      queries.push_back({id, &live.proposer->history(), depth});
      continue;
    }
    TokenTree tree = live.proposer->proposeTree(depth, branches);
    if (tree.size() <= 1) continue;
    // Depth-first: the first branch lies in consecutive slots, exactly as decoding it.
    FlatTree flat = tree.flatten(live.num_prompt + static_cast<int32_t>(live.generated) - 1,
                                 TreeOrder::kDepthFirst);
    if (flat.size() - 1 > spec.max_draft_tokens) {
      // Keep the first max_draft_tokens nodes of the depth-first order (a prefix of a
      // topological order is a tree under the same root).
      TokenTree cut(flat.tokens[0]);
      for (int32_t i = 1; i <= spec.max_draft_tokens; ++i) cut.addChild(flat.parents[i], flat.tokens[i]);
      flat = cut.flatten(flat.positions[0], TreeOrder::kDepthFirst);
    }
    std::vector<int32_t> draft(flat.tokens.begin() + 1, flat.tokens.end());
    if (sched_->setDraft(id, std::move(draft)).ok()) live.tree = std::move(flat);
  }
  if (!draft_ || queries.empty()) return;
  std::vector<std::vector<int32_t>> chains;
  std::vector<std::vector<std::vector<int32_t>>> alternatives;
  if (!draft_->propose(queries, &chains, branches, &alternatives).ok()) {
    // A draft model failure costs speculation, never the request.
    for (const DraftQuery& q : queries) draft_->release(q.id);
    return;
  }
  for (size_t i = 0; i < queries.size(); ++i) {
    if (chains[i].empty()) continue;
    Live& live = live_.at(queries[i].id);
    // The greedy chain, and at each depth the draft's runners-up as leaves beside it (a
    // static top-k tree along the top-1 path), within max_draft_tokens.
    TokenTree tree(queries[i].history->back());
    std::vector<int32_t> chain_nodes;
    int32_t parent = 0;
    for (int32_t token : chains[i]) chain_nodes.push_back(parent = tree.addChild(parent, token));
    for (size_t d = 0; d < alternatives[i].size() && d < chains[i].size(); ++d)
      for (int32_t token : alternatives[i][d]) {
        if (tree.size() - 1 >= spec.max_draft_tokens) break;
        tree.addChild(d == 0 ? 0 : chain_nodes[d - 1], token);
      }
    FlatTree flat = tree.flatten(live.num_prompt + static_cast<int32_t>(live.generated) - 1,
                                 TreeOrder::kDepthFirst);
    std::vector<int32_t> draft(flat.tokens.begin() + 1, flat.tokens.end());
    if (sched_->setDraft(queries[i].id, std::move(draft)).ok()) live.tree = std::move(flat);
  }
}

Status Engine::verifyDraft(const ScheduledSeq& seq, const float* logits,
                           std::vector<RequestOutput>* outputs) {
  Live& live = live_.at(seq.id);
  const FlatTree& tree = *live.tree;
  const int64_t vocab = backend_->vocabSize();
  StatusOr<VerifyResult> verified = [&]() -> StatusOr<VerifyResult> {
    if (live.sampler.params().greedy()) return verifyTreeGreedyLogits(tree, logits, vocab);
    // The target's distribution at every node, as the sampler would draw from it.
    const int64_t n = tree.size();
    target_probs_.resize(static_cast<size_t>(n * vocab));
    std::vector<double> row;
    for (int64_t i = 0; i < n; ++i) {
      live.sampler.probabilities(logits + i * vocab, vocab, &row);
      std::copy(row.begin(), row.end(), target_probs_.begin() + i * vocab);
    }
    return verifyTreeSampled(tree, ProbabilityRows{target_probs_.data(), n, vocab},
                             DraftSampling::kDeterministic, ProbabilityRows{},
                             live.sampler.rng());
  }();
  if (!verified.ok()) return verified.status().withPrefix("speculative verification");
  const VerifyResult& result = *verified;
  const int32_t accepted = static_cast<int32_t>(result.accepted.size());
  int32_t path = 0;
  for (int32_t d : tree.depths) path = std::max(path, d);
  ++counters_.spec_trees;
  counters_.spec_draft_tokens += tree.size() - 1;
  counters_.spec_path_tokens += path;
  counters_.spec_accepted_tokens += accepted;
  live.depth.observe(path, accepted);

  RequestOutput out;
  FinishReason reason = FinishReason::kNone;
  for (int32_t token : result.tokens) {
    live.sampler.recordOutput(token);
    reason = emitToken(live, token, &out);
    if (reason != FinishReason::kNone) break;
  }
  if (reason == FinishReason::kNone) {
    // Keep the accepted path's KV (moved right after the root), release the rest.
    std::vector<std::pair<int32_t, int32_t>> moves;
    for (const KvMove& m : planAcceptedKv(tree, result).moves)
      moves.emplace_back(seq.slots[m.from], seq.slots[m.to]);
    INGOT_RETURN_IF_ERROR(backend_->copyKvSlots(moves));
    std::vector<int32_t> path_tokens(result.tokens.begin(), result.tokens.end() - 1);
    INGOT_RETURN_IF_ERROR(sched_->acceptDraft(seq.id, path_tokens));
    if (!sched_->appendToken(seq.id, result.bonus_token).ok()) reason = FinishReason::kLength;
  }
  live.tree.reset();
  report(seq.id, std::move(out), reason, outputs);
  return okStatus();
}

}  // namespace ingot
