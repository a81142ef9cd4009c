// Speculative decoding through the engine on a tiny random Llama: greedy output identical
// with and without speculation (chains on a causal artifact, trees on a tree-mask artifact,
// alone and batched), one target pass per verified tree, KV released and the prefix cache
// intact, and sampled output distributed as without speculation (chi-square).
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <random>

#include "core/region/region_examples.h"
#include "testing/llama_program.h"
#include "runtime/engine/engine.h"
#include "runtime/spec/chi_square.h"

namespace ingot {
namespace {

constexpr int kVocab = 64;

/// The same weights twice: plain causal attention, and the tree-mask variant with its
/// tree_start / tree_bits inputs (what the compiler emits).
/// Artifact bytes live for the whole test binary (artifacts point into them).
const std::vector<uint8_t>& keep(std::vector<uint8_t> bytes) {
  static std::deque<std::vector<uint8_t>> storage;
  return storage.emplace_back(std::move(bytes));
}

Artifact* buildTiny(bool tree, uint64_t seed, int32_t draft_layers, int64_t vocab = kVocab) {
  testing::LlamaProgramOptions o;
  o.vocab = vocab;
  o.max_context = 512;
  o.seed = seed;
  o.layers = 3;
  o.draft_layers = draft_layers;
  if (tree) {
    o.mask_bytecode = treeMaskBytecode();
    o.extra_input_ranks = {1, 3};
    o.extra_input_names = {"tree_start", "tree_bits"};
  }
  StatusOr<std::vector<uint8_t>> bytes = testing::buildLlamaArtifact(o);
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  StatusOr<Artifact> a = Artifact::openFromMemory(keep(std::move(*bytes)));
  EXPECT_TRUE(a.ok()) << a.status().message();
  return new Artifact(std::move(*a));
}

/// Another model over the same vocabulary, as a separate draft artifact.
const Artifact& otherTiny() {
  static Artifact* a = buildTiny(false, 99, 0);
  return *a;
}

const Artifact& tinyLlama(bool tree_mask) {
  auto build = [](bool tree) {
    testing::LlamaProgramOptions o;
    o.vocab = kVocab;
    o.max_context = 512;
    o.seed = 11;
    o.layers = 3;
    o.draft_layers = 1;  // programs[1]: the early-exit draft for self-speculation
    if (tree) {
      o.mask_bytecode = treeMaskBytecode();
      o.extra_input_ranks = {1, 3};
      o.extra_input_names = {"tree_start", "tree_bits"};
    }
    StatusOr<std::vector<uint8_t>> bytes = testing::buildLlamaArtifact(o);
    EXPECT_TRUE(bytes.ok()) << bytes.status().message();
    StatusOr<Artifact> a = Artifact::openFromMemory(keep(std::move(*bytes)));
    EXPECT_TRUE(a.ok()) << a.status().message();
    return new Artifact(std::move(*a));
  };
  static Artifact* causal = build(false);
  static Artifact* tree = build(true);
  return tree_mask ? *tree : *causal;
}

struct SpecSetup {
  bool tree_mask = false;
  DraftSource source = DraftSource::kNone;
  int32_t branches = 1;
  int32_t max_running = 16;
  int64_t blocks = 256;
  const Artifact* draft = nullptr;
};

std::unique_ptr<Engine> makeEngine(const SpecSetup& s) {
  EngineOptions o;
  o.num_threads = 2;
  o.num_kv_blocks = s.blocks;
  o.scheduler.max_batched_tokens = 256;
  o.scheduler.max_running = s.max_running;
  o.eos_token_ids = std::vector<int32_t>{};
  o.speculative.source = s.source;
  o.speculative.max_branches = s.branches;
  o.speculative.adaptive.max_batch_size = 64;
  o.speculative.draft = s.draft;
  StatusOr<std::unique_ptr<Engine>> e = Engine::create(tinyLlama(s.tree_mask), o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return std::move(*e);
}

/// Prompts that repeat themselves (prompt lookup finds matches) and random ones.
std::vector<std::vector<int32_t>> prompts() {
  std::mt19937 rng(5);
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < 6; ++i) {
    std::vector<int32_t> phrase(4 + i);
    for (int32_t& t : phrase) t = static_cast<int32_t>(rng() % kVocab);
    std::vector<int32_t> p;
    for (int r = 0; r < 3; ++r) p.insert(p.end(), phrase.begin(), phrase.end());
    out.push_back(p);
    std::vector<int32_t> random(12 + 3 * i);
    for (int32_t& t : random) t = static_cast<int32_t>(rng() % kVocab);
    out.push_back(random);
  }
  return out;
}

/// Runs `prompts` concurrently (or one after another when `serial`); tokens per prompt.
std::vector<std::vector<int32_t>> generate(Engine& e, const std::vector<std::vector<int32_t>>& ps,
                                           const SamplingParams& params, bool serial) {
  std::vector<std::vector<int32_t>> out(ps.size());
  std::map<RequestId, size_t> index;
  auto drain = [&] {
    while (e.hasWork()) {
      StatusOr<std::vector<RequestOutput>> step = e.step();
      EXPECT_TRUE(step.ok()) << step.status().message();
      if (!step.ok()) return;
      for (const RequestOutput& o : *step) {
        std::vector<int32_t>& t = out[index.at(o.id)];
        t.insert(t.end(), o.token_ids.begin(), o.token_ids.end());
      }
    }
  };
  for (size_t i = 0; i < ps.size(); ++i) {
    StatusOr<RequestId> id = e.addRequest(ps[i], params);
    EXPECT_TRUE(id.ok()) << id.status().message();
    index[*id] = i;
    if (serial) drain();
  }
  drain();
  return out;
}

SamplingParams greedy(int32_t max_tokens) {
  SamplingParams p;
  p.max_tokens = max_tokens;
  return p;
}

TEST(SpeculativeEngineTest, GreedyOutputIsIdenticalForEveryDraftShapeAloneAndBatched) {
  const std::vector<std::vector<int32_t>> ps = prompts();
  auto plain = makeEngine({});
  const auto want = generate(*plain, ps, greedy(48), /*serial=*/true);
  for (bool tree_mask : {false, true}) {
    for (int32_t branches : {1, 3}) {
      if (branches > 1 && !tree_mask) continue;
      for (bool serial : {true, false}) {
        SCOPED_TRACE(::testing::Message() << "tree_mask " << tree_mask << " branches " << branches
                                        << (serial ? " alone" : " batched"));
        auto spec = makeEngine({tree_mask, DraftSource::kPromptLookup, branches});
        EXPECT_EQ(generate(*spec, ps, greedy(48), serial), want);
        const EngineMetrics m = spec->metrics();
        // Not vacuous: trees were verified and drafts accepted.
        EXPECT_GT(m.spec_trees, 20);
        EXPECT_GT(m.spec_accepted_tokens, 20);
        EXPECT_EQ(m.kv_blocks_used, 0);  // every draft slot went back
      }
    }
  }
}

TEST(SpeculativeEngineTest, DraftModelsKeepGreedyOutputAloneAndBatched) {
  const std::vector<std::vector<int32_t>> ps = prompts();
  auto plain = makeEngine({});
  const auto want = generate(*plain, ps, greedy(40), /*serial=*/true);
  struct Case {
    const char* name;
    SpecSetup setup;
  };
  const Case cases[] = {
      {"self (first layer)", {true, DraftSource::kSelf}},
      {"draft artifact", {false, DraftSource::kDraftModel, 1, 16, 256, &otherTiny()}},
      {"target as its own draft", {false, DraftSource::kDraftModel, 1, 16, 256, &tinyLlama(false)}},
      {"draft artifact, top-3 tree", {true, DraftSource::kDraftModel, 3, 16, 256, &otherTiny()}},
      {"self, top-3 tree", {true, DraftSource::kSelf, 3}},
  };
  for (const Case& c : cases) {
    for (bool serial : {true, false}) {
      SCOPED_TRACE(::testing::Message() << c.name << (serial ? " alone" : " batched"));
      auto spec = makeEngine(c.setup);
      EXPECT_EQ(generate(*spec, ps, greedy(40), serial), want);
      const EngineMetrics m = spec->metrics();
      EXPECT_GT(m.spec_trees, 20);
      EXPECT_EQ(m.kv_blocks_used, 0);
      if (std::string(c.name) == "target as its own draft") {
        // The same model drafts exactly what it then picks: everything is accepted.
        EXPECT_EQ(m.spec_accepted_tokens, m.spec_path_tokens);
      }
    }
  }
}

TEST(SpeculativeEngineTest, DraftModelWithAnotherVocabularyIsRefused) {
  static Artifact* other = buildTiny(false, 5, 0, /*vocab=*/kVocab + 1);
  EngineOptions o;
  o.speculative.source = DraftSource::kDraftModel;
  o.speculative.draft = other;
  StatusOr<std::unique_ptr<Engine>> e = Engine::create(tinyLlama(false), o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("vocabulary"), std::string::npos) << e.status().message();
  // And self-speculation needs a draft program.
  static Artifact* plain = buildTiny(false, 5, 0);
  o.speculative.source = DraftSource::kSelf;
  e = Engine::create(*plain, o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("--draft-layers"), std::string::npos);
}

TEST(SpeculativeEngineTest, OneTargetPassVerifiesEachTree) {
  auto e = makeEngine({true, DraftSource::kPromptLookup, 3});
  const std::vector<int32_t> prompt = prompts()[0];
  const auto out = generate(*e, {prompt}, greedy(64), true);
  const EngineMetrics m = e->metrics();
  ASSERT_EQ(out[0].size(), 64u);
  // One request: every step after the prefill step is one target pass over at most one
  // tree, and emits the tree's accepted tokens plus one.
  EXPECT_GT(m.spec_trees, 0);
  EXPECT_EQ(m.spec_target_passes, m.spec_trees);
  const int64_t decode_steps = m.steps - 1;  // the prompt fits one step
  EXPECT_EQ(m.generation_tokens, 1 + decode_steps + m.spec_accepted_tokens);
  EXPECT_LT(m.steps, 64);  // fewer target passes than tokens
  EXPECT_EQ(m.computed_tokens,
            static_cast<int64_t>(prompt.size()) + decode_steps + m.spec_draft_tokens);
}

TEST(SpeculativeEngineTest, PrefixCacheSeesOnlyTheAcceptedTokens) {
  // A second request whose prompt is the first one's prompt + output must hit the cache
  // for every full block: draft tokens never reached it under the wrong token ids.
  auto e = makeEngine({true, DraftSource::kPromptLookup, 3});
  const std::vector<int32_t> prompt = prompts()[2];
  const auto first = generate(*e, {prompt}, greedy(60), true);
  std::vector<int32_t> again = prompt;
  again.insert(again.end(), first[0].begin(), first[0].end() - 1);
  const int64_t hits_before = e->metrics().prefix_cache_hit_tokens;
  generate(*e, {again}, greedy(4), true);
  const int64_t full_blocks = static_cast<int64_t>(again.size() - 1) / 16 * 16;
  EXPECT_EQ(e->metrics().prefix_cache_hit_tokens - hits_before, full_blocks);
}

TEST(SpeculativeEngineTest, SmallPoolFallsBackWithoutLosingTokens) {
  // A pool barely larger than the requests: drafts are dropped when blocks run short and
  // requests get preempted; output still matches.
  const std::vector<std::vector<int32_t>> ps = prompts();
  auto plain = makeEngine({false, DraftSource::kNone, 1, 16, 40});
  const auto want = generate(*plain, ps, greedy(40), false);
  auto spec = makeEngine({true, DraftSource::kPromptLookup, 3, 16, 40});
  EXPECT_EQ(generate(*spec, ps, greedy(40), false), want);
  EXPECT_EQ(spec->metrics().kv_blocks_used, 0);
}

TEST(SpeculativeEngineTest, CancellingMidTreeFreesEverything) {
  const std::vector<std::vector<int32_t>> ps = prompts();
  for (DraftSource source : {DraftSource::kPromptLookup, DraftSource::kSelf}) {
    auto plain = makeEngine({});
    const auto want = generate(*plain, ps, greedy(40), false);
    auto e = makeEngine({true, source, 3});
    std::vector<RequestId> ids;
    for (const auto& p : ps) ids.push_back(*e->addRequest(p, greedy(40)));
    std::map<RequestId, std::vector<int32_t>> got;
    for (int step = 0; e->hasWork(); ++step) {
      if (step == 6)
        for (size_t i = 0; i < ids.size(); i += 3) e->cancel(ids[i]);
      StatusOr<std::vector<RequestOutput>> out = e->step();
      ASSERT_TRUE(out.ok()) << out.status().message();
      for (const RequestOutput& o : *out)
        got[o.id].insert(got[o.id].end(), o.token_ids.begin(), o.token_ids.end());
    }
    for (size_t i = 0; i < ids.size(); ++i)
      if (i % 3 != 0) EXPECT_EQ(got[ids[i]], want[i]) << "request " << i;
    EXPECT_GT(e->metrics().spec_trees, 0);
    EXPECT_EQ(e->metrics().kv_blocks_used, 0);
  }
}

TEST(SpeculativeEngineTest, TreesNeedTheTreeMaskArtifact) {
  EngineOptions o;
  o.speculative.source = DraftSource::kPromptLookup;
  o.speculative.max_branches = 2;
  StatusOr<std::unique_ptr<Engine>> e = Engine::create(tinyLlama(false), o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("tree_start"), std::string::npos) << e.status().message();
}

/// Joint histogram of the first two sampled tokens over `n` samples of one prompt.
std::vector<int64_t> firstTwoTokens(const SpecSetup& s, const std::vector<int32_t>& prompt, int n) {
  auto e = makeEngine(s);
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 6;
  p.max_tokens = 3;  // a draft of one token can ride on the second token's step
  std::vector<int64_t> hist(kVocab * kVocab, 0);
  std::map<RequestId, std::vector<int32_t>> tokens;
  constexpr int kPerRequest = 50;  // under adaptive.max_batch_size: speculation stays on
  for (int i = 0; i < n / kPerRequest; ++i) {
    p.seed = 1000 + static_cast<uint64_t>(i) * kPerRequest + (s.source == DraftSource::kNone ? 0 : 7777777);
    EXPECT_TRUE(e->addRequest(prompt, p, 0, kPerRequest).ok());
    while (e->hasWork()) {
      StatusOr<std::vector<RequestOutput>> step = e->step();
      EXPECT_TRUE(step.ok());
      if (!step.ok()) return hist;
      for (const RequestOutput& o : *step) {
        std::vector<int32_t>& t = tokens[o.id];
        t.insert(t.end(), o.token_ids.begin(), o.token_ids.end());
        if (o.finished()) {
          ++hist[t[0] * kVocab + t[1]];
          tokens.erase(o.id);
        }
      }
    }
  }
  if (s.source != DraftSource::kNone) EXPECT_GT(e->metrics().spec_trees, n / 4);
  return hist;
}

TEST(SpeculativeEngineTest, SampledFirstTwoTokensFollowTheTargetDistribution) {
  // The prompt ends in a phrase seen before, so prompt lookup drafts the second token.
  std::vector<int32_t> prompt = {3, 9, 27, 17, 50, 3, 9, 27, 17, 50, 3, 9};
  const int n = 12000;
  const std::vector<int64_t> plain = firstTwoTokens({}, prompt, n);
  const std::vector<int64_t> spec =
      firstTwoTokens({true, DraftSource::kPromptLookup, 3}, prompt, n);
  for (const auto& [name, hist] :
       {std::make_pair("prompt lookup", spec),
        std::make_pair("self", firstTwoTokens({true, DraftSource::kSelf}, prompt, n))}) {
    const ChiSquareResult r = chiSquareHomogeneity(plain, hist);
    std::printf("chi-square first two tokens, %s: statistic %.1f dof %lld p %.3g\n", name,
                r.statistic, static_cast<long long>(r.dof), r.p_value);
    EXPECT_GT(r.dof, 5);
    EXPECT_GT(r.p_value, 1e-3) << name;
  }
}

}  // namespace
}  // namespace ingot
