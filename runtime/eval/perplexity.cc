// Perplexity of a model over a token sequence: window planning, stable NLL, and the driver.
#include "runtime/eval/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "runtime/generate/logprobs.h"

namespace ingot {
namespace {

/// Rows whose logits one append() returns at most: bounds the logits buffer to
/// 256 x vocab floats (48 MiB for SmolLM2's 49k vocabulary) and matches SequenceRunner's
/// default prefill chunk, so each append is one backend step.
constexpr int64_t kScoredRowsPerAppend = 256;

using Clock = std::chrono::steady_clock;

}  // namespace

double tokenNll(const float* logits, int64_t vocab, int32_t target) {
  if (target < 0 || target >= vocab || !(logits[target] > -INFINITY)) return INFINITY;
  return logSumExp(logits, vocab) - static_cast<double>(logits[target]);
}

double NllSum::perplexity() const { return std::exp(mean()); }

StatusOr<std::vector<PerplexityWindow>> planPerplexityWindows(int64_t num_tokens, int64_t context,
                                                              int64_t stride) {
  if (num_tokens < 2)
    return invalidArgument("the text has " + std::to_string(num_tokens) +
                           " token(s); perplexity needs at least 2");
  if (context < 2)
    return invalidArgument("the context must be at least 2 tokens, not " +
                           std::to_string(context));
  if (stride < 1 || stride > context)
    return invalidArgument("the stride must be between 1 and the context (" +
                           std::to_string(context) + "), not " + std::to_string(stride));
  std::vector<PerplexityWindow> windows;
  int64_t previous_end = 0;
  for (int64_t begin = 0;; begin += stride) {
    PerplexityWindow w;
    w.begin = begin;
    w.end = std::min(begin + context, num_tokens);
    w.first_target = std::max(begin + 1, previous_end);
    if (w.first_target < w.end) windows.push_back(w);
    previous_end = w.end;
    if (w.end == num_tokens) break;
  }
  return windows;
}

StatusOr<PerplexityResult> evaluatePerplexity(
    SequenceRunner& runner, const std::vector<int32_t>& tokens, const PerplexityOptions& options,
    const std::function<void(const PerplexityProgress&)>& on_window) {
  const int64_t stride = options.stride == 0 ? options.context : options.stride;
  if (options.context > runner.maxTokens())
    return invalidArgument("a context of " + std::to_string(options.context) +
                           " tokens exceeds the model's limit of " +
                           std::to_string(runner.maxTokens()));
  INGOT_ASSIGN_OR_RETURN(std::vector<PerplexityWindow> windows,
                         planPerplexityWindows(static_cast<int64_t>(tokens.size()),
                                               options.context, stride));
  const int64_t vocab = runner.vocabSize();
  if (options.window_prefix >= vocab)
    return invalidArgument("window prefix token " + std::to_string(options.window_prefix) +
                           " is outside the vocabulary of " + std::to_string(vocab));
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= vocab)
      return invalidArgument("token " + std::to_string(i) + " (id " + std::to_string(tokens[i]) +
                             ") is outside the vocabulary of " + std::to_string(vocab));

  PerplexityProgress progress;
  progress.num_windows = static_cast<int64_t>(windows.size());
  std::vector<float> logits;
  const Clock::time_point start = Clock::now();
  for (const PerplexityWindow& w : windows) {
    runner.reset();
    if (options.window_prefix >= 0 && tokens[w.begin] != options.window_prefix)
      INGOT_RETURN_IF_ERROR(runner.append({options.window_prefix}, /*all_rows=*/false, &logits));
    // The window's last token predicts nothing inside it, so it is never fed.
    const int64_t first_row = w.first_target - 1;
    if (first_row > w.begin) {
      // Context only (sliding windows): run it, read no logits.
      std::vector<int32_t> context(tokens.begin() + w.begin, tokens.begin() + first_row);
      INGOT_RETURN_IF_ERROR(runner.append(context, /*all_rows=*/false, &logits));
    }
    for (int64_t row = first_row; row < w.end - 1; row += kScoredRowsPerAppend) {
      const int64_t rows = std::min(kScoredRowsPerAppend, w.end - 1 - row);
      std::vector<int32_t> chunk(tokens.begin() + row, tokens.begin() + row + rows);
      INGOT_RETURN_IF_ERROR(runner.append(chunk, /*all_rows=*/true, &logits));
      for (int64_t r = 0; r < rows; ++r)
        progress.nll.add(tokenNll(logits.data() + r * vocab, vocab, tokens[row + r + 1]));
    }
    progress.tokens_evaluated += w.end - 1 - w.begin;
    ++progress.windows_done;
    progress.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (on_window) on_window(progress);
  }

  PerplexityResult result;
  result.num_windows = progress.num_windows;
  result.tokens_scored = progress.nll.count;
  result.tokens_evaluated = progress.tokens_evaluated;
  result.nll_sum = progress.nll.sum;
  result.mean_nll = progress.nll.mean();
  result.perplexity = progress.nll.perplexity();
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace ingot
