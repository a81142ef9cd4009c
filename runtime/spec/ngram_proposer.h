// NgramProposer: prompt-lookup drafting — continues the text with what followed the most
// recent earlier occurrence of its last few tokens, from an index updated per token.
#pragma once

#include <array>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "runtime/spec/token_tree.h"

namespace ingot {

/// Distinct continuations remembered per n-gram (most recent first); bounds the branches of
/// proposeTree() and keeps an index entry a fixed size.
constexpr int32_t kMaxNgramContinuations = 8;

/// Which suffix lengths prompt lookup tries, longest first.
struct NgramConfig {
  int32_t min_ngram = 1;
  int32_t max_ngram = 3;
};

/// Per request: holds the token history (prompt, then each accepted token) and, for every
/// n in [min_ngram, max_ngram], an index n-gram -> the starts of the continuations that
/// followed its most recent occurrences (one per distinct next token, newest first).
///
/// An n-gram is indexed once the token after it arrives, so the suffix being looked up is
/// never its own match and every indexed occurrence has at least one continuation token.
/// append() costs O(max_ngram^2) — constant for a fixed config — and never rescans history.
/// Keys are 64-bit hashes of the n tokens; lookups compare the tokens, so a hash collision
/// can only hide a match (odds ~2^-64 per pair), never propose a wrong one.
class NgramProposer {
 public:
  explicit NgramProposer(NgramConfig config = {});

  void append(int32_t token);
  void append(const std::vector<int32_t>& tokens);
  const std::vector<int32_t>& history() const { return history_; }

  /// Starts (history indices) of up to `max` continuations of the last n tokens, newest
  /// occurrence first and with distinct first tokens; empty when the suffix never occurred
  /// earlier. Requires min_ngram <= n <= max_ngram.
  std::vector<int64_t> continuations(int32_t n, int32_t max) const;

  /// Up to k tokens following the most recent earlier occurrence of the longest suffix
  /// (n = max_ngram down to min_ngram) that has one; empty when none does. Shorter than k
  /// when that occurrence is within k tokens of the end of the history.
  std::vector<int32_t> proposeChain(int32_t k) const;

  /// A tree rooted at the last history token with up to `max_branches` chains of up to k
  /// tokens: distinct next tokens, taken from the longest matching suffix first, then the
  /// most recent occurrence first. The proposals are deterministic (verify with
  /// DraftSampling::kDeterministic). Just the root when nothing matches.
  TokenTree proposeTree(int32_t k, int32_t max_branches) const;

 private:
  /// Continuation starts, newest first; count used.
  struct Entry {
    std::array<int64_t, kMaxNgramContinuations> starts;
    int32_t count = 0;
  };
  uint64_t hashNgram(int64_t end, int32_t n) const;  // tokens [end - n, end)
  bool sameNgram(int64_t end_a, int64_t end_b, int32_t n) const;
  void index(int64_t end, int32_t n);

  NgramConfig config_;
  std::vector<int32_t> history_;
  /// tables_[n - min_ngram]: hash of an n-gram -> its continuations.
  std::vector<std::unordered_map<uint64_t, Entry>> tables_;
};

}  // namespace ingot
