// Offline benchmark of the engine: throughput and latency percentiles, closed or open loop.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/artifact/artifact_reader.h"
#include "core/base/status.h"
#include "runtime/bench/bench_result.h"
#include "runtime/bench/workload.h"
#include "runtime/engine/engine.h"
#include "runtime/sched/scheduler.h"

namespace ingot {

struct BenchOptions : WorkloadOptions {
  /// Requests kept in flight. Closed loop (request_rate 0): a finished request is replaced
  /// at once. Open loop: arrivals beyond the cap wait; 0 = no cap (needs a request rate).
  int32_t concurrency = 1;
  int num_threads = 0;
  int64_t num_kv_blocks = 0;
  /// KV pool element type; unset = the artifact's.
  std::optional<KvDtype> kv_dtype;
  /// The backend (--device); unset = the CPU backend.
  BackendFactory backend_factory;
  SpeculativeOptions speculative;
};

/// How much a long prompt arriving slows requests that are decoding (chunked prefill).
struct InterferenceOptions {
  int32_t decoders = 16;
  int32_t decoder_prompt = 32;
  int32_t long_prompt = 4096;
  /// Decode steps measured before the long prompt arrives.
  int32_t baseline_steps = 32;
  /// SchedulerOptions::max_prefill_while_decoding (0 = only the token budget limits it).
  int32_t max_prefill_while_decoding = SchedulerOptions().max_prefill_while_decoding;
  int32_t max_batched_tokens = 512;
  uint64_t seed = 0;
  int num_threads = 0;
};

struct InterferenceResult {
  LatencySummary baseline_itl_ms;     // decoders alone over the same steps
  LatencySummary during_itl_ms;       // while the long prompt is prefilled
  double long_prompt_ttft_ms = 0;
  int32_t steps = 0;                  // engine steps until the long prompt's first token
  double p99_ratio = 0;               // during.p99 / baseline.p99
};

/// Runs `decoders` requests until all decode and `baseline_steps` more, then adds one
/// `long_prompt`-token request and measures the decoders' inter-token latency until its
/// first token; then repeats the run without it for the same number of steps, so both
/// latencies cover the same decoder contexts.
StatusOr<InterferenceResult> runPrefillInterference(const Artifact& artifact,
                                                    const InterferenceOptions& options);

/// Runs one benchmark over a fresh engine on `artifact`. Latencies start when a request
/// arrives (or, when it waited for the concurrency cap, when a slot freed).
StatusOr<BenchResult> runOfflineBench(const Artifact& artifact, const BenchOptions& options);

}  // namespace ingot
