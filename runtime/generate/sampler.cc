// Sampler: picks a request's next token from a row of logits (penalties, temperature, top-k,
// top-p, min-p, seeded draw) and reports logprobs, with vLLM/OpenAI semantics.
#include "runtime/generate/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ingot {
namespace {

/// Candidates this many at a time are sorted when top-p needs a descending order; most
/// nucleus sets of real models are far smaller than the vocabulary.
constexpr size_t kTopPFirstChunk = 64;
/// Up to this top_k, the k best are kept in a heap while scanning (cheaper than copying and
/// partitioning the whole vocabulary); above it, nth_element over a copy.
constexpr int32_t kSmallTopK = 1024;

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

Status outOfRange(const char* field, const char* range, double got) {
  return invalidArgument(std::string(field) + " must be in " + range + ", got " + num(got));
}

/// Larger logit first; ties go to the lower id.
bool byLogit(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

}  // namespace

Status SamplingParams::validate() const {
  // Written as !(in range) so that NaN fails too.
  if (!(temperature >= 0.0f && temperature <= 2.0f))
    return outOfRange("temperature", "[0, 2]", temperature);
  if (top_k < -1) return invalidArgument("top_k must be -1, 0 (all) or positive, got " + num(top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f)) return outOfRange("top_p", "(0, 1]", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return outOfRange("min_p", "[0, 1]", min_p);
  if (!(repetition_penalty > 0.0f && std::isfinite(repetition_penalty)))
    return invalidArgument("repetition_penalty must be positive and finite, got " +
                           num(repetition_penalty));
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    return outOfRange("presence_penalty", "[-2, 2]", presence_penalty);
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    return outOfRange("frequency_penalty", "[-2, 2]", frequency_penalty);
  if (max_tokens && *max_tokens < 1)
    return invalidArgument("max_tokens must be at least 1, got " + num(*max_tokens));
  for (int32_t id : stop_token_ids)
    if (id < 0) return invalidArgument("stop_token_ids must not be negative, got " + num(id));
  for (const std::string& s : stop)
    if (s.empty()) return invalidArgument("stop must not contain an empty string");
  if (top_logprobs < 0 || top_logprobs > kMaxTopLogprobs)
    return outOfRange("top_logprobs", "[0, 20]", top_logprobs);
  if (top_logprobs > 0 && !logprobs)
    return invalidArgument("top_logprobs needs logprobs to be true");
  return okStatus();
}

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

void Sampler::setPrompt(const std::vector<int32_t>& prompt) {
  prompt_tokens_ = prompt;
  std::sort(prompt_tokens_.begin(), prompt_tokens_.end());
  prompt_tokens_.erase(std::unique(prompt_tokens_.begin(), prompt_tokens_.end()),
                       prompt_tokens_.end());
}

void Sampler::recordOutput(int32_t token) {
  ++output_counts_[token];
  ++num_generated_;
}

bool Sampler::samplesWithoutHistory() const {
  return params_.repetition_penalty == 1.0f && params_.presence_penalty == 0.0f &&
         params_.frequency_penalty == 0.0f && !params_.logprobs;
}

bool Sampler::hasPenalties() const {
  const bool repetition = params_.repetition_penalty != 1.0f &&
                          (!prompt_tokens_.empty() || !output_counts_.empty());
  const bool additive = (params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f) &&
                        !output_counts_.empty();
  return repetition || additive;
}

void Sampler::applyPenalties(float* x, int64_t vocab) const {
  // Repetition first (over prompt + output), then frequency and presence (output only),
  // as vLLM applies them.
  const float r = params_.repetition_penalty;
  auto repeat = [&](int32_t t) {
    if (t < 0 || t >= vocab) return;
    x[t] = x[t] > 0 ? x[t] / r : x[t] * r;
  };
  if (r != 1.0f) {
    for (int32_t t : prompt_tokens_) repeat(t);
    for (const auto& [t, count] : output_counts_)
      if (!std::binary_search(prompt_tokens_.begin(), prompt_tokens_.end(), t)) repeat(t);
  }
  for (const auto& [t, count] : output_counts_) {
    if (t < 0 || t >= vocab) continue;
    x[t] -= params_.frequency_penalty * static_cast<float>(count) + params_.presence_penalty;
  }
}

double Sampler::uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

bool Sampler::filter(const float* x, int64_t vocab) {
  candidates_.clear();
  weights_.clear();
  bool reordered = false;  // candidates_ no longer in id order
  const int32_t k = params_.top_k;
  if (k > 0 && k <= kSmallTopK && k < vocab) {
    // Small top-k: one pass keeping a heap of the k best (front = the worst of them), so the
    // rest of the vocabulary is only compared, never copied.
    reordered = true;
    for (int64_t i = 0; i < vocab; ++i) {
      if (!(x[i] > -INFINITY)) continue;  // NaN, -inf
      std::pair<float, int32_t> c(x[i], static_cast<int32_t>(i));
      if (candidates_.size() < static_cast<size_t>(k)) {
        candidates_.push_back(c);
        std::push_heap(candidates_.begin(), candidates_.end(), byLogit);
      } else if (byLogit(c, candidates_.front())) {
        std::pop_heap(candidates_.begin(), candidates_.end(), byLogit);
        candidates_.back() = c;
        std::push_heap(candidates_.begin(), candidates_.end(), byLogit);
      }
    }
  } else {
    candidates_.reserve(static_cast<size_t>(vocab));
    for (int64_t i = 0; i < vocab; ++i)
      if (x[i] > -INFINITY) candidates_.emplace_back(x[i], static_cast<int32_t>(i));  // no NaN
    // Top-k: the k largest (a set unique under byLogit), without sorting the rest.
    if (k > 0 && static_cast<size_t>(k) < candidates_.size()) {
      std::nth_element(candidates_.begin(), candidates_.begin() + k, candidates_.end(), byLogit);
      candidates_.resize(static_cast<size_t>(k));
      reordered = true;
    }
  }
  if (candidates_.empty()) return false;
  float maxLogit = -INFINITY;
  for (const auto& c : candidates_) maxLogit = std::max(maxLogit, c.first);
  if (maxLogit == INFINITY) return false;  // +inf dominates every finite weight
  const double invT = 1.0 / static_cast<double>(params_.temperature);
  auto weight = [&](float logit) {
    return std::exp((static_cast<double>(logit) - maxLogit) * invT);  // (0, 1], 1 at the max
  };

  // Top-p: the smallest likeliest-first prefix whose mass reaches top_p. Sort a growing
  // prefix only until it holds that mass.
  if (params_.top_p < 1.0f) {
    reordered = true;
    double total = 0;
    for (const auto& c : candidates_) total += weight(c.first);
    const double target = static_cast<double>(params_.top_p) * total;
    size_t sorted = std::min(kTopPFirstChunk, candidates_.size());
    size_t keep = candidates_.size();
    for (;;) {
      if (sorted < candidates_.size())
        std::nth_element(candidates_.begin(), candidates_.begin() + sorted, candidates_.end(),
                         byLogit);
      std::sort(candidates_.begin(), candidates_.begin() + sorted, byLogit);
      double cumulative = 0;
      size_t i = 0;
      for (; i < sorted; ++i) {
        cumulative += weight(candidates_[i].first);
        if (cumulative >= target) break;
      }
      if (i < sorted) {
        keep = i + 1;
        break;
      }
      if (sorted == candidates_.size()) break;  // rounding: keep everything
      sorted = std::min(candidates_.size(), sorted * 8);
    }
    candidates_.resize(keep);
  }

  // Min-p: drop tokens whose probability is below min_p times the likeliest one's.
  size_t kept = 0;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    const double w = weight(candidates_[i].first);
    if (params_.min_p > 0.0f && w < static_cast<double>(params_.min_p)) continue;
    candidates_[kept++] = candidates_[i];
    weights_.push_back(w);
  }
  candidates_.resize(kept);  // the max always survives: its weight is 1
  // The draw walks the kept tokens in id order, an order a GPU gets without sorting the
  // vocabulary (codegen/cuda/kernels/sampling.cuh): same uniform, same token.
  if (reordered) {
    by_id_.clear();
    for (size_t i = 0; i < kept; ++i) by_id_.emplace_back(candidates_[i].second, weights_[i]);
    std::sort(by_id_.begin(), by_id_.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < kept; ++i) {
      candidates_[i] = {x[by_id_[i].first], by_id_[i].first};
      weights_[i] = by_id_[i].second;
    }
  }
  return true;
}

int32_t Sampler::draw(const float* x, int64_t vocab) {
  // Inverse-CDF draw with 53 random bits (std distributions differ between platforms). The
  // uniform is consumed even when the row falls back to the argmax, so that every
  // non-greedy token costs exactly one draw (nextUniform()).
  const double u01 = uniform();
  if (!filter(x, vocab)) return argmax(x, vocab);
  double total = 0;
  for (double w : weights_) total += w;
  double u = u01 * total;
  for (size_t i = 0; i < weights_.size(); ++i) {
    if (u < weights_[i]) return candidates_[i].second;
    u -= weights_[i];
  }
  return candidates_.back().second;
}

int32_t Sampler::sample(const float* logits, int64_t vocab, SampleLogprobs* logprobs) {
  if (vocab <= 0) return 0;
  const float* x = logits;
  if (hasPenalties()) {
    penalized_.assign(logits, logits + vocab);
    applyPenalties(penalized_.data(), vocab);
    x = penalized_.data();
  }
  const int32_t token = params_.greedy() ? argmax(x, vocab) : draw(x, vocab);
  if (logprobs && params_.logprobs) {
    const float* source = params_.logprobs_source == LogprobsSource::kRaw ? logits : x;
    const double lse = logSumExp(source, vocab);
    logprobs->chosen = {token, logprobOf(source, vocab, token, lse)};
    topLogprobs(source, vocab, params_.top_logprobs, lse, &logprobs->top);
  }
  recordOutput(token);
  return token;
}

void Sampler::probabilities(const float* logits, int64_t vocab, std::vector<double>* probs) {
  probs->assign(static_cast<size_t>(std::max<int64_t>(vocab, 0)), 0.0);
  if (vocab <= 0) return;
  const float* x = logits;
  if (hasPenalties()) {
    penalized_.assign(logits, logits + vocab);
    applyPenalties(penalized_.data(), vocab);
    x = penalized_.data();
  }
  if (params_.greedy() || !filter(x, vocab)) {
    (*probs)[argmax(x, vocab)] = 1.0;
    return;
  }
  double total = 0;
  for (double w : weights_) total += w;
  for (size_t i = 0; i < candidates_.size(); ++i)
    (*probs)[candidates_[i].second] = weights_[i] / total;
}

}  // namespace ingot
