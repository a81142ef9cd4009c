// Engine end to end on a tiny random Llama: batch invariance, prefix reuse, preemption,
// cancellation, seeded sampling, max_tokens/stop handling and a concurrent inbox.
#include "runtime/engine/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <thread>

#include "testing/llama_program.h"

namespace ingot {
namespace {

constexpr int kVocab = 256;

const Artifact& tinyLlama() { return testing::sharedLlamaArtifact(kVocab, 512, 7); }

std::unique_ptr<Engine> makeEngine(int64_t blocks = 256, bool prefix_cache = true,
                                   int32_t budget = 64) {
  EngineOptions o;
  o.num_threads = 2;
  o.num_kv_blocks = blocks;
  o.enable_prefix_cache = prefix_cache;
  o.scheduler.max_batched_tokens = budget;
  o.scheduler.max_running = 64 < budget ? 64 : budget;
  o.scheduler.max_prefill_while_decoding = 0;  // chunks fill the budget (tests below count on it)
  o.eos_token_ids = std::vector<int32_t>{};  // the random model has no EOS
  StatusOr<std::unique_ptr<Engine>> e = Engine::create(tinyLlama(), o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return std::move(*e);
}

std::vector<int32_t> randomPrompt(int n, std::mt19937& rng) {
  std::vector<int32_t> p(n);
  for (int32_t& t : p) t = static_cast<int32_t>(rng() % kVocab);
  return p;
}

SamplingParams greedy(int32_t max_tokens) {
  SamplingParams p;
  p.max_tokens = max_tokens;
  return p;
}

struct Result {
  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::kNone;
  bool cancelled = false;
};

/// Steps until the engine is idle; collects every request's tokens.
std::map<RequestId, Result> runToCompletion(Engine& e, int max_steps = 100000) {
  std::map<RequestId, Result> results;
  for (int i = 0; i < max_steps && e.hasWork(); ++i) {
    StatusOr<std::vector<RequestOutput>> outs = e.step();
    EXPECT_TRUE(outs.ok()) << outs.status().message();
    if (!outs.ok()) break;
    for (const RequestOutput& o : *outs) {
      Result& r = results[o.id];
      r.tokens.insert(r.tokens.end(), o.token_ids.begin(), o.token_ids.end());
      if (o.finish_reason != FinishReason::kNone) r.reason = o.finish_reason;
      r.cancelled |= o.cancelled;
    }
  }
  EXPECT_FALSE(e.hasWork());
  return results;
}

std::vector<int32_t> generateAlone(const std::vector<int32_t>& prompt, const SamplingParams& p) {
  std::unique_ptr<Engine> e = makeEngine();
  StatusOr<RequestId> id = e->addRequest(prompt, p);
  EXPECT_TRUE(id.ok());
  return runToCompletion(*e)[*id].tokens;
}

TEST(EngineTest, GreedyOutputIsBatchInvariant) {
  std::mt19937 rng(11);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int32_t> lengths;
  for (int i = 0; i < 32; ++i) {
    prompts.push_back(randomPrompt(1 + static_cast<int>(rng() % 150), rng));
    lengths.push_back(4 + static_cast<int32_t>(rng() % 20));
  }
  std::unique_ptr<Engine> e = makeEngine();
  std::vector<RequestId> ids;
  for (int i = 0; i < 32; ++i) ids.push_back(*e->addRequest(prompts[i], greedy(lengths[i])));
  std::map<RequestId, Result> batched = runToCompletion(*e);
  EXPECT_GE(e->metrics().steps, 1);
  for (int i = 0; i < 32; ++i) {
    const std::vector<int32_t> alone = generateAlone(prompts[i], greedy(lengths[i]));
    ASSERT_EQ(static_cast<int32_t>(alone.size()), lengths[i]);
    EXPECT_EQ(batched[ids[i]].tokens, alone) << "request " << i;
    EXPECT_EQ(batched[ids[i]].reason, FinishReason::kLength);
  }
}

TEST(EngineTest, MixesPrefillChunksAndDecodesInOneStep) {
  std::mt19937 rng(3);
  std::unique_ptr<Engine> e = makeEngine(256, true, /*budget=*/32);
  (void)*e->addRequest(randomPrompt(10, rng), greedy(50));
  ASSERT_TRUE(e->step().ok());  // prefill of the first
  (void)*e->addRequest(randomPrompt(200, rng), greedy(5));
  ASSERT_TRUE(e->step().ok());
  const EngineMetrics m = e->metrics();
  EXPECT_EQ(m.last_batch_size, 2);  // one decode + one chunk of the long prompt
  EXPECT_EQ(m.computed_tokens, 10 + 32);
}

TEST(EngineTest, SharedPrefixIsComputedOnce) {
  std::mt19937 rng(5);
  const std::vector<int32_t> prefix = randomPrompt(64, rng);
  std::vector<int32_t> a = prefix, b = prefix;
  for (int32_t t : randomPrompt(20, rng)) a.push_back(t);
  for (int32_t t : randomPrompt(10, rng)) b.push_back(t);

  std::unique_ptr<Engine> e = makeEngine();
  (void)*e->addRequest(a, greedy(8));
  runToCompletion(*e);
  const EngineMetrics before = e->metrics();
  RequestId id = *e->addRequest(b, greedy(8));
  std::vector<int32_t> cached_out = runToCompletion(*e)[id].tokens;
  const EngineMetrics after = e->metrics();
  // 64 cached prompt tokens: only the 10 new ones plus 7 decodes are computed.
  EXPECT_EQ(after.prefix_cache_hit_tokens - before.prefix_cache_hit_tokens, 64);
  EXPECT_EQ(after.computed_tokens - before.computed_tokens, 10 + 7);

  std::unique_ptr<Engine> cold = makeEngine(256, /*prefix_cache=*/false);
  RequestId cold_id = *cold->addRequest(b, greedy(8));
  EXPECT_EQ(runToCompletion(*cold)[cold_id].tokens, cached_out);
}

TEST(EngineTest, TinyPoolPreemptsAndStillMatchesBigPool) {
  std::mt19937 rng(9);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 16; ++i) prompts.push_back(randomPrompt(20 + static_cast<int>(rng() % 40), rng));
  auto run = [&](int64_t blocks) {
    std::unique_ptr<Engine> e = makeEngine(blocks, true);
    std::vector<RequestId> ids;
    for (const auto& p : prompts) ids.push_back(*e->addRequest(p, greedy(24)));
    std::map<RequestId, Result> r = runToCompletion(*e);
    std::vector<std::vector<int32_t>> out;
    for (RequestId id : ids) {
      EXPECT_EQ(r[id].reason, FinishReason::kLength);
      out.push_back(r[id].tokens);
    }
    EXPECT_EQ(e->metrics().kv_blocks_used, 0);
    return std::make_pair(out, e->metrics().preemptions);
  };
  // Demand: 16 x (<= 60 + 24) tokens ~ 16 x 6 blocks = 96 blocks; the small pool has 10.
  auto big = run(256);
  auto small = run(10);
  EXPECT_EQ(big.second, 0);
  EXPECT_GT(small.second, 0);
  EXPECT_EQ(small.first, big.first);
}

TEST(EngineTest, CancellationMidGenerationFreesBlocks) {
  std::mt19937 rng(13);
  std::unique_ptr<Engine> e = makeEngine();
  std::vector<RequestId> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(*e->addRequest(randomPrompt(40, rng), greedy(100)));
  std::map<RequestId, size_t> early;
  for (int i = 0; i < 8; ++i) {
    StatusOr<std::vector<RequestOutput>> outs = e->step();
    ASSERT_TRUE(outs.ok());
    for (const RequestOutput& o : *outs) early[o.id] += o.token_ids.size();
  }
  EXPECT_GT(e->metrics().kv_blocks_used, 0);
  for (int i = 0; i < 8; i += 2) e->cancel(ids[i]);
  std::map<RequestId, Result> r = runToCompletion(*e);
  for (auto& [id, n] : early) r[id].tokens.resize(r[id].tokens.size() + n);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(r[ids[i]].cancelled, i % 2 == 0);
    if (i % 2 == 0) EXPECT_LT(r[ids[i]].tokens.size(), 100u);
    else EXPECT_EQ(r[ids[i]].tokens.size(), 100u);
  }
  EXPECT_EQ(e->metrics().kv_blocks_used, 0);
  EXPECT_EQ(e->metrics().running, 0);
}

TEST(EngineTest, CancelReturnsBlocksWithinOneStep) {
  std::mt19937 rng(17);
  std::unique_ptr<Engine> e = makeEngine();
  RequestId id = *e->addRequest(randomPrompt(100, rng), greedy(100));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(e->step().ok());
  e->cancel(id);
  StatusOr<std::vector<RequestOutput>> outs = e->step();
  ASSERT_TRUE(outs.ok());
  ASSERT_EQ(outs->size(), 1u);
  EXPECT_TRUE((*outs)[0].cancelled);
  EXPECT_EQ(e->metrics().kv_blocks_used, 0);
  EXPECT_FALSE(e->hasWork());
}

TEST(EngineTest, SeededSamplingIsReproducibleAloneAndBatched) {
  std::mt19937 rng(19);
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_p = 0.95f;
  p.seed = 1234;
  p.max_tokens = 20;
  const std::vector<int32_t> prompt = randomPrompt(30, rng);
  const std::vector<int32_t> alone = generateAlone(prompt, p);
  std::unique_ptr<Engine> e = makeEngine();
  for (int i = 0; i < 10; ++i) {
    SamplingParams other = p;
    other.seed = 100 + i;
    (void)*e->addRequest(randomPrompt(5 + i * 7, rng), other);
  }
  RequestId id = *e->addRequest(prompt, p);
  EXPECT_EQ(runToCompletion(*e)[id].tokens, alone);
}

TEST(EngineTest, ParallelSamplesShareThePromptAndMatchSingleRequests) {
  std::mt19937 rng(41);
  const std::vector<int32_t> prompt = randomPrompt(50, rng);
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 77;
  p.max_tokens = 12;
  std::unique_ptr<Engine> e = makeEngine();
  const RequestId first = *e->addRequest(prompt, p, /*priority=*/0, /*n=*/4);
  std::map<RequestId, Result> r = runToCompletion(*e);
  ASSERT_EQ(r.size(), 4u);
  // The prompt is computed once; then each sample decodes its own tokens.
  EXPECT_EQ(e->metrics().computed_tokens, 50 + 4 * 11);
  EXPECT_EQ(e->metrics().generation_tokens, 4 * 12);
  EXPECT_EQ(e->metrics().kv_blocks_used, 0);
  bool differ = false;
  for (int i = 0; i < 4; ++i) {
    SamplingParams single = p;
    single.seed = p.seed + i;
    EXPECT_EQ(r[first + i].tokens, generateAlone(prompt, single)) << "sample " << i;
    differ |= r[first + i].tokens != r[first].tokens;
  }
  EXPECT_TRUE(differ);
}

TEST(EngineTest, CancelledParentStillRunsItsParallelSamples) {
  std::mt19937 rng(43);
  std::unique_ptr<Engine> e = makeEngine(256, true, /*budget=*/16);
  const RequestId first = *e->addRequest(randomPrompt(100, rng), greedy(5), 0, 3);
  ASSERT_TRUE(e->step().ok());  // a first chunk of the prompt only
  e->cancel(first);
  std::map<RequestId, Result> r = runToCompletion(*e);
  EXPECT_TRUE(r[first].cancelled);
  EXPECT_EQ(r[first + 1].tokens.size(), 5u);
  EXPECT_EQ(r[first + 2].tokens, r[first + 1].tokens);
  EXPECT_EQ(e->metrics().kv_blocks_used, 0);
}

TEST(EngineTest, MaxTokensAndStopTokensEndGeneration) {
  std::mt19937 rng(23);
  const std::vector<int32_t> prompt = randomPrompt(12, rng);
  const std::vector<int32_t> full = generateAlone(prompt, greedy(10));
  ASSERT_EQ(full.size(), 10u);

  SamplingParams stop = greedy(10);
  stop.stop_token_ids = {full[3]};
  std::unique_ptr<Engine> e = makeEngine();
  RequestId id = *e->addRequest(prompt, stop);
  Result r = runToCompletion(*e)[id];
  const size_t first = std::find(full.begin(), full.end(), full[3]) - full.begin();
  EXPECT_EQ(r.tokens, std::vector<int32_t>(full.begin(), full.begin() + first + 1));
  EXPECT_EQ(r.reason, FinishReason::kStop);

  // EOS ends generation unless ignore_eos.
  EngineOptions o;
  o.num_threads = 2;
  o.num_kv_blocks = 64;
  o.eos_token_ids = std::vector<int32_t>{full[5]};
  std::unique_ptr<Engine> eos = *Engine::create(tinyLlama(), o);
  RequestId a = *eos->addRequest(prompt, greedy(10));
  SamplingParams ignore = greedy(10);
  ignore.ignore_eos = true;
  RequestId b = *eos->addRequest(prompt, ignore);
  std::map<RequestId, Result> rs = runToCompletion(*eos);
  EXPECT_EQ(rs[a].reason, FinishReason::kStop);
  EXPECT_LE(rs[a].tokens.size(), 6u);
  EXPECT_EQ(rs[b].tokens, full);
  EXPECT_EQ(rs[b].reason, FinishReason::kLength);
}

TEST(EngineTest, StopStringsUseTokenText) {
  std::mt19937 rng(29);
  const std::vector<int32_t> prompt = randomPrompt(12, rng);
  const std::vector<int32_t> full = generateAlone(prompt, greedy(10));
  EngineOptions o;
  o.num_threads = 2;
  o.num_kv_blocks = 64;
  o.eos_token_ids = std::vector<int32_t>{};
  o.token_text = [](int32_t t) { return "<" + std::to_string(t) + ">"; };
  std::unique_ptr<Engine> e = *Engine::create(tinyLlama(), o);
  SamplingParams p = greedy(10);
  p.stop = {"<" + std::to_string(full[2]) + ">"};
  RequestId id = *e->addRequest(prompt, p);
  std::string text;
  FinishReason reason = FinishReason::kNone;
  while (e->hasWork()) {
    StatusOr<std::vector<RequestOutput>> outs = e->step();
    ASSERT_TRUE(outs.ok());
    for (const RequestOutput& out : *outs) {
      if (out.id != id) continue;
      text += out.text;
      if (out.finished()) reason = out.finish_reason;
    }
  }
  const size_t first = std::find(full.begin(), full.end(), full[2]) - full.begin();
  std::string want;
  for (size_t i = 0; i < first; ++i) want += "<" + std::to_string(full[i]) + ">";
  EXPECT_EQ(text, want);
  EXPECT_EQ(reason, FinishReason::kStop);
}

TEST(EngineTest, LogprobsAreReported) {
  std::mt19937 rng(31);
  std::unique_ptr<Engine> e = makeEngine();
  SamplingParams p = greedy(3);
  p.logprobs = true;
  p.top_logprobs = 2;
  RequestId id = *e->addRequest(randomPrompt(8, rng), p);
  int seen = 0;
  while (e->hasWork()) {
    StatusOr<std::vector<RequestOutput>> outs = e->step();
    ASSERT_TRUE(outs.ok());
    for (const RequestOutput& out : *outs) {
      ASSERT_EQ(out.id, id);
      ASSERT_EQ(out.logprobs.size(), 1u);
      EXPECT_EQ(out.logprobs[0].chosen.token, out.token_ids[0]);
      EXPECT_EQ(out.logprobs[0].top.size(), 2u);
      EXPECT_EQ(out.logprobs[0].top[0].token, out.token_ids[0]);  // greedy = likeliest
      ++seen;
    }
  }
  EXPECT_EQ(seen, 3);
}

TEST(EngineTest, RejectsBadRequests) {
  std::unique_ptr<Engine> e = makeEngine();
  EXPECT_FALSE(e->addRequest({}, greedy(4)).ok());
  EXPECT_FALSE(e->addRequest({kVocab}, greedy(4)).ok());
  EXPECT_FALSE(e->addRequest(std::vector<int32_t>(512, 1), greedy(4)).ok());
  SamplingParams bad;
  bad.temperature = -3;
  bad.top_p = 0;
  EXPECT_FALSE(e->addRequest({1, 2}, bad).ok());
  EXPECT_FALSE(e->hasWork());
}

TEST(EngineTest, LengthStopsAtMaxModelLen) {
  EngineOptions o;
  o.num_threads = 2;
  o.num_kv_blocks = 64;
  o.max_model_len = 40;
  o.eos_token_ids = std::vector<int32_t>{};
  std::unique_ptr<Engine> e = *Engine::create(tinyLlama(), o);
  RequestId id = *e->addRequest(std::vector<int32_t>(30, 3), SamplingParams{});
  Result r = runToCompletion(*e)[id];
  EXPECT_EQ(r.tokens.size(), 10u);
  EXPECT_EQ(r.reason, FinishReason::kLength);
}

TEST(EngineTest, RequestsAndCancelsFromAnotherThread) {
  std::unique_ptr<Engine> e = makeEngine();
  std::atomic<bool> done{false};
  std::atomic<int> added{0};
  std::thread producer([&] {
    std::mt19937 rng(37);
    for (int i = 0; i < 40; ++i) {
      StatusOr<RequestId> id = e->addRequest(randomPrompt(5 + i, rng), greedy(8));
      ASSERT_TRUE(id.ok());
      ++added;
      if (i % 5 == 0) e->cancel(*id);
      std::this_thread::yield();
    }
    done = true;
  });
  int finished = 0;
  while (!done || e->hasWork()) {
    StatusOr<std::vector<RequestOutput>> outs = e->step();
    ASSERT_TRUE(outs.ok());
    for (const RequestOutput& o : *outs) finished += o.finished() ? 1 : 0;
    (void)e->metrics();
  }
  producer.join();
  EXPECT_EQ(finished, 40);
  EXPECT_EQ(e->metrics().kv_blocks_used, 0);
}

}  // namespace
}  // namespace ingot
