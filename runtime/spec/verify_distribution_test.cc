// Statistical test of lossless speculative sampling: the joint distribution of the first two
// generated tokens must match plain sampling from the target (Pearson chi-square), for every
// draft source and tree shape, and two deliberately broken verifiers must fail the same test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>

#include "runtime/spec/chi_square.h"
#include "runtime/spec/ngram_proposer.h"
#include "runtime/spec/tree_builder.h"
#include "runtime/spec/verify.h"

namespace ingot {
namespace {

constexpr int32_t kVocab = 12;
/// Top-k applied to the target, as a caller applies it before verification.
constexpr int32_t kTargetTopK = 8;
/// Samples of the first two tokens per arm (the issue asks for at least 10k).
constexpr int32_t kSamples = 20000;
constexpr int32_t kStartToken = 0;
/// A correct sampler must pass at this level, a broken one must fail at kBrokenPValue.
constexpr double kPassPValue = 1e-3;
constexpr double kBrokenPValue = 1e-6;

/// A tiny random "model": the next-token distribution depends on the previous token only.
class MarkovModel : public DraftModel {
 public:
  /// Logits ~ N(0, spread^2), softmax, then only the top_k tokens kept (renormalized).
  MarkovModel(uint64_t seed, int32_t top_k, double spread) : table_(kVocab * kVocab) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal(0.0, spread);
    for (int32_t prev = 0; prev < kVocab; ++prev) {
      double* row = table_.data() + prev * kVocab;
      for (int32_t v = 0; v < kVocab; ++v) row[v] = std::exp(normal(rng));
      std::vector<int32_t> keep = topTokens(row, kVocab, top_k);
      double total = 0;
      for (int32_t v = 0; v < kVocab; ++v) {
        if (std::find(keep.begin(), keep.end(), v) == keep.end()) row[v] = 0;
        total += row[v];
      }
      for (int32_t v = 0; v < kVocab; ++v) row[v] /= total;
    }
  }
  const double* row(int32_t prev) const { return table_.data() + prev * kVocab; }
  int64_t vocab() const override { return kVocab; }
  void nextTokenProbs(const TokenTree& tree, const std::vector<int32_t>& nodes,
                      std::vector<double>* probs) override {
    probs->clear();
    for (int32_t n : nodes) probs->insert(probs->end(), row(tree.node(n).token),
                                          row(tree.node(n).token) + kVocab);
  }
  /// Rows after each flat node: what one target forward pass over the tree returns.
  std::vector<double> rowsFor(const FlatTree& flat) const {
    std::vector<double> out;
    for (int32_t t : flat.tokens) out.insert(out.end(), row(t), row(t) + kVocab);
    return out;
  }

 private:
  std::vector<double> table_;
};

const MarkovModel& target() {
  static const MarkovModel m(/*seed=*/2024, kTargetTopK, /*spread=*/1.2);
  return m;
}
MarkovModel& draft() {
  static MarkovModel m(/*seed=*/77, /*top_k=*/10, /*spread=*/1.2);
  return m;
}

/// Deterministic "prompt lookup" proposal after a token (a fixed table; it ignores the target).
int32_t lookupNext(int32_t prev) { return (prev * 5 + 3) % kVocab; }

/// The verifier under test, or a broken one.
enum class Flaw {
  kNone,
  /// Accepts every draft token (always the first child), bonus from the target at the leaf.
  kAcceptEverything,
  /// On rejection keeps drawing/comparing against the target p instead of the residual.
  kNoResidual,
};

VerifyResult brokenVerify(const FlatTree& f, const std::vector<double>& p, DraftSampling sampling,
                          const std::vector<double>& q, Flaw flaw, SpecRng& rng) {
  VerifyResult result;
  int32_t node = 0;
  for (;;) {
    const double* pr = p.data() + node * kVocab;
    int32_t accepted = -1;
    if (flaw == Flaw::kAcceptEverything) {
      if (f.numChildren(node) > 0) accepted = f.childrenBegin(node)[0];
    } else {
      std::vector<double> qr(kVocab, 0.0);
      if (sampling != DraftSampling::kDeterministic)
        std::copy_n(q.data() + node * kVocab, kVocab, qr.begin());
      for (int32_t k = 0; k < f.numChildren(node); ++k) {
        const int32_t c = f.childrenBegin(node)[k];
        const int32_t x = f.tokens[c];
        double a = pr[x];
        if (sampling != DraftSampling::kDeterministic) {
          double qt = 0;
          for (double v : qr) qt += v;
          a = std::min(1.0, pr[x] / (qr[x] / qt));
          if (sampling == DraftSampling::kSampledWithoutReplacement) qr[x] = 0;
        }
        if (uniform01(rng) < a) {
          accepted = c;
          break;
        }
      }
    }
    if (accepted < 0) {
      result.last_node = node;
      result.bonus_token = sampleFrom(pr, kVocab, rng);  // the flaw: p, not the residual
      for (int32_t i : result.accepted) result.tokens.push_back(f.tokens[i]);
      result.tokens.push_back(result.bonus_token);
      return result;
    }
    node = accepted;
    result.accepted.push_back(node);
  }
}

/// One speculative step from `root`: draft a tree, run the "target pass", verify; returns
/// the emitted tokens (accepted drafts then the bonus).
using Step = std::function<std::vector<int32_t>(int32_t root, SpecRng& rng)>;

struct TreeAndDraft {
  FlatTree flat;
  std::vector<double> draft_rows;  // flat order; empty for deterministic drafts
};

std::vector<int32_t> verifyWith(const TreeAndDraft& t, DraftSampling sampling, Flaw flaw,
                                SpecRng& rng) {
  std::vector<double> p = target().rowsFor(t.flat);
  if (flaw != Flaw::kNone) return brokenVerify(t.flat, p, sampling, t.draft_rows, flaw, rng).tokens;
  auto r = verifyTreeSampled(t.flat, {p.data(), t.flat.size(), kVocab}, sampling,
                             {t.draft_rows.data(), static_cast<int64_t>(t.draft_rows.size()) / kVocab, kVocab},
                             rng);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? r->tokens : std::vector<int32_t>{};
}

Step sampledTreeStep(std::vector<int32_t> branching, DraftSampling sampling, TreeOrder order,
                     Flaw flaw = Flaw::kNone) {
  return [=](int32_t root, SpecRng& rng) {
    SampledTree s = buildSampledTree(root, branching, sampling, draft(), rng);
    TreeAndDraft t;
    t.flat = s.tree.flatten(0, order);
    t.draft_rows = t.flat.gatherRows(s.draft_probs, kVocab);
    return verifyWith(t, sampling, flaw, rng);
  };
}

Step lookupChainStep(int32_t depth, Flaw flaw = Flaw::kNone) {
  return [=](int32_t root, SpecRng& rng) {
    TokenTree tree(root);
    int32_t node = 0;
    for (int32_t d = 0; d < depth; ++d) node = tree.addChild(node, lookupNext(tree.node(node).token));
    return verifyWith({tree.flatten(0), {}}, DraftSampling::kDeterministic, flaw, rng);
  };
}

Step deterministicTreeStep(std::function<TokenTree(int32_t)> build, Flaw flaw = Flaw::kNone) {
  return [=](int32_t root, SpecRng& rng) {
    return verifyWith({build(root).flatten(0, TreeOrder::kDepthFirst), {}},
                      DraftSampling::kDeterministic, flaw, rng);
  };
}

/// Histogram over (first, second) generated token: kVocab * first + second.
using Histogram = std::vector<int64_t>;

Histogram plainSampling(uint64_t seed) {
  SpecRng rng(seed);
  Histogram h(kVocab * kVocab, 0);
  for (int32_t s = 0; s < kSamples; ++s) {
    int32_t a = sampleFrom(target().row(kStartToken), kVocab, rng);
    int32_t b = sampleFrom(target().row(a), kVocab, rng);
    ++h[a * kVocab + b];
  }
  return h;
}

/// `make_step` is called once per sample so per-request state (a prompt-lookup index)
/// starts fresh for each.
Histogram speculativeSampling(const std::function<Step()>& make_step, uint64_t seed) {
  SpecRng rng(seed);
  Histogram h(kVocab * kVocab, 0);
  for (int32_t s = 0; s < kSamples; ++s) {
    Step step = make_step();
    std::vector<int32_t> out;
    int32_t root = kStartToken;
    while (out.size() < 2) {
      std::vector<int32_t> emitted = step(root, rng);
      if (emitted.empty()) return {};
      out.insert(out.end(), emitted.begin(), emitted.end());
      root = out.back();
    }
    ++h[out[0] * kVocab + out[1]];
  }
  return h;
}

std::vector<double> exactJoint() {
  std::vector<double> joint(kVocab * kVocab);
  for (int32_t a = 0; a < kVocab; ++a)
    for (int32_t b = 0; b < kVocab; ++b)
      joint[a * kVocab + b] = target().row(kStartToken)[a] * target().row(a)[b];
  return joint;
}

struct Verdict {
  ChiSquareResult vs_plain;
  ChiSquareResult vs_exact;
};

Verdict compare(const std::string& name, const std::function<Step()>& make_step, uint64_t seed) {
  Histogram spec = speculativeSampling(make_step, seed);
  EXPECT_EQ(spec.size(), static_cast<size_t>(kVocab * kVocab));
  if (spec.empty()) return {};
  Verdict v{chiSquareHomogeneity(plainSampling(seed + 1), spec),
            chiSquareGoodnessOfFit(spec, exactJoint())};
  std::printf("[chi2] %-34s vs plain: X2=%9.2f dof=%3lld p=%.3g | vs exact: X2=%9.2f dof=%3lld p=%.3g\n",
              name.c_str(), v.vs_plain.statistic, static_cast<long long>(v.vs_plain.dof),
              v.vs_plain.p_value, v.vs_exact.statistic, static_cast<long long>(v.vs_exact.dof),
              v.vs_exact.p_value);
  return v;
}

void expectMatchesTarget(const std::string& name, const std::function<Step()>& make_step,
                         uint64_t seed) {
  Verdict v = compare(name, make_step, seed);
  EXPECT_GT(v.vs_plain.p_value, kPassPValue) << name;
  EXPECT_GT(v.vs_exact.p_value, kPassPValue) << name;
}

void expectRejected(const std::string& name, const std::function<Step()>& make_step,
                    uint64_t seed) {
  Verdict v = compare(name, make_step, seed);
  EXPECT_LT(v.vs_plain.p_value, kBrokenPValue) << name;
  EXPECT_LT(v.vs_exact.p_value, kBrokenPValue) << name;
}

TEST(SpeculativeSamplingDistributionTest, PlainSamplingMatchesTheExactJoint) {
  ChiSquareResult r = chiSquareGoodnessOfFit(plainSampling(5), exactJoint());
  EXPECT_GT(r.p_value, kPassPValue);
  // The two models must differ enough for the broken variants to be visible at all.
  double overlap = 0;
  for (int32_t v = 0; v < kVocab; ++v)
    overlap += std::min(target().row(kStartToken)[v], draft().row(kStartToken)[v]);
  EXPECT_LT(overlap, 0.8);
}

TEST(SpeculativeSamplingDistributionTest, SampledDraftChainMatchesTarget) {
  expectMatchesTarget("sampled chain depth 3", [] {
    return sampledTreeStep({1, 1, 1}, DraftSampling::kSampledWithoutReplacement,
                           TreeOrder::kBreadthFirst);
  }, 11);
}

TEST(SpeculativeSamplingDistributionTest, OneHotPromptLookupChainMatchesTarget) {
  expectMatchesTarget("one-hot lookup chain depth 3", [] { return lookupChainStep(3); }, 12);
}

TEST(SpeculativeSamplingDistributionTest, MultiBranchTreeWithoutReplacementMatchesTarget) {
  expectMatchesTarget("tree 3x2 without replacement", [] {
    return sampledTreeStep({3, 2}, DraftSampling::kSampledWithoutReplacement,
                           TreeOrder::kBreadthFirst);
  }, 13);
}

TEST(SpeculativeSamplingDistributionTest, MultiBranchTreeWithReplacementMatchesTarget) {
  expectMatchesTarget("tree 3x2 with replacement (DFS)", [] {
    return sampledTreeStep({3, 2}, DraftSampling::kSampledWithReplacement, TreeOrder::kDepthFirst);
  }, 14);
}

TEST(SpeculativeSamplingDistributionTest, StaticAndDynamicTopKTreesMatchTarget) {
  expectMatchesTarget("static top-k tree {3,2}", [] {
    return deterministicTreeStep([](int32_t root) { return buildStaticTree(root, {3, 2}, draft()); });
  }, 15);
  expectMatchesTarget("dynamic (EAGLE-2) tree", [] {
    return deterministicTreeStep([](int32_t root) {
      return buildDynamicTree(root, DynamicTreeConfig{3, 2, 3, 6}, draft());
    });
  }, 16);
}

TEST(SpeculativeSamplingDistributionTest, MultiBranchPromptLookupTreeMatchesTarget) {
  // A fixed random "prompt"; each sample's proposer starts from it and sees its own output.
  static const NgramProposer prompt = [] {
    NgramProposer p({1, 2});
    std::mt19937_64 rng(99);
    for (int i = 0; i < 60; ++i) p.append(static_cast<int32_t>(rng() % kVocab));
    p.append(kStartToken);
    return p;
  }();
  expectMatchesTarget("prompt-lookup tree (3 branches)", [] {
    auto proposer = std::make_shared<NgramProposer>(prompt);
    return Step([proposer](int32_t root, SpecRng& rng) {
      EXPECT_EQ(proposer->history().back(), root);
      std::vector<int32_t> emitted =
          verifyWith({proposer->proposeTree(3, 3).flatten(0), {}}, DraftSampling::kDeterministic,
                     Flaw::kNone, rng);
      proposer->append(emitted);
      return emitted;
    });
  }, 17);
}

TEST(SpeculativeSamplingDistributionTest, AcceptingEveryDraftTokenIsDetected) {
  expectRejected("BROKEN accept-all, sampled chain", [] {
    return sampledTreeStep({1, 1, 1}, DraftSampling::kSampledWithoutReplacement,
                           TreeOrder::kBreadthFirst, Flaw::kAcceptEverything);
  }, 21);
  expectRejected("BROKEN accept-all, lookup chain", [] {
    return lookupChainStep(3, Flaw::kAcceptEverything);
  }, 22);
  expectRejected("BROKEN accept-all, tree 3x2", [] {
    return sampledTreeStep({3, 2}, DraftSampling::kSampledWithoutReplacement,
                           TreeOrder::kBreadthFirst, Flaw::kAcceptEverything);
  }, 23);
}

TEST(SpeculativeSamplingDistributionTest, SkippingTheResidualIsDetected) {
  expectRejected("BROKEN no-residual, sampled chain", [] {
    return sampledTreeStep({1, 1, 1}, DraftSampling::kSampledWithoutReplacement,
                           TreeOrder::kBreadthFirst, Flaw::kNoResidual);
  }, 31);
  expectRejected("BROKEN no-residual, lookup chain", [] {
    return lookupChainStep(3, Flaw::kNoResidual);
  }, 32);
  expectRejected("BROKEN no-residual, tree 3x2", [] {
    return sampledTreeStep({3, 2}, DraftSampling::kSampledWithoutReplacement,
                           TreeOrder::kBreadthFirst, Flaw::kNoResidual);
  }, 33);
}

}  // namespace
}  // namespace ingot
