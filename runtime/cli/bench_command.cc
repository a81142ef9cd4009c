// `ingot bench`: offline throughput and latency of the engine at several concurrencies.
#include "runtime/cli/bench_command.h"

#include <cstdio>
#include <fstream>

namespace ingot {

int runBench(const BenchCommandOptions& options, std::ostream& out, std::ostream& err) {
  StatusOr<Artifact> artifact = Artifact::open(options.artifact);
  if (!artifact.ok()) {
    err << "ingot bench: error: " << artifact.status().message() << "\n";
    return 1;
  }
  char line[256];
  if (options.run_interference) {
    StatusOr<InterferenceResult> r = runPrefillInterference(*artifact, options.interference);
    if (!r.ok()) {
      err << "ingot bench: error: " << r.status().message() << "\n";
      return 1;
    }
    std::snprintf(line, sizeof(line),
                  "%d decoders; a %d-token prompt arrives (prefill while decoding <= %d tokens "
                  "per step, budget %d)\n"
                  "  ITL alone:  p50 %.1f ms, p99 %.1f ms\n"
                  "  ITL during: p50 %.1f ms, p99 %.1f ms  (p99 ratio %.2fx)\n"
                  "  long prompt TTFT: %.0f ms\n",
                  options.interference.decoders, options.interference.long_prompt,
                  options.interference.max_prefill_while_decoding,
                  options.interference.max_batched_tokens, r->baseline_itl_ms.p50,
                  r->baseline_itl_ms.p99, r->during_itl_ms.p50, r->during_itl_ms.p99,
                  r->p99_ratio, r->long_prompt_ttft_ms);
    out << line;
    return 0;
  }
  std::vector<BenchResult> results;
  std::snprintf(line, sizeof(line), "%5s %5s %9s %9s %7s | %8s %8s | %7s %7s | %8s %6s\n",
                "conc", "reqs", "out tok/s", "tot tok/s", "ratio", "TTFT p50", "TTFT p99",
                "ITL p50", "ITL p99", "e2e p50", "batch");
  out << line << "  (latencies in ms; ratio = output tok/s over the first row)\n";
  for (int32_t concurrency : options.concurrency) {
    BenchOptions bench = options.bench;
    bench.concurrency = concurrency;
    StatusOr<BenchResult> result = runOfflineBench(*artifact, bench);
    if (!result.ok()) {
      err << "ingot bench: error: " << result.status().message() << "\n";
      return 1;
    }
    results.push_back(*result);
    const BenchResult& r = *result;
    std::snprintf(line, sizeof(line),
                  "%5d %5d %9.1f %9.1f %6.2fx | %8.1f %8.1f | %7.1f %7.1f | %8.1f %6.1f\n",
                  r.concurrency, r.requests, r.output_tokens_per_s, r.total_tokens_per_s,
                  r.output_tokens_per_s / results.front().output_tokens_per_s, r.ttft_ms.p50,
                  r.ttft_ms.p99, r.itl_ms.p50, r.itl_ms.p99, r.e2e_ms.p50, r.mean_batch);
    out << line << std::flush;
  }
  if (!options.json_path.empty()) {
    std::ofstream json(options.json_path);
    json << benchResultsJson(results) << "\n";
    if (!json) {
      err << "ingot bench: error: cannot write " << options.json_path << "\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace ingot
