// `ingot bench`: offline throughput and latency of the engine at several concurrencies.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "runtime/bench/offline_bench.h"

namespace ingot {

struct BenchCommandOptions {
  std::string artifact;
  std::vector<int32_t> concurrency = {1, 8, 32};
  BenchOptions bench;
  /// Also write the results as JSON here.
  std::string json_path;
  /// > 0: instead, measure how a prompt of this many tokens slows running decoders.
  InterferenceOptions interference;
  bool run_interference = false;
};

/// Prints a table (and the throughput ratio to the first concurrency); returns the exit code.
int runBench(const BenchCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace ingot
