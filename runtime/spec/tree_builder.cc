// Tree builders: grow a draft TokenTree from a draft model — static top-k shapes, dynamic
// EAGLE-2-style trees grown by draft confidence, and sampled trees (SpecInfer style).
#include "runtime/spec/tree_builder.h"

#include <algorithm>
#include <cassert>
#include <numeric>

namespace ingot {

std::vector<int32_t> topTokens(const double* probs, int64_t vocab, int32_t k) {
  std::vector<int32_t> ids;
  for (int64_t v = 0; v < vocab; ++v)
    if (probs[v] > 0) ids.push_back(static_cast<int32_t>(v));
  const size_t keep = std::min(ids.size(), static_cast<size_t>(std::max(k, 0)));
  std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(), [&](int32_t a, int32_t b) {
    return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
  });
  ids.resize(keep);
  return ids;
}

TokenTree buildStaticTree(int32_t root_token, const std::vector<int32_t>& branching,
                          DraftModel& draft) {
  TokenTree tree(root_token);
  const int64_t vocab = draft.vocab();
  std::vector<int32_t> level = {0};
  std::vector<double> probs;
  for (int32_t k : branching) {
    if (level.empty()) break;
    draft.nextTokenProbs(tree, level, &probs);
    std::vector<int32_t> next;
    for (size_t i = 0; i < level.size(); ++i) {
      const double* row = probs.data() + i * vocab;
      for (int32_t t : topTokens(row, vocab, k)) next.push_back(tree.addChild(level[i], t, row[t]));
    }
    level = std::move(next);
  }
  return tree;
}

TokenTree buildDynamicTree(int32_t root_token, const DynamicTreeConfig& config,
                           DraftModel& draft) {
  TokenTree candidates(root_token);
  const int64_t vocab = draft.vocab();
  std::vector<int32_t> level = {0};
  std::vector<double> probs;
  for (int32_t depth = 0; depth < config.max_depth && !level.empty(); ++depth) {
    // Expand only the most confident nodes of the newest level.
    std::stable_sort(level.begin(), level.end(), [&](int32_t a, int32_t b) {
      return candidates.node(a).path_prob > candidates.node(b).path_prob;
    });
    if (static_cast<int32_t>(level.size()) > config.expand_per_level)
      level.resize(std::max(config.expand_per_level, 0));
    std::sort(level.begin(), level.end());
    if (level.empty()) break;
    draft.nextTokenProbs(candidates, level, &probs);
    std::vector<int32_t> next;
    for (size_t i = 0; i < level.size(); ++i) {
      const double* row = probs.data() + i * vocab;
      for (int32_t t : topTokens(row, vocab, config.branching))
        next.push_back(candidates.addChild(level[i], t, row[t]));
    }
    level = std::move(next);
  }
  // Rerank every candidate by path probability; ties go to the shallower, then earlier node.
  std::vector<int32_t> order(candidates.size() - 1);
  std::iota(order.begin(), order.end(), 1);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const TreeNode& x = candidates.node(a);
    const TreeNode& y = candidates.node(b);
    if (x.path_prob != y.path_prob) return x.path_prob > y.path_prob;
    if (x.depth != y.depth) return x.depth < y.depth;
    return a < b;
  });
  std::vector<bool> keep(candidates.size(), false);
  keep[0] = true;
  int32_t kept = 0;
  for (int32_t c : order) {
    if (kept >= config.max_draft_nodes) break;
    if (!keep[candidates.node(c).parent]) continue;  // cannot happen; keeps the set a tree
    keep[c] = true;
    ++kept;
  }
  // Rebuild in candidate order (topological), so kept parents come before their children.
  TokenTree tree(root_token);
  std::vector<int32_t> new_index(candidates.size(), -1);
  new_index[0] = 0;
  for (int32_t c = 1; c < candidates.size(); ++c) {
    if (!keep[c]) continue;
    const TreeNode& node = candidates.node(c);
    const double step_prob = node.path_prob / candidates.node(node.parent).path_prob;
    new_index[c] = tree.addChild(new_index[node.parent], node.token, step_prob);
  }
  return tree;
}

SampledTree buildSampledTree(int32_t root_token, const std::vector<int32_t>& branching,
                             DraftSampling sampling, DraftModel& draft, SpecRng& rng) {
  assert(sampling != DraftSampling::kDeterministic);
  const int64_t vocab = draft.vocab();
  SampledTree out{TokenTree(root_token), {}};
  std::vector<int32_t> level = {0};
  std::vector<double> probs;
  std::vector<double> remaining(vocab);
  for (int32_t k : branching) {
    if (level.empty()) break;
    draft.nextTokenProbs(out.tree, level, &probs);
    std::vector<int32_t> next;
    for (size_t i = 0; i < level.size(); ++i) {
      const double* row = probs.data() + i * vocab;
      out.draft_probs.resize(static_cast<size_t>(out.tree.size()) * vocab, 0.0);
      std::copy_n(row, vocab, out.draft_probs.begin() + level[i] * vocab);
      std::copy_n(row, vocab, remaining.begin());
      for (int32_t j = 0; j < k; ++j) {
        if (std::none_of(remaining.begin(), remaining.end(), [](double p) { return p > 0; }))
          break;
        const int32_t t = sampleFrom(remaining.data(), vocab, rng);
        next.push_back(out.tree.addChild(level[i], t, row[t]));
        if (sampling == DraftSampling::kSampledWithoutReplacement) remaining[t] = 0;
      }
    }
    level = std::move(next);
  }
  out.draft_probs.resize(static_cast<size_t>(out.tree.size()) * vocab, 0.0);
  return out;
}

}  // namespace ingot
