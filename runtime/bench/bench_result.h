// What one `ingot bench` run measured (offline or online), its percentiles and its JSON form.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ingot {

/// Percentiles of one latency, in milliseconds.
struct LatencySummary {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0;
};

struct BenchResult {
  /// "offline" (engine in-process) or "online" (HTTP server).
  std::string mode = "offline";
  /// Cap on requests in flight; 0 = no cap (open loop with --request-rate).
  int32_t concurrency = 0;
  /// Offered load in requests/s (Poisson arrivals); 0 = closed loop (all requests ready at once).
  double request_rate = 0;
  /// Requests that completed; `failed` ones count in no throughput or latency.
  int32_t requests = 0;
  int32_t failed = 0;
  /// The first failure's message (online: connection, HTTP or stream errors).
  std::string first_error;
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  /// Wall time from the first request's start to the last one's end.
  double seconds = 0;
  /// Completed requests per second.
  double requests_per_s = 0;
  /// Generated tokens per second over the whole run.
  double output_tokens_per_s = 0;
  /// Prompt + generated tokens per second.
  double total_tokens_per_s = 0;
  LatencySummary ttft_ms;  // time to first token
  LatencySummary tpot_ms;  // time per output token after the first, per request
  LatencySummary itl_ms;   // inter-token latency (online: between SSE chunks carrying tokens)
  LatencySummary e2e_ms;   // end-to-end latency
  int64_t preemptions = 0;  // offline only
  /// Sequences per engine step (online: from the server's ingot_running_batch_size
  /// histogram over the run; NaN when /metrics could not be read).
  double mean_batch = 0;
  /// Speculative decoding (offline; zeros without it): trees verified, their draft tokens,
  /// draft tokens on their longest paths, draft tokens accepted, engine steps.
  int64_t spec_trees = 0;
  int64_t spec_draft_tokens = 0;
  int64_t spec_path_tokens = 0;
  int64_t spec_accepted_tokens = 0;
  int64_t engine_steps = 0;
};

/// The percentiles of `values` (milliseconds); zeros when empty.
LatencySummary summarize(std::vector<double> values);

/// Samples of one run, request by request; fill() turns them into a BenchResult's numbers.
struct RunSamples {
  std::vector<double> ttft_ms, tpot_ms, itl_ms, e2e_ms;
  int32_t requests = 0;
  int64_t prompt_tokens = 0, generated_tokens = 0;

  /// One completed request. TPOT is (e2e - ttft) / (output_tokens - 1), so a request of one
  /// output token has none.
  void addRequest(double ttft, double e2e, int64_t prompt_tokens, int64_t output_tokens);
  /// Sets counts, throughputs over `seconds` and percentiles in `result`.
  void fill(double seconds, BenchResult* result) const;
};

/// One JSON object per result, in a JSON array.
std::string benchResultsJson(const std::vector<BenchResult>& results);

}  // namespace ingot
