// Sampler: picks the next token from a row of logits (greedy, temperature, top-k, top-p).
#include "runtime/generate/sampler.h"

#include <algorithm>
#include <cmath>

namespace ingot {

int32_t argmax(const float* values, int64_t n) {
  int32_t best = 0;
  float bestValue = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    if (values[i] > bestValue) {  // false for NaN
      bestValue = values[i];
      best = static_cast<int32_t>(i);
    }
  }
  return best;
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

int32_t Sampler::sample(const float* logits, int64_t vocab) {
  if (params_.temperature <= 0.0f) return argmax(logits, vocab);

  candidates_.clear();
  candidates_.reserve(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i)
    if (!std::isnan(logits[i])) candidates_.emplace_back(logits[i], static_cast<int32_t>(i));
  if (candidates_.empty()) return 0;
  auto byLogit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t keep = candidates_.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep) {
    keep = static_cast<size_t>(params_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + keep, candidates_.end(), byLogit);
    candidates_.resize(keep);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), byLogit);
  }
  // Softmax over the kept candidates at the temperature, in double for stability.
  const double maxLogit = candidates_.front().first;
  std::vector<double> probs(candidates_.size());
  double total = 0;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    probs[i] = std::exp((candidates_[i].first - maxLogit) / params_.temperature);
    total += probs[i];
  }
  if (params_.top_p < 1.0f) {
    double cumulative = 0;
    size_t cut = probs.size();
    for (size_t i = 0; i < probs.size(); ++i) {
      cumulative += probs[i] / total;
      if (cumulative >= params_.top_p) {
        cut = i + 1;
        break;
      }
    }
    probs.resize(cut);
    total = 0;
    for (double p : probs) total += p;
  }
  // Inverse-CDF sampling with a 53-bit uniform draw (std distributions differ by platform).
  double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * total;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (u < probs[i]) return candidates_[i].second;
    u -= probs[i];
  }
  return candidates_[probs.size() - 1].second;
}

}  // namespace ingot
