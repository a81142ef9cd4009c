// Tree builders: grow a draft TokenTree from a draft model — static top-k shapes, dynamic
// EAGLE-2-style trees grown by draft confidence, and sampled trees (SpecInfer style).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/spec/token_tree.h"
#include "runtime/spec/verify.h"

namespace ingot {

/// A draft model as the builders see it: one call per tree level, so a level is drafted in
/// one batched pass.
class DraftModel {
 public:
  virtual ~DraftModel() = default;
  virtual int64_t vocab() const = 0;
  /// Fills `probs` ([nodes.size(), vocab], row-major) with the draft's next-token
  /// distribution after the path root..node of each listed node of `tree`.
  virtual void nextTokenProbs(const TokenTree& tree, const std::vector<int32_t>& nodes,
                              std::vector<double>* probs) = 0;
};

/// Static shape: every node at depth d gets the top branching[d] tokens of the draft as
/// children (ties to the lowest id; zero-probability tokens never). Depth = branching.size().
/// Deterministic proposals: verify with DraftSampling::kDeterministic.
TokenTree buildStaticTree(int32_t root_token, const std::vector<int32_t>& branching,
                          DraftModel& draft);

/// EAGLE-2 dynamic tree (Li et al. 2024): grow `max_depth` levels; at each level expand the
/// `expand_per_level` nodes of the newest level with the highest path probability (the
/// draft's confidence in the whole path), each into its top `branching` tokens; then keep
/// the `max_draft_nodes` nodes of all levels with the highest path probability. A child's
/// path probability never exceeds its parent's, and ties prefer the shallower node, so the
/// kept set always includes each kept node's ancestors. Deterministic proposals.
struct DynamicTreeConfig {
  int32_t max_depth = 6;
  int32_t expand_per_level = 4;
  int32_t branching = 4;
  int32_t max_draft_nodes = 32;
};
TokenTree buildDynamicTree(int32_t root_token, const DynamicTreeConfig& config,
                           DraftModel& draft);

/// A tree whose children are drawn from the draft (SpecInfer-style), with the distributions
/// they were drawn from, as verifyTreeSampled() needs them.
struct SampledTree {
  TokenTree tree;
  /// [tree.size(), vocab] by tree node index: the draft distribution node i's children were
  /// drawn from (zero rows for nodes not expanded). FlatTree::gatherRows puts it in flat order.
  std::vector<double> draft_probs;
};

/// Every node at depth d gets branching[d] children drawn from the draft in order, with or
/// without replacement as `sampling` says (without replacement stops early when the
/// draft's support is exhausted). `sampling` must not be kDeterministic.
SampledTree buildSampledTree(int32_t root_token, const std::vector<int32_t>& branching,
                             DraftSampling sampling, DraftModel& draft, SpecRng& rng);

/// The k likeliest tokens of a row (fewer when fewer have positive probability), likeliest
/// first, ties to the lowest id.
std::vector<int32_t> topTokens(const double* probs, int64_t vocab, int32_t k);

}  // namespace ingot
