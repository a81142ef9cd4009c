// Perplexity of a model over a token sequence: window planning, stable NLL, and the driver.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/base/status.h"
#include "runtime/generate/sequence_runner.h"

namespace ingot {

/// -log softmax(logits)[target]: log-sum-exp after subtracting the row maximum, in double.
/// +inf when the target is out of range or its logit is NaN or -inf.
double tokenNll(const float* logits, int64_t vocab, int32_t target);

/// A running sum of per-token negative log-likelihoods, in double.
struct NllSum {
  double sum = 0;
  int64_t count = 0;

  void add(double nll) {
    sum += nll;
    ++count;
  }
  /// Mean NLL in nats per token (0 when nothing was added).
  double mean() const { return count > 0 ? sum / static_cast<double>(count) : 0.0; }
  /// exp(mean NLL).
  double perplexity() const;
};

/// One slice of the text, run from an empty KV cache. Token i's logits predict token i+1,
/// so the window scores targets [first_target, end) from rows [first_target - 1, end - 1).
/// Invariant: begin < first_target < end.
struct PerplexityWindow {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t first_target = 0;

  int64_t numScored() const { return end - first_target; }
};

/// Windows of `context` tokens over `num_tokens`, each starting `stride` after the last
/// (Hugging Face's "perplexity of fixed-length models" recipe). stride == context: disjoint
/// windows, each scoring every token after its first. stride < context: each window scores
/// only the tokens the previous one did not reach, so every token after the text's first is
/// scored exactly once with at least context - stride tokens before it (the first window's
/// tokens aside). Windows that would score nothing are left out.
/// Requires num_tokens >= 2, context >= 2 and 1 <= stride <= context.
StatusOr<std::vector<PerplexityWindow>> planPerplexityWindows(int64_t num_tokens, int64_t context,
                                                              int64_t stride);

struct PerplexityOptions {
  /// Tokens per window; at most the runner's maxTokens().
  int64_t context = 1024;
  /// Tokens between window starts; 0 = context (disjoint windows).
  int64_t stride = 0;
  /// Fed first to every window that does not start with it, and never scored: the model's
  /// BOS where its tokenizer adds one (as llama.cpp's perplexity does), so that a later
  /// window also reads like the start of a text. -1: none. A window then holds at most
  /// context tokens with it.
  int32_t window_prefix = -1;
};

/// Where an evaluation stands after a window.
struct PerplexityProgress {
  int64_t windows_done = 0;
  int64_t num_windows = 0;
  /// Tokens scored so far and their NLL.
  NllSum nll;
  /// Tokens fed to the model so far (overlaps counted again).
  int64_t tokens_evaluated = 0;
  double seconds = 0;
};

struct PerplexityResult {
  int64_t num_windows = 0;
  /// Targets whose NLL was summed.
  int64_t tokens_scored = 0;
  /// Tokens fed to the model (overlaps counted again).
  int64_t tokens_evaluated = 0;
  double nll_sum = 0;
  double mean_nll = 0;
  /// exp(mean_nll).
  double perplexity = 0;
  /// Wall time of the forward passes and scoring.
  double seconds = 0;
};

/// Scores `tokens` window by window on `runner` (its sequence is reset for each window)
/// and returns the perplexity. `on_window`, if set, is called after every window.
/// Errors: fewer than 2 tokens, a token outside the vocabulary, context < 2 or above
/// runner.maxTokens(), stride outside [0, context].
StatusOr<PerplexityResult> evaluatePerplexity(
    SequenceRunner& runner, const std::vector<int32_t>& tokens, const PerplexityOptions& options,
    const std::function<void(const PerplexityProgress&)>& on_window = {});

}  // namespace ingot
