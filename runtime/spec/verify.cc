// Tree verification: which draft tokens the target model accepts, and the bonus token drawn
// after them — exact match when greedy, recursive rejection sampling when sampling.
#include "runtime/spec/verify.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace ingot {
namespace {

Status checkTree(const FlatTree& tree) {
  if (tree.size() < 1) return invalidArgument("the token tree has no root");
  return okStatus();
}

Status checkRows(const char* what, ProbabilityRows rows, const FlatTree& tree) {
  if (rows.rows != tree.size() || rows.vocab <= 0 || rows.data == nullptr)
    return invalidArgument(std::string(what) + " needs one row per tree node (" +
                           std::to_string(tree.size()) + "), got " + std::to_string(rows.rows) +
                           " rows of " + std::to_string(rows.vocab));
  for (int32_t t : tree.tokens)
    if (t < 0 || t >= rows.vocab)
      return invalidArgument("tree token " + std::to_string(t) + " is outside the vocabulary");
  return okStatus();
}

double sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

/// Inverse-CDF draw from unnormalized weights with total `total`.
int32_t drawFrom(const double* w, int64_t vocab, double total, double u) {
  double target = u * total;
  int32_t last_positive = -1;
  for (int64_t i = 0; i < vocab; ++i) {
    if (!(w[i] > 0)) continue;
    last_positive = static_cast<int32_t>(i);
    target -= w[i];
    if (target < 0) return last_positive;
  }
  return last_positive;  // rounding left u * total just past the end
}

void finish(const FlatTree& tree, int32_t node, int32_t bonus, VerifyResult* result) {
  result->last_node = node;
  result->bonus_token = bonus;
  for (int32_t i : result->accepted) result->tokens.push_back(tree.tokens[i]);
  result->tokens.push_back(bonus);
}

}  // namespace

int32_t sampleFrom(const double* probs, int64_t vocab, SpecRng& rng) {
  double total = 0;
  for (int64_t i = 0; i < vocab; ++i)
    if (probs[i] > 0) total += probs[i];
  return drawFrom(probs, vocab, total, uniform01(rng));
}

StatusOr<VerifyResult> verifyTreeGreedy(const FlatTree& tree,
                                        const std::vector<int32_t>& target_tokens) {
  INGOT_RETURN_IF_ERROR(checkTree(tree));
  if (static_cast<int32_t>(target_tokens.size()) != tree.size())
    return invalidArgument("greedy verification needs one target token per tree node");
  VerifyResult result;
  int32_t node = 0;
  for (;;) {
    const int32_t want = target_tokens[node];
    const int32_t* first = tree.childrenBegin(node);
    const int32_t* last = first + tree.numChildren(node);
    const int32_t* hit =
        std::find_if(first, last, [&](int32_t c) { return tree.tokens[c] == want; });
    if (hit == last) break;
    node = *hit;
    result.accepted.push_back(node);
  }
  finish(tree, node, target_tokens[node], &result);
  return result;
}

StatusOr<VerifyResult> verifyTreeGreedyLogits(const FlatTree& tree, const float* logits,
                                              int64_t vocab) {
  std::vector<int32_t> choice(tree.size());
  for (int32_t i = 0; i < tree.size(); ++i) {
    const float* row = logits + static_cast<int64_t>(i) * vocab;
    int32_t best = 0;
    float best_value = -INFINITY;
    for (int64_t v = 0; v < vocab; ++v) {
      if (row[v] > best_value) {  // strict: ties keep the lower id; false for NaN
        best_value = row[v];
        best = static_cast<int32_t>(v);
      }
    }
    choice[i] = best;
  }
  return verifyTreeGreedy(tree, choice);
}

StatusOr<VerifyResult> verifyTreeSampled(const FlatTree& tree, ProbabilityRows target,
                                         DraftSampling sampling, ProbabilityRows draft,
                                         SpecRng& rng) {
  INGOT_RETURN_IF_ERROR(checkTree(tree));
  INGOT_RETURN_IF_ERROR(checkRows("the target distribution", target, tree));
  const bool deterministic = sampling == DraftSampling::kDeterministic;
  const bool without_replacement = sampling == DraftSampling::kSampledWithoutReplacement;
  if (!deterministic) {
    INGOT_RETURN_IF_ERROR(checkRows("the draft distribution", draft, tree));
    if (draft.vocab != target.vocab)
      return invalidArgument("draft and target distributions differ in vocabulary size");
  }
  const int64_t vocab = target.vocab;
  VerifyResult result;
  std::vector<double> r(vocab);  // residual target distribution, unnormalized
  std::vector<double> q(vocab);  // draft distribution of the remaining siblings, unnormalized
  int32_t node = 0;
  for (;;) {
    std::copy_n(target.row(node), vocab, r.begin());
    double r_total = sum(r);
    if (!(r_total > 0))
      return invalidArgument("target row " + std::to_string(node) + " has no probability mass");
    double q_total = 0;
    const int32_t num_children = tree.numChildren(node);
    if (!deterministic && num_children > 0) {
      std::copy_n(draft.row(node), vocab, q.begin());
      q_total = sum(q);
    }
    int32_t accepted = -1;
    for (int32_t k = 0; k < num_children && accepted < 0; ++k) {
      const int32_t child = tree.childrenBegin(node)[k];
      const int32_t x = tree.tokens[child];
      double accept_prob;
      if (deterministic) {
        accept_prob = r[x] / r_total;
      } else {
        if (!(q[x] > 0) || !(q_total > 0))
          return invalidArgument("tree token " + std::to_string(x) + " at node " +
                                 std::to_string(child) +
                                 " has zero probability under the draft it was drawn from");
        accept_prob = std::min(1.0, (r[x] / r_total) / (q[x] / q_total));
      }
      if (uniform01(rng) < accept_prob) {
        accepted = child;
        break;
      }
      // Rejected: the residual is what the target still owes beyond this proposal.
      if (deterministic) {
        r[x] = 0;
        r_total = sum(r);
      } else {
        double new_total = 0;
        for (int64_t v = 0; v < vocab; ++v) {
          r[v] = std::max(r[v] / r_total - q[v] / q_total, 0.0);
          new_total += r[v];
        }
        r_total = new_total;
        if (without_replacement) {
          q[x] = 0;
          q_total = sum(q);
        }
      }
      // r == q (up to rounding) makes rejection impossible in exact arithmetic; should
      // rounding reject anyway, the target row itself is the right distribution.
      if (!(r_total > 0)) {
        std::copy_n(target.row(node), vocab, r.begin());
        r_total = sum(r);
        break;
      }
    }
    if (accepted < 0) {
      finish(tree, node, drawFrom(r.data(), vocab, r_total, uniform01(rng)), &result);
      return result;
    }
    node = accepted;
    result.accepted.push_back(node);
  }
}

}  // namespace ingot
