// DraftModel: KV reuse across steps, catch-up chunks, then one greedy token per pass.
#include "runtime/engine/draft_model.h"

#include <algorithm>
#include <cmath>

#include "runtime/generate/sampler.h"

namespace ingot {

StatusOr<std::unique_ptr<DraftModel>> DraftModel::create(const Artifact& artifact,
                                                         int32_t program, int num_threads,
                                                         int64_t num_kv_blocks) {
  std::unique_ptr<DraftModel> d(new DraftModel());
  CpuBackendOptions o;
  o.num_threads = num_threads;
  o.num_kv_blocks = num_kv_blocks;
  o.program = program;
  StatusOr<std::unique_ptr<CpuBackend>> backend = CpuBackend::create(artifact, o);
  if (!backend.ok()) return backend.status().withPrefix("draft model");
  d->backend_ = std::move(backend).value();
  // No prefix cache: draft KV is cheap to recompute and never outlives its request.
  d->kv_ = std::make_unique<KvCacheManager>(static_cast<int32_t>(num_kv_blocks),
                                            d->backend_->modelShape().kv_block_size, false);
  return d;
}

void DraftModel::release(RequestId id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  (void)kv_->free(it->second.seq);
  seqs_.erase(it);
}

namespace {

/// The `n` largest values' indices, largest first, ties to the lowest index (so the first
/// is argmax()'s choice); NaNs never chosen.
std::vector<int32_t> topTokens(const float* values, int64_t vocab, int32_t n) {
  std::vector<int32_t> top;
  for (int64_t i = 0; i < vocab; ++i) {
    const float v = values[i];
    if (std::isnan(v)) continue;
    if (static_cast<int32_t>(top.size()) == n && !(v > values[top.back()])) continue;
    auto at = std::upper_bound(top.begin(), top.end(), v,
                               [&](float x, int32_t t) { return x > values[t]; });
    top.insert(at, static_cast<int32_t>(i));
    if (static_cast<int32_t>(top.size()) > n) top.pop_back();
  }
  return top;
}

}  // namespace

Status DraftModel::propose(const std::vector<DraftQuery>& queries,
                           std::vector<std::vector<int32_t>>* drafts, int32_t width,
                           std::vector<std::vector<std::vector<int32_t>>>* alternatives) {
  drafts->assign(queries.size(), {});
  if (alternatives) alternatives->assign(queries.size(), {});
  // One row per active query in each pass: its sequence, new tokens and their positions.
  struct Active {
    size_t query;
    Seq* seq;
    std::vector<int32_t> tokens;
    int32_t start;
  };
  std::vector<Active> active;
  for (size_t i = 0; i < queries.size(); ++i) {
    const DraftQuery& q = queries[i];
    const std::vector<int32_t>& h = *q.history;
    if (q.k <= 0 || h.empty()) continue;
    Seq& s = seqs_[q.id];
    if (s.seq < 0) {
      StatusOr<SequenceKv> admitted = kv_->admit({h[0]});
      if (!admitted.ok()) {
        seqs_.erase(q.id);
        continue;
      }
      s.seq = admitted->id;
      s.written = 0;
    }
    // KV still valid: the written prefix that still agrees with the history, always
    // leaving the history's last token to run (its logits give the first draft token).
    const std::vector<int32_t>& table = kv_->table(s.seq)->tokens();
    int32_t keep = 0;
    const int32_t limit = std::min<int32_t>(s.written, static_cast<int32_t>(h.size()) - 1);
    while (keep < limit && table[keep] == h[keep]) ++keep;
    if (!kv_->truncate(s.seq, std::max(keep, 1)).ok()) continue;
    // An admitted sequence holds h[0] unwritten; otherwise position `keep` onward goes.
    std::vector<int32_t> chunk(h.begin() + keep, h.end());
    if (keep == 0) chunk.erase(chunk.begin());  // h[0] is in the table already
    if (!chunk.empty() && !kv_->appendTokens(s.seq, chunk).ok()) {
      release(q.id);
      continue;
    }
    s.written = keep;
    active.push_back({i, &s, std::vector<int32_t>(h.begin() + keep, h.end()), keep});
  }

  const int64_t vocab = backend_->vocabSize();
  for (int32_t pass = 0; !active.empty(); ++pass) {
    StepInputs in;
    in.num_requests = static_cast<int32_t>(active.size());
    for (const Active& a : active)
      in.max_blocks_per_request = std::max<int32_t>(
          in.max_blocks_per_request, static_cast<int32_t>(kv_->table(a.seq->seq)->blocks().size()));
    in.block_tables.assign(static_cast<size_t>(in.num_requests) * in.max_blocks_per_request, 0);
    in.query_start.push_back(0);
    for (size_t r = 0; r < active.size(); ++r) {
      const Active& a = active[r];
      const BlockTable& t = *kv_->table(a.seq->seq);
      std::copy(t.blocks().begin(), t.blocks().end(),
                in.block_tables.begin() + static_cast<int64_t>(r) * in.max_blocks_per_request);
      for (size_t j = 0; j < a.tokens.size(); ++j) {
        const int32_t pos = a.start + static_cast<int32_t>(j);
        in.tokens.push_back(a.tokens[j]);
        in.positions.push_back(pos);
        in.slot_mapping.push_back(t.slotOf(pos));
      }
      in.seq_lens.push_back(a.start + static_cast<int32_t>(a.tokens.size()));
      in.query_start.push_back(static_cast<int32_t>(in.tokens.size()));
      in.logit_rows.push_back(static_cast<int32_t>(in.tokens.size()) - 1);
    }
    INGOT_RETURN_IF_ERROR(backend_->step(in, &logits_).withPrefix("draft model"));
    ++passes_;
    std::vector<Active> next;
    for (size_t r = 0; r < active.size(); ++r) {
      Active& a = active[r];
      a.seq->written = a.start + static_cast<int32_t>(a.tokens.size());
      const float* row = logits_.data() + static_cast<int64_t>(r) * vocab;
      std::vector<int32_t>& d = (*drafts)[a.query];
      int32_t token;
      if (alternatives && width > 1) {
        std::vector<int32_t> top = topTokens(row, vocab, width);
        if (top.empty()) top.push_back(0);
        token = top[0];
        (*alternatives)[a.query].emplace_back(top.begin() + 1, top.end());
      } else {
        token = argmax(row, vocab);
      }
      d.push_back(token);
      if (static_cast<int32_t>(d.size()) >= queries[a.query].k) continue;
      // Feed the draft token back: it needs a slot.
      if (!kv_->appendTokens(a.seq->seq, {token}).ok()) continue;
      next.push_back({a.query, a.seq, {token}, a.seq->written});
    }
    active = std::move(next);
  }
  return okStatus();
}

}  // namespace ingot
