// Log-probabilities of a logits row: a numerically safe log-sum-exp and the top-N alternatives.
#include "runtime/generate/logprobs.h"

#include <algorithm>
#include <cmath>

namespace ingot {

double logSumExp(const float* x, int64_t n) {
  float maxValue = -INFINITY;
  for (int64_t i = 0; i < n; ++i)
    if (x[i] > maxValue) maxValue = x[i];  // false for NaN
  if (!std::isfinite(maxValue)) return maxValue == INFINITY ? INFINITY : -INFINITY;
  double sum = 0;
  const double m = maxValue;
  for (int64_t i = 0; i < n; ++i)
    if (x[i] > -INFINITY) sum += std::exp(static_cast<double>(x[i]) - m);  // skips NaN, -inf
  return m + std::log(sum);
}

float logprobOf(const float* x, int64_t n, int32_t token, double lse) {
  if (token < 0 || token >= n || std::isnan(x[token])) return -INFINITY;
  return static_cast<float>(static_cast<double>(x[token]) - lse);
}

void topLogprobs(const float* x, int64_t n, int32_t k, double lse, std::vector<TokenLogprob>* out) {
  out->clear();
  if (k <= 0) return;
  // `out` stays sorted: larger value first, lower id first among equals. Scanning ids upward,
  // an equal value never displaces an earlier (lower) id.
  auto before = [](const TokenLogprob& a, const TokenLogprob& b) {
    return a.logprob > b.logprob || (a.logprob == b.logprob && a.token < b.token);
  };
  const size_t cap = static_cast<size_t>(k);
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (std::isnan(v)) continue;
    if (out->size() == cap && !(v > out->back().logprob)) continue;
    TokenLogprob entry{static_cast<int32_t>(i), v};
    out->insert(std::upper_bound(out->begin(), out->end(), entry, before), entry);
    if (out->size() > cap) out->pop_back();
  }
  for (TokenLogprob& e : *out) e.logprob = static_cast<float>(static_cast<double>(e.logprob) - lse);
}

}  // namespace ingot
