// `ingot bench`: throughput and latency of the engine in-process (offline) or of a server (online).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "runtime/bench/offline_bench.h"
#include "runtime/bench/online_bench.h"
#include "runtime/cli/device_flag.h"

namespace ingot {

struct BenchCommandOptions {
  /// Offline: the artifact to run in-process. Exactly one of `artifact` and `url`.
  std::string artifact;
  /// Online: the server's root URL, e.g. http://127.0.0.1:8000.
  std::string url;
  /// Online: the "model" of each request (empty = omitted).
  std::string model;
  /// Online: prompts are token ids below this.
  int64_t prompt_vocab = 256;
  /// One run per (rate, concurrency) pair.
  std::vector<int32_t> concurrency = {1, 8, 32};
  /// Requests/s of Poisson arrivals; empty = closed loop.
  std::vector<double> request_rates;
  /// True when --concurrency was given (with a rate and no -c, runs have no cap).
  bool concurrency_given = false;
  /// True when --requests was given (with --lengths and no --requests: one per line).
  bool requests_given = false;
  /// JSON-lines file of {"prompt_tokens": N, "output_tokens": M}, one request per line.
  std::string lengths_path;
  /// Offline: speculative decoding (speculativeOptions()).
  std::string speculative = "off";
  int spec_tokens = 8;
  int spec_branches = 1;
  /// --speculative draft-model: the draft artifact.
  std::string draft;
  /// --kv-dtype: f32 or fp8; empty = the artifact's KV dtype.
  std::string kv_dtype;
  /// --device, --gpu-memory-utilization (offline).
  DeviceFlags device;
  /// --tp N: the tensor-parallel world size the artifact must have been compiled for
  /// (`ingot compile --tp N`; offline only); 0 = whatever it has. The ranks run as threads on the CPU.
  int32_t tp = 0;
  /// Workload, seed, threads and KV blocks shared by all runs.
  BenchOptions bench;
  /// Also write the results as JSON here.
  std::string json_path;
  /// Instead of runs: measure how a long prompt slows running decoders (offline only).
  InterferenceOptions interference;
  bool run_interference = false;
};

/// Prints a table (and the throughput ratio to the first run); returns the exit code.
int runBench(const BenchCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace ingot
