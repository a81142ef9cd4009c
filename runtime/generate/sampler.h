// Sampler: picks the next token from a row of logits (greedy, temperature, top-k, top-p).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace ingot {

struct SamplingParams {
  /// 0 = greedy (argmax; ties go to the lowest id).
  float temperature = 0.0f;
  /// Keep the k most likely tokens; 0 = all.
  int32_t top_k = 0;
  /// Keep the smallest set whose probability reaches top_p; 1 = all.
  float top_p = 1.0f;
  /// Same seed, same logits -> same token, on every machine.
  uint64_t seed = 0;
};

/// Stateful per request (its random stream advances with each sample).
class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  /// The next token id for `logits` (one row of `vocab` values).
  int32_t sample(const float* logits, int64_t vocab);

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;
};

/// Index of the largest value; ties go to the lowest index. NaNs are never chosen.
int32_t argmax(const float* values, int64_t n);

}  // namespace ingot
