// Offline benchmark of the engine: throughput and latency percentiles, closed or open loop.
#include "runtime/bench/offline_bench.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <random>
#include <thread>
#include <unordered_map>

#include "runtime/engine/engine.h"

namespace ingot {
namespace {

using Clock = std::chrono::steady_clock;

double msBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

/// A request in the engine: when its clock started and when its tokens came.
struct Tracked {
  Clock::time_point started;
  Clock::time_point first_token;
  Clock::time_point last_token;
  bool has_token = false;
};

}  // namespace

StatusOr<BenchResult> runOfflineBench(const Artifact& artifact, const BenchOptions& options) {
  if (options.concurrency < 0 || (options.concurrency == 0 && !(options.request_rate > 0)))
    return invalidArgument("bench: concurrency must be positive (0 = no cap needs a request "
                           "rate)");
  EngineOptions engine_options;
  engine_options.num_threads = options.num_threads;
  engine_options.num_kv_blocks = options.num_kv_blocks;
  engine_options.kv_dtype = options.kv_dtype;
  engine_options.backend_factory = options.backend_factory;
  if (options.concurrency > 0) engine_options.scheduler.max_running = options.concurrency;
  engine_options.speculative = options.speculative;
  StatusOr<std::unique_ptr<Engine>> created = Engine::create(artifact, engine_options);
  if (!created.ok()) return created.status();
  Engine& engine = **created;
  StatusOr<std::vector<PlannedRequest>> planned =
      planWorkload(options, engine.backend().vocabSize());
  if (!planned.ok()) return planned.status();
  std::vector<PlannedRequest>& plan = *planned;
  for (const PlannedRequest& r : plan) {
    const int64_t total = static_cast<int64_t>(r.prompt.size()) + r.max_tokens;
    if (total >= engine.maxModelLen())
      return invalidArgument("bench: prompt + output of " + std::to_string(total) +
                             " tokens exceeds the engine's limit of " +
                             std::to_string(engine.maxModelLen()));
  }

  const size_t cap = options.concurrency > 0 ? static_cast<size_t>(options.concurrency)
                                             : std::numeric_limits<size_t>::max();
  const Clock::time_point start = Clock::now();
  auto arrival = [&](size_t i) {
    return start + std::chrono::duration_cast<Clock::duration>(
                       std::chrono::duration<double>(plan[i].arrival_s));
  };
  std::unordered_map<RequestId, Tracked> live;
  RunSamples samples;
  size_t next = 0;                       // the next planned request to submit
  Clock::time_point slot_freed = start;  // when the cap last let a waiting request in
  int64_t steps = 0, batch_sum = 0;

  // Submits every request that has arrived by `now`, as far as the cap allows.
  auto submitArrived = [&](Clock::time_point now) -> Status {
    while (next < plan.size() && live.size() < cap && arrival(next) <= now) {
      SamplingParams params;  // greedy
      params.max_tokens = plan[next].max_tokens;
      params.ignore_eos = true;
      StatusOr<RequestId> id = engine.addRequest(std::move(plan[next].prompt), params);
      if (!id.ok()) return id.status();
      live[*id].started = std::max(arrival(next), slot_freed);
      ++next;
    }
    return okStatus();
  };

  INGOT_RETURN_IF_ERROR(submitArrived(start));
  while (next < plan.size() || !live.empty()) {
    if (live.empty()) {  // open loop: idle until the next arrival
      std::this_thread::sleep_until(arrival(next));
      INGOT_RETURN_IF_ERROR(submitArrived(Clock::now()));
      continue;
    }
    StatusOr<std::vector<RequestOutput>> outputs = engine.step();
    if (!outputs.ok()) return outputs.status();
    const Clock::time_point now = Clock::now();
    ++steps;
    batch_sum += engine.metrics().last_batch_size;
    for (const RequestOutput& out : *outputs) {
      auto it = live.find(out.id);
      if (it == live.end()) continue;
      Tracked& t = it->second;
      if (!out.token_ids.empty()) {
        if (!t.has_token) t.first_token = now;
        else samples.itl_ms.push_back(msBetween(t.last_token, now));
        t.has_token = true;
        t.last_token = now;
      }
      if (out.finished()) {
        samples.addRequest(msBetween(t.started, t.has_token ? t.first_token : now),
                           msBetween(t.started, now), out.num_prompt_tokens,
                           out.num_generated_tokens);
        if (live.size() == cap) slot_freed = now;
        live.erase(it);
      }
    }
    INGOT_RETURN_IF_ERROR(submitArrived(now));
  }
  BenchResult result;
  result.concurrency = options.concurrency;
  result.request_rate = options.request_rate;
  samples.fill(std::chrono::duration<double>(Clock::now() - start).count(), &result);
  const EngineMetrics m = engine.metrics();
  result.preemptions = m.preemptions;
  result.spec_trees = m.spec_trees;
  result.spec_draft_tokens = m.spec_draft_tokens;
  result.spec_path_tokens = m.spec_path_tokens;
  result.spec_accepted_tokens = m.spec_accepted_tokens;
  result.engine_steps = m.steps;
  result.mean_batch = steps ? static_cast<double>(batch_sum) / steps : 0;
  return result;
}

namespace {

/// One interference run: decoders warm up for baseline_steps, then (with_long) the long
/// prompt arrives and the run ends at its first token, or (without) the decoders run
/// `steps` more. Returns the decoders' inter-token latencies after the warm-up.
struct InterferenceRun {
  std::vector<double> itl_ms;
  int32_t steps = 0;
  double long_ttft_ms = 0;
};

StatusOr<InterferenceRun> runInterferenceOnce(const Artifact& artifact,
                                              const InterferenceOptions& options,
                                              bool with_long, int32_t steps) {
  EngineOptions engine_options;
  engine_options.num_threads = options.num_threads;
  engine_options.scheduler.max_batched_tokens = options.max_batched_tokens;
  engine_options.scheduler.max_prefill_while_decoding = options.max_prefill_while_decoding;
  // A pool that holds the decoders' growth over as many steps as the long prompt has
  // tokens (each step prefills at least one), so nothing is preempted while measuring:
  // preemption would measure recompute, not chunked prefill.
  if (const schema::ModelConfigDef* config = artifact.manifest().config()) {
    const int64_t block = std::max(1, config->kv_block_size());
    const int64_t tokens =
        int64_t{options.decoders} *
            (options.decoder_prompt + options.baseline_steps + options.long_prompt + 2 * block) +
        options.long_prompt + block;
    engine_options.num_kv_blocks =
        std::max((tokens + block - 1) / block, Engine::defaultKvBlocks(*config));
  }
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
  InterferenceRun run;
  RequestId long_id = -1;
  Clock::time_point long_start;
  int32_t warm_steps = 0;
  bool decoding = false, measuring = false;
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
      if (it->second != Clock::time_point{} && measuring) run.itl_ms.push_back(msBetween(it->second, now));
      it->second = now;
      ++decoder_tokens_this_step;
    }
    if (!decoding) {
      decoding = decoder_tokens_this_step == options.decoders;  // every decoder has a token
      continue;
    }
    if (!measuring) {
      if (++warm_steps < options.baseline_steps) continue;
      measuring = true;
      if (with_long) {
        SamplingParams long_params;
        long_params.max_tokens = 1;
        StatusOr<RequestId> id = engine.addRequest(randomPrompt(options.long_prompt), long_params);
        if (!id.ok()) return id.status();
        long_id = *id;
        long_start = Clock::now();
      }
      continue;
    }
    ++run.steps;
    const bool done = with_long ? long_first_token : run.steps >= steps;
    if (done) {
      if (with_long) run.long_ttft_ms = msBetween(long_start, now);
      for (const auto& [id, unused] : last) engine.cancel(id);
    }
  }
  return run;
}

}  // namespace

StatusOr<InterferenceResult> runPrefillInterference(const Artifact& artifact,
                                                    const InterferenceOptions& options) {
  if (options.decoders < 1 || options.long_prompt < 1 || options.baseline_steps < 1)
    return invalidArgument("bench: decoders, long prompt and baseline steps must be positive");
  StatusOr<InterferenceRun> during = runInterferenceOnce(artifact, options, true, 0);
  if (!during.ok()) return during.status();
  // The decoders' contexts grow while the prompt is prefilled, which slows them by itself:
  // the baseline is the same decoders alone over the same steps, from the same start.
  StatusOr<InterferenceRun> alone = runInterferenceOnce(artifact, options, false, during->steps);
  if (!alone.ok()) return alone.status();
  InterferenceResult result;
  result.baseline_itl_ms = summarize(alone->itl_ms);
  result.during_itl_ms = summarize(during->itl_ms);
  result.long_prompt_ttft_ms = during->long_ttft_ms;
  result.steps = during->steps;
  result.p99_ratio = result.during_itl_ms.p99 / std::max(result.baseline_itl_ms.p99, 1e-9);
  return result;
}

}  // namespace ingot
