// `ingot bench`: throughput and latency of the engine in-process (offline) or of a server (online).
#include "runtime/cli/bench_command.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>

#include "runtime/cli/tensor_parallel_flag.h"

namespace ingot {
namespace {

int fail(std::ostream& err, const std::string& message) {
  err << "ingot bench: error: " << message << "\n";
  return 1;
}

int runInterference(const BenchCommandOptions& options, std::ostream& out, std::ostream& err) {
  if (!options.url.empty()) return fail(err, "--interference runs offline: give an artifact");
  StatusOr<Artifact> artifact = Artifact::open(options.artifact);
  if (!artifact.ok()) return fail(err, artifact.status().message());
  if (Status tp = checkTensorParallelFlag(options.tp, *artifact, options.artifact); !tp.ok())
    return fail(err, tp.message());
  StatusOr<InterferenceResult> r = runPrefillInterference(*artifact, options.interference);
  if (!r.ok()) return fail(err, r.status().message());
  char line[512];
  std::snprintf(line, sizeof(line),
                "%d decoders; a %d-token prompt arrives (prefill while decoding costs <= %d "
                "tokens per step, budget %d)\n"
                "  ITL during the prefill (%d steps): p50 %.1f ms, p99 %.1f ms\n"
                "  ITL alone over the same steps:    p50 %.1f ms, p99 %.1f ms\n"
                "  p99 ratio %.2fx; long prompt TTFT %.0f ms\n",
                options.interference.decoders, options.interference.long_prompt,
                options.interference.max_prefill_while_decoding,
                options.interference.max_batched_tokens, r->steps, r->during_itl_ms.p50,
                r->during_itl_ms.p99, r->baseline_itl_ms.p50, r->baseline_itl_ms.p99,
                r->p99_ratio, r->long_prompt_ttft_ms);
  out << line;
  return 0;
}

constexpr const char* kRowFormat =
    "%4s %6s %5s %4s %7s %9s %9s %6s | %8s %7s %7s | %8s %7s %7s | %7s %7s %7s | %8s %6s\n";

void printHeader(std::ostream& out) {
  char line[256];
  std::snprintf(line, sizeof(line), kRowFormat, "conc", "rate", "reqs", "fail", "req/s",
                "out tok/s", "tot tok/s", "ratio", "TTFT p50", "p90", "p99", "TPOT p50", "p90",
                "p99", "ITL p50", "p90", "p99", "e2e p50", "batch");
  out << line
      << "  (latencies in ms; rate = Poisson requests/s, '-' = closed loop; conc '-' = no cap;\n"
         "   ratio = output tok/s over the first row; batch = mean sequences per engine step)\n";
}

void printRow(const BenchResult& r, double first_output_tokens_per_s, std::ostream& out) {
  auto num = [](double v, const char* format) {
    char s[32];
    std::snprintf(s, sizeof(s), format, v);
    return std::string(s);
  };
  auto ms = [&](double v) { return num(v, "%.1f"); };
  std::string ratio = first_output_tokens_per_s > 0
                          ? num(r.output_tokens_per_s / first_output_tokens_per_s, "%.2fx")
                          : "-";
  char line[256];
  std::snprintf(
      line, sizeof(line), kRowFormat,
      r.concurrency > 0 ? std::to_string(r.concurrency).c_str() : "-",
      r.request_rate > 0 ? num(r.request_rate, "%.4g").c_str() : "-",
      std::to_string(r.requests).c_str(), std::to_string(r.failed).c_str(),
      num(r.requests_per_s, "%.2f").c_str(), num(r.output_tokens_per_s, "%.1f").c_str(),
      num(r.total_tokens_per_s, "%.1f").c_str(), ratio.c_str(), ms(r.ttft_ms.p50).c_str(),
      ms(r.ttft_ms.p90).c_str(), ms(r.ttft_ms.p99).c_str(), ms(r.tpot_ms.p50).c_str(),
      ms(r.tpot_ms.p90).c_str(), ms(r.tpot_ms.p99).c_str(), ms(r.itl_ms.p50).c_str(),
      ms(r.itl_ms.p90).c_str(), ms(r.itl_ms.p99).c_str(), ms(r.e2e_ms.p50).c_str(),
      std::isfinite(r.mean_batch) ? num(r.mean_batch, "%.1f").c_str() : "-");
  out << line;
  if (r.failed > 0) out << "  " << r.failed << " request(s) failed; first: " << r.first_error << "\n";
  if (r.spec_trees > 0) {
    char spec[256];
    std::snprintf(spec, sizeof(spec),
                  "  speculative: %lld trees, %.2f draft tokens accepted per tree (%.0f%% of "
                  "their longest paths), %.2f tokens per sequence-step\n",
                  static_cast<long long>(r.spec_trees),
                  static_cast<double>(r.spec_accepted_tokens) / r.spec_trees,
                  r.spec_path_tokens ? 100.0 * r.spec_accepted_tokens / r.spec_path_tokens : 0.0,
                  r.engine_steps && r.mean_batch > 0
                      ? static_cast<double>(r.generated_tokens) / (r.engine_steps * r.mean_batch)
                      : 0.0);
    out << spec;
  }
  out << std::flush;
}

}  // namespace

int runBench(const BenchCommandOptions& options, std::ostream& out, std::ostream& err) {
  if (options.run_interference) return runInterference(options, out, err);
  const bool online = !options.url.empty();
  if (online == !options.artifact.empty())
    return fail(err, online ? "give an artifact (offline) or --url (online), not both"
                            : "give an artifact (offline) or --url (online)");
  BenchOptions workload = options.bench;
  StatusOr<std::optional<KvDtype>> kv_dtype = parseKvDtypeFlag(options.kv_dtype);
  if (!kv_dtype.ok()) return fail(err, kv_dtype.status().message());
  if (online && *kv_dtype) return fail(err, "--kv-dtype is the server's option (ingot serve --kv-dtype)");
  if (online && options.tp != 0) return fail(err, "--tp is the server's option (ingot serve --tp)");
  workload.kv_dtype = *kv_dtype;
  if (online && options.device.device != "cpu")
    return fail(err, "--device is the server's option (ingot serve --device)");
  StatusOr<BackendFactory> factory = backendFactoryFor(options.device);
  if (!factory.ok()) return fail(err, factory.status().message());
  workload.backend_factory = std::move(factory).value();
  StatusOr<SpeculativeOptions> spec =
      speculativeOptions(options.speculative, options.spec_tokens, options.spec_branches);
  if (!spec.ok()) return fail(err, spec.status().message());
  if (online && spec->source != DraftSource::kNone)
    return fail(err, "--speculative is the server's option (ingot serve --speculative)");
  std::optional<Artifact> draft;
  if (spec->source == DraftSource::kDraftModel) {
    if (options.draft.empty()) return fail(err, "--speculative draft-model needs --draft PATH");
    StatusOr<Artifact> opened = Artifact::open(options.draft);
    if (!opened.ok()) return fail(err, opened.status().message());
    draft.emplace(std::move(opened).value());
    spec->draft = &*draft;
  }
  workload.speculative = *spec;
  if (!options.lengths_path.empty()) {
    StatusOr<std::vector<RequestLengths>> lengths = loadLengthsFile(options.lengths_path);
    if (!lengths.ok()) return fail(err, lengths.status().message());
    workload.lengths = std::move(lengths).value();
    if (!options.requests_given) workload.num_requests = 0;  // one request per line
  }
  std::optional<Artifact> artifact;
  if (!online) {
    StatusOr<Artifact> opened = Artifact::open(options.artifact);
    if (!opened.ok()) return fail(err, opened.status().message());
    artifact.emplace(std::move(opened).value());
    if (Status tp = checkTensorParallelFlag(options.tp, *artifact, options.artifact); !tp.ok())
      return fail(err, tp.message());
  }
  const std::vector<double> rates =
      options.request_rates.empty() ? std::vector<double>{0} : options.request_rates;
  const std::vector<int32_t> concurrencies =
      !options.request_rates.empty() && !options.concurrency_given ? std::vector<int32_t>{0}
                                                                   : options.concurrency;

  out << (online ? "online: " + options.url : "offline: " + options.artifact) << "\n";
  printHeader(out);
  std::vector<BenchResult> results;
  bool a_run_failed_entirely = false;
  for (double rate : rates) {
    for (int32_t concurrency : concurrencies) {
      StatusOr<BenchResult> result = invalidArgument("unreachable");
      if (online) {
        OnlineBenchOptions o;
        static_cast<WorkloadOptions&>(o) = workload;
        o.url = options.url;
        o.model = options.model;
        o.prompt_vocab = options.prompt_vocab;
        o.concurrency = concurrency;
        o.request_rate = rate;
        result = runOnlineBench(o);
      } else {
        BenchOptions b = workload;
        b.concurrency = concurrency;
        b.request_rate = rate;
        result = runOfflineBench(*artifact, b);
      }
      if (!result.ok()) return fail(err, result.status().message());
      results.push_back(*result);
      printRow(*result, results.front().output_tokens_per_s, out);
      a_run_failed_entirely = a_run_failed_entirely || result->requests == 0;
    }
  }
  if (!options.json_path.empty()) {
    std::ofstream json(options.json_path);
    json << benchResultsJson(results) << "\n";
    if (!json) return fail(err, "cannot write " + options.json_path);
  }
  if (a_run_failed_entirely) return fail(err, "every request of a run failed");
  return 0;
}

}  // namespace ingot
