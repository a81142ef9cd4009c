// Tree verification: which draft tokens the target model accepts, and the bonus token drawn
// after them — exact match when greedy, recursive rejection sampling when sampling.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "core/base/status.h"
#include "runtime/spec/token_tree.h"

namespace ingot {

/// The random engine of a request's sampler (Sampler in runtime/generate draws from the same
/// engine type, seeded with SamplingParams::seed), so one seed drives a request either way.
using SpecRng = std::mt19937_64;

/// Uniform in [0, 1) from the top 53 bits of one draw — the same mapping Sampler uses.
inline double uniform01(SpecRng& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

/// Row-major [rows, vocab] probabilities; not owned. A row need not be normalized (only
/// ratios are used) but must be non-negative with a positive sum.
struct ProbabilityRows {
  const double* data = nullptr;
  int64_t rows = 0;
  int64_t vocab = 0;
  const double* row(int64_t i) const { return data + i * vocab; }
};

/// How the children of every node were proposed; it decides the acceptance rule. Children
/// are tried in the order they were added, which for sampled drafts must be draw order.
enum class DraftSampling {
  /// Chosen by any rule that does not look at the target (prompt lookup, top-k of a draft
  /// model: static and dynamic trees). Each child is a point-mass proposal.
  kDeterministic,
  /// Drawn one after another from the draft distribution q at the parent, each from q with
  /// the earlier siblings removed and renormalized: siblings are distinct.
  kSampledWithoutReplacement,
  /// Drawn independently from q at the parent; siblings may repeat.
  kSampledWithReplacement,
};

/// Outcome of verifying one tree.
struct VerifyResult {
  /// Flat indices of the accepted draft nodes along one root-to-node path, root excluded.
  std::vector<int32_t> accepted;
  /// Flat index of the deepest accepted node (0, the root, when none was accepted): the
  /// bonus token is drawn from the target's distribution at this node.
  int32_t last_node = 0;
  int32_t bonus_token = 0;
  /// What the request emits, in order: the accepted tokens, then the bonus token.
  std::vector<int32_t> tokens;
};

/// Greedy (temperature 0) verification: from the root, repeatedly accept the first child
/// (in sibling order) whose token equals the target's choice at its parent; the bonus is the
/// target's choice at the last accepted node. `target_tokens[i]` ([n]) is the target's
/// argmax after flat node i — ties broken toward the lowest token id, as ingot::argmax does.
StatusOr<VerifyResult> verifyTreeGreedy(const FlatTree& tree,
                                        const std::vector<int32_t>& target_tokens);

/// verifyTreeGreedy() from target logits ([n, vocab] row-major): argmax per row, ties to the
/// lowest token id, NaN never chosen.
StatusOr<VerifyResult> verifyTreeGreedyLogits(const FlatTree& tree, const float* logits,
                                              int64_t vocab);

/// Lossless verification for temperature > 0 by recursive rejection sampling (SpecInfer's
/// multi-step speculative sampling; without replacement as in Recursive Speculative
/// Decoding, Jeon et al. 2024). `target` row i is the target's next-token distribution
/// after flat node i, with temperature/top-k/top-p already applied; `draft` row i is the
/// distribution node i's children were drawn from (ignored for kDeterministic and for
/// leaves; may then be empty). At each node, with r = target row and q = draft row:
///   for each child c in order:  accept with probability min(1, r(c) / q(c));
///     on rejection  r <- norm(max(r - q, 0)), and without replacement q <- norm(q with c
///     removed); a deterministic child has q = one-hot(c): accept with probability r(c),
///     else r <- norm(r with c zeroed).
///   Accepted: descend into c and repeat. All rejected (or a leaf): the bonus ~ r.
/// Each emitted token is then distributed exactly as the target's, whatever q is.
/// Consumes one uniform01(rng) per child tried plus one for the bonus.
StatusOr<VerifyResult> verifyTreeSampled(const FlatTree& tree, ProbabilityRows target,
                                         DraftSampling sampling, ProbabilityRows draft,
                                         SpecRng& rng);

/// A token drawn from `probs` (length vocab, non-negative, positive sum) by inverse CDF with
/// u = uniform01(rng); never returns a zero-probability token.
int32_t sampleFrom(const double* probs, int64_t vocab, SpecRng& rng);

}  // namespace ingot
