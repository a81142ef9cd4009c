// Online benchmark: streaming /v1/completions requests against a running `ingot serve`.
#pragma once

#include <cstdint>
#include <string>

#include "core/base/status.h"
#include "runtime/bench/bench_result.h"
#include "runtime/bench/workload.h"

namespace ingot {

struct OnlineBenchOptions : WorkloadOptions {
  /// The server, "http://HOST[:PORT]" (plain HTTP; port 80 when omitted).
  std::string url;
  /// The "model" field of each request; empty = omitted (the server's only model).
  std::string model;
  /// Requests in flight at most; 0 = no cap (needs a request rate).
  int32_t concurrency = 1;
  /// Prompts are token ids drawn from [0, prompt_vocab); keep it within the model's vocabulary.
  int64_t prompt_vocab = 256;
  /// Deadline of one request, connect to [DONE].
  double timeout_s = 600;
};

/// Sends every planned request as POST /v1/completions with `stream`, `ignore_eos`,
/// `max_tokens`, greedy sampling and usage in the stream, all from one I/O thread. TTFT is
/// the first SSE chunk with a choice, ITL the gaps between such chunks, output tokens come
/// from the stream's usage. Failed requests (connection, HTTP status, error events, a stream
/// cut before [DONE], timeout) are counted in `failed`, never fatal; an unresolvable host
/// is an error. `mean_batch` is the change of the server's ingot_running_batch_size
/// histogram (sum / count) over the run, NaN when /metrics is unavailable.
StatusOr<BenchResult> runOnlineBench(const OnlineBenchOptions& options);

/// Host and port of a plain-HTTP URL.
struct HttpEndpoint {
  std::string host;
  uint16_t port = 80;
};

/// Parses "http://HOST[:PORT][/]" (an IPv6 host in brackets); other schemes and paths are
/// errors.
StatusOr<HttpEndpoint> parseHttpUrl(const std::string& url);

/// Reads `NAME_sum` and `NAME_count` of a Prometheus histogram from exposition text; false
/// when either line is missing.
bool readHistogramTotals(const std::string& text, const std::string& name, double* sum,
                         double* count);

}  // namespace ingot
