// Sampler: picks a request's next token from a row of logits (penalties, temperature, top-k,
// top-p, min-p, seeded draw) and reports logprobs, with vLLM/OpenAI semantics.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/base/status.h"
#include "runtime/generate/logprobs.h"

namespace ingot {

/// Largest `top_logprobs` a request may ask for (OpenAI's limit).
constexpr int32_t kMaxTopLogprobs = 20;

/// Which logits the reported logprobs come from.
enum class LogprobsSource {
  /// The model's raw logits, before penalties and temperature (vLLM's default "raw_logprobs").
  kRaw,
  /// The logits after repetition/presence/frequency penalties (still before temperature).
  kPenalized,
};

/// Per-request sampling and stopping options, as an OpenAI/vLLM request carries them.
struct SamplingParams {
  /// 0 = greedy (argmax; ties go to the lowest id). OpenAI range [0, 2].
  float temperature = 0.0f;
  /// Keep the k most likely tokens; 0 or -1 = all.
  int32_t top_k = 0;
  /// Keep the smallest set whose probability reaches top_p; 1 = all. Range (0, 1].
  float top_p = 1.0f;
  /// Drop tokens less likely than min_p times the likeliest one; 0 = off. Range [0, 1].
  float min_p = 0.0f;
  /// HF/vLLM: for tokens in prompt or output, positive logits are divided by it, negative
  /// ones multiplied. 1 = off; must be > 0.
  float repetition_penalty = 1.0f;
  /// OpenAI: subtracted once from the logit of every token already generated. Range [-2, 2].
  float presence_penalty = 0.0f;
  /// OpenAI: subtracted per occurrence of a token in the generated text. Range [-2, 2].
  float frequency_penalty = 0.0f;
  /// Seeds this request's own random stream: same seed, same logits -> same tokens, alone
  /// or batched. Callers give each unseeded request a fresh seed.
  uint64_t seed = 0;
  /// Most tokens to generate (finish reason "length"); unset = up to the context limit.
  std::optional<int32_t> max_tokens;
  /// Keep generating past the model's EOS token.
  bool ignore_eos = false;
  /// Generation stops (finish reason "stop") after any of these; the token's text is not output.
  std::vector<int32_t> stop_token_ids;
  /// Generation stops before any of these strings; the string itself is not output.
  std::vector<std::string> stop;
  /// Report the chosen token's logprob.
  bool logprobs = false;
  /// Also report this many likeliest alternatives, [0, 20]; needs `logprobs`.
  int32_t top_logprobs = 0;
  /// Which distribution logprobs describe.
  LogprobsSource logprobs_source = LogprobsSource::kRaw;

  /// Ok, or invalidArgument with a one-line message naming the offending field.
  Status validate() const;
  bool greedy() const { return temperature <= 0.0f; }
};

/// Stateful per request: owns its random stream and the token history the penalties use.
/// Transforms apply in vLLM's order: penalties -> temperature -> top-k -> top-p -> min-p ->
/// draw (greedy skips the last four). Buffers are reused across calls.
class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  /// Tokens of the prompt, seen by the repetition penalty (not by presence/frequency).
  void setPrompt(const std::vector<int32_t>& prompt);
  /// The next token id for `logits` (one row of `vocab` values); it is recorded as generated
  /// output for the penalties. When params.logprobs is set and `logprobs` is non-null, fills it.
  int32_t sample(const float* logits, int64_t vocab, SampleLogprobs* logprobs = nullptr);
  /// The distribution the next sample() would draw from (one-hot at the argmax when greedy),
  /// penalties and filters applied; consumes no randomness and records nothing.
  void probabilities(const float* logits, int64_t vocab, std::vector<double>* probs);
  /// Records a generated token without sampling it (e.g. when replaying after preemption).
  void recordOutput(int32_t token);
  /// Consumes and returns exactly the uniform in [0, 1) that a non-greedy sample() would
  /// draw, so a caller that picks the token elsewhere (the CUDA sampling kernel, given this
  /// uniform) keeps the request's random stream in step with sampling here.
  double nextUniform() { return uniform(); }
  /// True when the next token depends on the logits and one uniform only: no penalty is in
  /// effect and logprobs are off, so it may be picked where the logits are (on a GPU).
  bool samplesWithoutHistory() const;

  const SamplingParams& params() const { return params_; }
  /// The request's random engine: speculative verification draws from it too, so one seed
  /// drives a request with or without speculation.
  std::mt19937_64& rng() { return rng_; }
  /// Number of tokens recorded as generated output.
  int64_t numGenerated() const { return num_generated_; }

 private:
  bool hasPenalties() const;
  void applyPenalties(float* x, int64_t vocab) const;
  /// Fills candidates_/weights_ with the tokens that survive top-k/top-p/min-p and their
  /// unnormalized probabilities, in token-id order; false when the row has no usable value
  /// (take the argmax).
  bool filter(const float* x, int64_t vocab);
  /// Consumes one uniform u, then (unless the row has no usable value: argmax) returns the
  /// first kept token in id order whose running weight sum exceeds u * (sum of weights).
  int32_t draw(const float* x, int64_t vocab);
  double uniform();  // in [0, 1), 53 random bits

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<int32_t> prompt_tokens_;                 // sorted, unique
  std::unordered_map<int32_t, int32_t> output_counts_;  // token -> occurrences in output
  int64_t num_generated_ = 0;
  std::vector<float> penalized_;
  std::vector<std::pair<float, int32_t>> candidates_;
  std::vector<double> weights_;
  std::vector<std::pair<int32_t, double>> by_id_;  // scratch: kept (id, weight) to sort
};

/// Index of the largest value; ties go to the lowest index. NaNs are never chosen.
int32_t argmax(const float* values, int64_t n);

}  // namespace ingot
