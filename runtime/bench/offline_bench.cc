// Offline benchmark of the engine: throughput and latency percentiles at fixed concurrency.
#include "runtime/bench/offline_bench.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "runtime/engine/engine.h"

namespace ingot {
namespace {

using Clock = std::chrono::steady_clock;

double msBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

struct Tracked {
  Clock::time_point submitted;
  Clock::time_point last_token;
  bool has_token = false;
};

}  // namespace

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

StatusOr<BenchResult> runOfflineBench(const Artifact& artifact, const BenchOptions& options) {
  if (options.concurrency < 1 || options.num_requests < 1 || options.prompt_min < 1 ||
      options.prompt_max < options.prompt_min || options.output_min < 1 ||
      options.output_max < options.output_min)
    return invalidArgument("bench: concurrency, requests, prompt and output ranges must be "
                           "positive with min <= max");
  EngineOptions engine_options;
  engine_options.num_threads = options.num_threads;
  engine_options.num_kv_blocks = options.num_kv_blocks;
  engine_options.scheduler.max_running = std::max(options.concurrency, 1);
  StatusOr<std::unique_ptr<Engine>> created = Engine::create(artifact, engine_options);
  if (!created.ok()) return created.status();
  Engine& engine = **created;
  const int64_t vocab = engine.backend().vocabSize();
  if (options.prompt_max + options.output_max >= engine.maxModelLen())
    return invalidArgument("bench: prompt + output of " +
                           std::to_string(options.prompt_max + options.output_max) +
                           " tokens exceeds the engine's limit of " +
                           std::to_string(engine.maxModelLen()));

  std::mt19937_64 rng(options.seed);
  auto uniform = [&](int32_t lo, int32_t hi) {
    return lo + static_cast<int32_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
  };
  std::unordered_map<RequestId, Tracked> live;
  std::vector<double> ttft, itl, e2e;
  BenchResult result;
  result.concurrency = options.concurrency;
  int32_t submitted = 0;
  int64_t steps = 0, batch_sum = 0;

  auto submit = [&]() -> Status {
    std::vector<int32_t> prompt(static_cast<size_t>(uniform(options.prompt_min, options.prompt_max)));
    for (int32_t& t : prompt) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
    SamplingParams params;  // greedy
    params.max_tokens = uniform(options.output_min, options.output_max);
    params.ignore_eos = true;
    StatusOr<RequestId> id = engine.addRequest(std::move(prompt), params);
    if (!id.ok()) return id.status();
    live[*id].submitted = Clock::now();
    ++submitted;
    return okStatus();
  };

  Clock::time_point start = Clock::now();
  while (submitted < options.num_requests && static_cast<int32_t>(live.size()) < options.concurrency)
    INGOT_RETURN_IF_ERROR(submit());
  while (!live.empty()) {
    StatusOr<std::vector<RequestOutput>> outputs = engine.step();
    if (!outputs.ok()) return outputs.status();
    Clock::time_point now = Clock::now();
    ++steps;
    batch_sum += engine.metrics().last_batch_size;
    for (const RequestOutput& out : *outputs) {
      auto it = live.find(out.id);
      if (it == live.end()) continue;
      Tracked& t = it->second;
      if (!out.token_ids.empty()) {
        if (!t.has_token) ttft.push_back(msBetween(t.submitted, now));
        else itl.push_back(msBetween(t.last_token, now));
        t.has_token = true;
        t.last_token = now;
      }
      if (out.finished()) {
        e2e.push_back(msBetween(t.submitted, now));
        result.prompt_tokens += out.num_prompt_tokens;
        result.generated_tokens += out.num_generated_tokens;
        live.erase(it);
        ++result.requests;
        if (submitted < options.num_requests) INGOT_RETURN_IF_ERROR(submit());
      }
    }
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result.output_tokens_per_s = result.generated_tokens / std::max(result.seconds, 1e-9);
  result.total_tokens_per_s =
      (result.prompt_tokens + result.generated_tokens) / std::max(result.seconds, 1e-9);
  result.ttft_ms = summarize(ttft);
  result.itl_ms = summarize(itl);
  result.e2e_ms = summarize(e2e);
  result.preemptions = engine.metrics().preemptions;
  result.mean_batch = steps ? static_cast<double>(batch_sum) / steps : 0;
  return result;
}

std::string benchResultsJson(const std::vector<BenchResult>& results) {
  nlohmann::json array = nlohmann::json::array();
  auto latency = [](const LatencySummary& s) {
    return nlohmann::json{{"p50", s.p50}, {"p90", s.p90}, {"p99", s.p99}, {"mean", s.mean}};
  };
  for (const BenchResult& r : results) {
    array.push_back({{"concurrency", r.concurrency},
                     {"requests", r.requests},
                     {"prompt_tokens", r.prompt_tokens},
                     {"generated_tokens", r.generated_tokens},
                     {"seconds", r.seconds},
                     {"output_tokens_per_s", r.output_tokens_per_s},
                     {"total_tokens_per_s", r.total_tokens_per_s},
                     {"ttft_ms", latency(r.ttft_ms)},
                     {"itl_ms", latency(r.itl_ms)},
                     {"e2e_ms", latency(r.e2e_ms)},
                     {"preemptions", r.preemptions},
                     {"mean_batch", r.mean_batch}});
  }
  return array.dump(2);
}

}  // namespace ingot
