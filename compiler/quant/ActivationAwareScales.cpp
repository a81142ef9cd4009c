//===- ActivationAwareScales.cpp - AWQ-style input-channel scales for 4-bit weights -===//
#include "compiler/quant/ActivationAwareScales.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace ingot::quant {
namespace {

/// splitmix64: a small, well-mixed generator for the reservoir (seeded, reproducible).
uint64_t nextRandom(uint64_t &state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Sixteen independent partial sums, so the compiler can vectorise the reduction without
/// reassociating floats; the clones pick AVX-512 or AVX2 at run time where the CPU has them.
__attribute__((target_clones("avx512f", "avx2", "default"))) float dot(const float *a,
                                                                       const float *b, int64_t k) {
  float partial[16] = {};
  int64_t i = 0;
  for (; i + 16 <= k; i += 16)
    for (int j = 0; j < 16; ++j)
      partial[j] += a[i + j] * b[i + j];
  float sum = 0.0f;
  for (; i < k; ++i)
    sum += a[i] * b[i];
  for (float p : partial)
    sum += p;
  return sum;
}

} // namespace

ChannelStats::ChannelStats(int64_t channels, int64_t sampleRows, uint64_t seed)
    : channels_(channels), maxRows_(sampleRows), rng_(seed),
      sumAbs_(static_cast<size_t>(channels), 0.0), sumSquare_(static_cast<size_t>(channels), 0.0) {}

Status ChannelStats::add(const float *x, int64_t rows, int64_t cols) {
  if (cols != channels_)
    return invalidArgument("activation rows of " + std::to_string(cols) + " channels, expected " +
                           std::to_string(channels_));
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = x + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      sumAbs_[c] += std::fabs(row[c]);
      sumSquare_[c] += static_cast<double>(row[c]) * row[c];
    }
    // Reservoir sampling: row number t (0-based) replaces a kept row with probability
    // maxRows / (t + 1), so every row seen is kept with the same probability.
    const int64_t t = tokens_++;
    if (t < maxRows_) {
      sample_.insert(sample_.end(), row, row + cols);
    } else if (maxRows_ > 0) {
      const uint64_t slot = nextRandom(rng_) % static_cast<uint64_t>(t + 1);
      if (slot < static_cast<uint64_t>(maxRows_))
        std::copy(row, row + cols, sample_.begin() + static_cast<int64_t>(slot) * cols);
    }
  }
  return okStatus();
}

std::vector<float> ChannelStats::meanAbs() const {
  std::vector<float> mean(static_cast<size_t>(channels_), 0.0f);
  if (tokens_ > 0)
    for (int64_t c = 0; c < channels_; ++c)
      mean[c] = static_cast<float>(sumAbs_[c] / static_cast<double>(tokens_));
  return mean;
}

std::vector<float> ChannelStats::meanSquare() const {
  std::vector<float> mean(static_cast<size_t>(channels_), 0.0f);
  if (tokens_ > 0)
    for (int64_t c = 0; c < channels_; ++c)
      mean[c] = static_cast<float>(sumSquare_[c] / static_cast<double>(tokens_));
  return mean;
}

std::vector<float> defaultAlphaGrid() {
  std::vector<float> alphas;
  for (int i = 0; i < 10; ++i)
    alphas.push_back(0.1f * static_cast<float>(i));
  return alphas;
}

std::vector<float> scalesForAlpha(const float *magnitude, int64_t k, float alpha) {
  std::vector<float> s(static_cast<size_t>(k), 1.0f);
  if (alpha == 0.0f)
    return s;
  float lo = std::numeric_limits<float>::infinity(), hi = 0.0f;
  for (int64_t c = 0; c < k; ++c) {
    if (!(magnitude[c] > 0.0f))
      continue;
    s[c] = std::pow(magnitude[c], alpha);
    lo = std::min(lo, s[c]);
    hi = std::max(hi, s[c]);
  }
  if (hi == 0.0f)
    return std::vector<float>(static_cast<size_t>(k), 1.0f);
  const float norm = std::sqrt(lo * hi);
  for (int64_t c = 0; c < k; ++c)
    s[c] = magnitude[c] > 0.0f ? s[c] / norm : 1.0f;
  return s;
}

StatusOr<std::vector<float>> fakeQuantize(const float *values, int64_t n, int64_t k,
                                          WeightEncoding encoding, int64_t group,
                                          ScaleChoice choice, const float *columnWeights) {
  INGOT_ASSIGN_OR_RETURN(EncodedWeight encoded,
                         encodeWeight(values, n, k, encoding, group, choice, columnWeights));
  std::vector<float> out(static_cast<size_t>(n * k));
  INGOT_RETURN_IF_ERROR(decodeWeight(encoded, n, k, encoding, group, out.data()));
  return out;
}

double outputError(const float *a, const float *b, int64_t n, int64_t k, const float *x,
                   int64_t rows) {
  std::vector<float> diff(static_cast<size_t>(k));
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < k; ++c)
      diff[c] = a[i * k + c] - b[i * k + c];
    for (int64_t r = 0; r < rows; ++r) {
      const double y = dot(x + r * k, diff.data(), k);
      total += y * y;
    }
  }
  return total;
}

StatusOr<ScaleSearchResult> searchChannelScales(const ScaleSearchProblem &problem,
                                                const std::vector<float> &alphas) {
  const int64_t k = problem.k;
  if (problem.weights.empty() || problem.weights.size() != problem.rows.size())
    return invalidArgument("scale search needs one row count per weight, and a weight");
  if (k <= 0 || !problem.magnitude || !problem.sample || problem.sampleRows <= 0)
    return invalidArgument("scale search needs channel magnitudes and sampled activations");
  if (alphas.empty())
    return invalidArgument("scale search needs at least one alpha");
  for (float alpha : alphas)
    if (!(alpha >= 0.0f && alpha <= 1.0f))
      return invalidArgument("alpha " + std::to_string(alpha) + " is outside [0, 1]");

  ScaleSearchResult best;
  best.error = std::numeric_limits<double>::infinity();
  std::vector<float> scaled, unscaled;
  for (float alpha : alphas) {
    std::vector<float> s = scalesForAlpha(problem.magnitude, k, alpha);
    double error = 0.0;
    for (size_t w = 0; w < problem.weights.size(); ++w) {
      const int64_t n = problem.rows[w];
      const float *weight = problem.weights[w];
      scaled.resize(static_cast<size_t>(n * k));
      for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < k; ++c)
          scaled[i * k + c] = weight[i * k + c] * s[c];
      INGOT_ASSIGN_OR_RETURN(std::vector<float> q,
                             fakeQuantize(scaled.data(), n, k, problem.encoding, problem.group));
      // Back to the original basis: the activations the layer sees are x / s.
      for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < k; ++c)
          q[i * k + c] /= s[c];
      error += outputError(weight, q.data(), n, k, problem.sample, problem.sampleRows);
    }
    if (alpha == 0.0f)
      best.unscaledError = error;
    if (error < best.error) {
      best.error = error;
      best.alpha = alpha;
      best.scales = std::move(s);
    }
  }
  if (std::find(alphas.begin(), alphas.end(), 0.0f) == alphas.end())
    best.unscaledError = std::numeric_limits<double>::quiet_NaN();
  return best;
}

} // namespace ingot::quant
