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

StatusOr<InterferenceResult> runPrefillInterference(const Artifact& artifact,
                                                    const InterferenceOptions& options) {
  if (options.decoders < 1 || options.long_prompt < 1 || options.baseline_steps < 1)
    return invalidArgument("bench: decoders, long prompt and baseline steps must be positive");
  EngineOptions engine_options;
  engine_options.num_threads = options.num_threads;
  engine_options.scheduler.max_batched_tokens = options.max_batched_tokens;
  engine_options.scheduler.max_prefill_while_decoding = options.max_prefill_while_decoding;
  StatusOr<std::unique_ptr<Engine>> created = Engine::create(artifact, engine_options);
  if (!created.ok()) return created.status();
  Engine& engine = **created;
  const int64_t vocab = engine.backend().vocabSize();
  // Decoders must outlast the whole prefill of the long prompt.
  const int32_t decoder_tokens = engine.maxModelLen() - options.decoder_prompt - 1;
  if (options.long_prompt + 1 >= engine.maxModelLen() || decoder_tokens < 2 * options.baseline_steps)
    return invalidArgument("bench: the model's context is too short for this scenario");

  std::mt19937_64 rng(options.seed);
  auto randomPrompt = [&](int32_t n) {
    std::vector<int32_t> p(static_cast<size_t>(n));
    for (int32_t& t : p) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
    return p;
  };
  SamplingParams decode_params;
  decode_params.max_tokens = decoder_tokens;
  decode_params.ignore_eos = true;
  std::unordered_map<RequestId, Clock::time_point> last;
  for (int32_t i = 0; i < options.decoders; ++i) {
    StatusOr<RequestId> id = engine.addRequest(randomPrompt(options.decoder_prompt), decode_params);
    if (!id.ok()) return id.status();
    last.emplace(*id, Clock::time_point{});
  }
  InterferenceResult result;
  std::vector<double> itl;
  RequestId long_id = -1;
  Clock::time_point long_start;
  int32_t measured_steps = 0;
  bool decoding = false;
  while (engine.hasWork()) {
    StatusOr<std::vector<RequestOutput>> outputs = engine.step();
    if (!outputs.ok()) return outputs.status();
    const Clock::time_point now = Clock::now();
    bool long_first_token = false;
    int32_t decoder_tokens_this_step = 0;
    for (const RequestOutput& out : *outputs) {
      if (out.id == long_id) {
        long_first_token = long_first_token || !out.token_ids.empty();
        continue;
      }
      auto it = last.find(out.id);
      if (it == last.end() || out.token_ids.empty()) continue;
      if (it->second != Clock::time_point{} && decoding) itl.push_back(msBetween(it->second, now));
      it->second = now;
      ++decoder_tokens_this_step;
    }
    if (!decoding) {
      decoding = decoder_tokens_this_step == options.decoders;  // every decoder has a token
      continue;
    }
    if (long_id < 0 && ++measured_steps >= options.baseline_steps) {
      result.baseline_itl_ms = summarize(itl);
      itl.clear();
      SamplingParams long_params;
      long_params.max_tokens = 1;
      StatusOr<RequestId> id = engine.addRequest(randomPrompt(options.long_prompt), long_params);
      if (!id.ok()) return id.status();
      long_id = *id;
      long_start = Clock::now();
    } else if (long_id >= 0 && long_first_token) {
      result.long_prompt_ttft_ms = msBetween(long_start, now);
      result.during_itl_ms = summarize(itl);
      for (const auto& [id, unused] : last) engine.cancel(id);
    }
  }
  result.p99_ratio = result.during_itl_ms.p99 / std::max(result.baseline_itl_ms.p99, 1e-9);
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
