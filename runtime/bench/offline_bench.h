// Offline benchmark of the engine: throughput and latency percentiles at fixed concurrency.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/artifact/artifact_reader.h"
#include "runtime/base/status.h"

namespace ingot {

struct BenchOptions {
  /// Requests kept in flight (closed loop: a finished request is replaced at once).
  int32_t concurrency = 1;
  /// Requests in the run.
  int32_t num_requests = 16;
  /// Prompt lengths drawn uniformly from [min, max] (random token ids, seeded).
  int32_t prompt_min = 16, prompt_max = 256;
  /// Generated tokens per request drawn uniformly from [min, max]; EOS is ignored.
  int32_t output_min = 32, output_max = 128;
  uint64_t seed = 0;
  int num_threads = 0;
  int64_t num_kv_blocks = 0;
};

/// Percentiles of one latency, in milliseconds.
struct LatencySummary {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0;
};

struct BenchResult {
  int32_t concurrency = 0;
  int32_t requests = 0;
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double seconds = 0;
  /// Generated tokens per second over the whole run.
  double output_tokens_per_s = 0;
  /// Prompt + generated tokens per second.
  double total_tokens_per_s = 0;
  LatencySummary ttft_ms;  // time to first token
  LatencySummary itl_ms;   // inter-token latency
  LatencySummary e2e_ms;   // end-to-end latency
  int64_t preemptions = 0;
  double mean_batch = 0;   // sequences per engine step
};

/// How much a long prompt arriving slows requests that are decoding (chunked prefill).
struct InterferenceOptions {
  int32_t decoders = 16;
  int32_t decoder_prompt = 32;
  int32_t long_prompt = 4096;
  /// Decode steps measured before the long prompt arrives.
  int32_t baseline_steps = 32;
  /// SchedulerOptions::max_prefill_while_decoding (0 = only the token budget limits it).
  int32_t max_prefill_while_decoding = 0;
  int32_t max_batched_tokens = 512;
  uint64_t seed = 0;
  int num_threads = 0;
};

struct InterferenceResult {
  LatencySummary baseline_itl_ms;     // decoders alone
  LatencySummary during_itl_ms;       // while the long prompt is prefilled
  double long_prompt_ttft_ms = 0;
  double p99_ratio = 0;               // during.p99 / baseline.p99
};

/// Runs `decoders` requests until all decode, measures their inter-token latency, then adds
/// one `long_prompt`-token request and measures it again until that request's first token.
StatusOr<InterferenceResult> runPrefillInterference(const Artifact& artifact,
                                                    const InterferenceOptions& options);

/// Runs one benchmark over a fresh engine on `artifact`.
StatusOr<BenchResult> runOfflineBench(const Artifact& artifact, const BenchOptions& options);

/// The percentiles of `values` (milliseconds); zeros when empty.
LatencySummary summarize(std::vector<double> values);

/// One JSON object per result, in a JSON array.
std::string benchResultsJson(const std::vector<BenchResult>& results);

}  // namespace ingot
