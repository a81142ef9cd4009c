// The requests of one `ingot bench` run: lengths (random or from a file), prompts, arrivals.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace ingot {

/// Prompt and output length of one request, in tokens.
struct RequestLengths {
  int32_t prompt_tokens = 0;
  int32_t output_tokens = 0;
};

struct WorkloadOptions {
  /// Requests in the run; 0 = one per entry of `lengths`.
  int32_t num_requests = 16;
  /// Prompt lengths drawn uniformly from [min, max] (random token ids, seeded).
  int32_t prompt_min = 16, prompt_max = 256;
  /// Generated tokens per request drawn uniformly from [min, max]; EOS is ignored.
  int32_t output_min = 32, output_max = 128;
  /// When not empty: request i has lengths[i % size] instead of random lengths.
  std::vector<RequestLengths> lengths;
  /// Requests per second arriving as a Poisson process (open loop); 0 = every request is
  /// ready at the start (closed loop: the concurrency cap alone paces the run).
  double request_rate = 0;
  uint64_t seed = 0;
};

/// One request as the run will send it.
struct PlannedRequest {
  /// Seconds after the run starts at which the request arrives.
  double arrival_s = 0;
  std::vector<int32_t> prompt;
  int32_t max_tokens = 0;
};

/// `n` arrival times (seconds, non-decreasing, the first after 0) of a Poisson process of
/// `rate` per second: exponential gaps -ln(1-u)/rate with u from a 64-bit generator seeded
/// by `seed`, so the same seed gives the same times on every platform.
std::vector<double> poissonArrivals(double rate, int32_t n, uint64_t seed);

/// Parses a lengths file: JSON lines, one request per line,
///   {"prompt_tokens": 128, "output_tokens": 64}
/// Blank lines and lines starting with '#' are skipped; other keys are ignored. Errors name
/// `source` and the line ("lengths.jsonl:3: ..."). An empty list is an error.
StatusOr<std::vector<RequestLengths>> parseLengths(const std::string& text,
                                                   const std::string& source);

/// Reads and parses the lengths file at `path`.
StatusOr<std::vector<RequestLengths>> loadLengthsFile(const std::string& path);

/// Checks `options` and draws every request: lengths, prompts of token ids in [0, vocab)
/// and arrival times, all from `options.seed`.
StatusOr<std::vector<PlannedRequest>> planWorkload(const WorkloadOptions& options, int64_t vocab);

}  // namespace ingot
