// What one `ingot bench` run measured (offline or online), its percentiles and its JSON form.
#include "runtime/bench/bench_result.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <nlohmann/json.hpp>

namespace ingot {

LatencySummary summarize(std::vector<double> values) {
  LatencySummary s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  auto at = [&](double q) {
    size_t i = static_cast<size_t>(q * (values.size() - 1) + 0.5);
    return values[std::min(i, values.size() - 1)];
  };
  s.p50 = at(0.50);
  s.p90 = at(0.90);
  s.p99 = at(0.99);
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / values.size();
  return s;
}

void RunSamples::addRequest(double ttft, double e2e, int64_t prompt, int64_t output) {
  ttft_ms.push_back(ttft);
  e2e_ms.push_back(e2e);
  if (output > 1) tpot_ms.push_back((e2e - ttft) / static_cast<double>(output - 1));
  ++requests;
  prompt_tokens += prompt;
  generated_tokens += output;
}

void RunSamples::fill(double seconds, BenchResult* r) const {
  const double s = std::max(seconds, 1e-9);
  r->seconds = seconds;
  r->requests = requests;
  r->prompt_tokens = prompt_tokens;
  r->generated_tokens = generated_tokens;
  r->requests_per_s = requests / s;
  r->output_tokens_per_s = generated_tokens / s;
  r->total_tokens_per_s = (prompt_tokens + generated_tokens) / s;
  r->ttft_ms = summarize(ttft_ms);
  r->tpot_ms = summarize(tpot_ms);
  r->itl_ms = summarize(itl_ms);
  r->e2e_ms = summarize(e2e_ms);
}

std::string benchResultsJson(const std::vector<BenchResult>& results) {
  nlohmann::json array = nlohmann::json::array();
  auto latency = [](const LatencySummary& s) {
    return nlohmann::json{{"p50", s.p50}, {"p90", s.p90}, {"p99", s.p99}, {"mean", s.mean}};
  };
  for (const BenchResult& r : results) {
    nlohmann::json j = {{"mode", r.mode},
                        {"concurrency", r.concurrency},
                        {"request_rate", r.request_rate},
                        {"requests", r.requests},
                        {"failed", r.failed},
                        {"prompt_tokens", r.prompt_tokens},
                        {"generated_tokens", r.generated_tokens},
                        {"seconds", r.seconds},
                        {"requests_per_s", r.requests_per_s},
                        {"output_tokens_per_s", r.output_tokens_per_s},
                        {"total_tokens_per_s", r.total_tokens_per_s},
                        {"ttft_ms", latency(r.ttft_ms)},
                        {"tpot_ms", latency(r.tpot_ms)},
                        {"itl_ms", latency(r.itl_ms)},
                        {"e2e_ms", latency(r.e2e_ms)},
                        {"preemptions", r.preemptions},
                        {"mean_batch", nullptr}};
    if (std::isfinite(r.mean_batch)) j["mean_batch"] = r.mean_batch;
    if (r.spec_trees > 0)
      j["speculative"] = {{"trees", r.spec_trees},
                          {"draft_tokens", r.spec_draft_tokens},
                          {"path_tokens", r.spec_path_tokens},
                          {"accepted_tokens", r.spec_accepted_tokens},
                          {"engine_steps", r.engine_steps}};
    if (!r.first_error.empty()) j["first_error"] = r.first_error;
    array.push_back(std::move(j));
  }
  return array.dump(2);
}

}  // namespace ingot
