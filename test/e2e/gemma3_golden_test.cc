// End to end on Gemma 3 270M's real weights (Q4_K_M GGUF, scripts/fetch_model.sh gemma3):
// compiled in f32, run on the CPU backend against transformers' float32 goldens
// (scripts/make_goldens.py), and its tokenizer against transformers' prompt ids.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/engine/engine.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/tokenizer_data.h"
#include "test/e2e/golden_cases.h"

namespace ingot {
namespace {

#define SKIP_WITHOUT_GEMMA3(artifact)                                                   \
  if (!(artifact))                                                                    \
  GTEST_SKIP() << INGOT_GEMMA3_F32 << " was not compiled (set INGOT_GEMMA3_GGUF; "    \
                                      "scripts/test.sh does)"

TEST(Gemma3Golden, TokenizerGivesTheReferencePromptIds) {
  auto artifact = openOrSkip(INGOT_GEMMA3_F32);
  SKIP_WITHOUT_GEMMA3(artifact);
  StatusOr<TokenizerData> data = tokenizerDataFromManifest(artifact->manifest().tokenizer());
  ASSERT_TRUE(data.ok()) << data.status().message();
  StatusOr<Tokenizer> tokenizer = Tokenizer::create(std::move(data).value());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().message();
  for (const GoldenCase& c : loadGoldens(INGOT_GEMMA3_GOLDENS))
    EXPECT_EQ(tokenizer->encode(c.prompt, /*addSpecial=*/true, /*parseSpecial=*/true),
              c.prompt_ids)
        << "prompt '" << c.prompt << "'";
}

TEST(Gemma3Golden, TeacherForcedTop5LogitsMatchTransformersInF32) {
  auto artifact = openOrSkip(INGOT_GEMMA3_F32);
  SKIP_WITHOUT_GEMMA3(artifact);
  auto runner = makeRunner(*artifact);
  ASSERT_TRUE(runner);
  double worst = 0;
  for (const GoldenCase& c : loadGoldens(INGOT_GEMMA3_GOLDENS))
    worst = std::max(worst, checkTeacherForcedTop5(*runner, c, 1e-3));
  std::cout << "[ golden ] gemma3: worst top-5 logit error " << worst
            << " of the largest logit\n";
}

TEST(Gemma3Golden, FreeRunningGreedyMatchesTransformersInF32) {
  auto artifact = openOrSkip(INGOT_GEMMA3_F32);
  SKIP_WITHOUT_GEMMA3(artifact);
  auto runner = makeRunner(*artifact);
  ASSERT_TRUE(runner);
  size_t compared = 0, total = 0;
  for (const GoldenCase& c : loadGoldens(INGOT_GEMMA3_GOLDENS)) {
    compared += expectGreedyMatches(greedyContinuation(*runner, c.prompt_ids, c.greedy.size()), c);
    total += c.greedy.size();
  }
  std::cout << "[ golden ] gemma3: " << compared << " of " << total
            << " greedy tokens compared (the rest follow a near-tie)\n";
}

TEST(Gemma3Golden, SpeculativeChainsKeepGreedyTreesAreRefused) {
  auto artifact = openOrSkip(INGOT_GEMMA3_F32);
  SKIP_WITHOUT_GEMMA3(artifact);
  const std::vector<GoldenCase> cases = loadGoldens(INGOT_GEMMA3_GOLDENS);
  EngineOptions o;
  o.num_threads = 2;
  o.num_kv_blocks = 256;
  o.eos_token_ids = std::vector<int32_t>{};
  // Trees: a sibling's KV slot is not its position, which a window mask would misread.
  StatusOr<SpeculativeOptions> tree = speculativeOptions("prompt-lookup", 8, 3);
  ASSERT_TRUE(tree.ok());
  o.speculative = *tree;
  StatusOr<std::unique_ptr<Engine>> refused = Engine::create(*artifact, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("sliding-window"), std::string::npos)
      << refused.status().message();
  // Chains verify through the window mask and keep the greedy tokens.
  StatusOr<SpeculativeOptions> chain = speculativeOptions("prompt-lookup", 8, 1);
  ASSERT_TRUE(chain.ok());
  EngineMetrics m;
  const std::vector<std::vector<int32_t>> out = engineGreedy(*artifact, cases, *chain, &m);
  ASSERT_EQ(out.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) expectGreedyMatches(out[i], cases[i]);
  EXPECT_GT(m.spec_trees, 0);
}

}  // namespace
}  // namespace ingot
