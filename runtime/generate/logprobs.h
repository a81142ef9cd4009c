// Log-probabilities of a logits row: a numerically safe log-sum-exp and the top-N alternatives.
#pragma once

#include <cstdint>
#include <vector>

namespace ingot {

/// One token and its log-probability.
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

/// What a request with `logprobs` gets back for one sampled token.
struct SampleLogprobs {
  /// The chosen token and its log-probability.
  TokenLogprob chosen;
  /// The `top_logprobs` likeliest tokens, most likely first (ties: lower id first).
  std::vector<TokenLogprob> top;
};

/// log(sum(exp(x))) over the row, accumulated in double after subtracting the maximum.
/// NaNs count as -inf; a row with no finite value (or n <= 0) gives -inf.
double logSumExp(const float* x, int64_t n);

/// x[token] - lse, the log-softmax value of one entry (-inf for NaN, -inf entries, or an
/// out-of-range token).
float logprobOf(const float* x, int64_t n, int32_t token, double lse);

/// Fills `out` with the min(k, #non-NaN) largest entries of x, most likely first (ties to the
/// lower id), each with its log-softmax value given the row's `lse`. One pass, O(n log k).
void topLogprobs(const float* x, int64_t n, int32_t k, double lse, std::vector<TokenLogprob>* out);

}  // namespace ingot
