// End to end on the real model: SmolLM2-135M-Instruct compiled from its GGUF, run on the CPU
// backend, against golden outputs of Hugging Face transformers (scripts/make_goldens.py).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/engine/engine.h"
#include "test/e2e/golden_cases.h"

namespace ingot {
namespace {

std::vector<GoldenCase> loadGoldens() { return ingot::loadGoldens(INGOT_GOLDENS_JSON); }

#define SKIP_WITHOUT(artifact, path)                                                      \
  if (!(artifact))                                                                        \
  GTEST_SKIP() << path << " was not compiled (set INGOT_SMOLLM2_GGUF; scripts/test.sh " \
                          "does)"

TEST(SmolLM2Golden, TeacherForcedTop5LogitsMatchTransformersInF32) {
  auto artifact = openOrSkip(INGOT_SMOLLM2_F32);
  SKIP_WITHOUT(artifact, INGOT_SMOLLM2_F32);
  auto runner = makeRunner(*artifact);
  ASSERT_TRUE(runner);
  double worst = 0;
  // Tolerance: 1e-3 of the largest logit at each position (the reference's top-1).
  for (const GoldenCase& c : loadGoldens())
    worst = std::max(worst, checkTeacherForcedTop5(*runner, c, 1e-3));
  std::cout << "[ golden ] worst top-5 logit error: " << worst << " of the largest logit\n";
}

TEST(SmolLM2Golden, FreeRunningGreedyMatchesTransformersInF32) {
  auto artifact = openOrSkip(INGOT_SMOLLM2_F32);
  SKIP_WITHOUT(artifact, INGOT_SMOLLM2_F32);
  auto runner = makeRunner(*artifact);
  ASSERT_TRUE(runner);
  for (const GoldenCase& c : loadGoldens())
    expectGreedyMatches(greedyContinuation(*runner, c.prompt_ids, c.greedy.size()), c);
}

TEST(SmolLM2Golden, Bf16KeepsTheFirst16GreedyTokensOnAtLeast7Of8Prompts) {
  auto artifact = openOrSkip(INGOT_SMOLLM2_BF16);
  SKIP_WITHOUT(artifact, INGOT_SMOLLM2_BF16);
  auto runner = makeRunner(*artifact);
  ASSERT_TRUE(runner);
  int same = 0, total = 0;
  for (const GoldenCase& c : loadGoldens()) {
    std::vector<int32_t> ours = greedyContinuation(*runner, c.prompt_ids, 16);
    same += std::equal(ours.begin(), ours.end(), c.greedy.begin());
    ++total;
  }
  std::cout << "[ golden ] bf16: " << same << "/" << total << " prompts keep 16 greedy tokens\n";
  EXPECT_GE(same * 8, total * 7);
}


TEST(SmolLM2Golden, SpeculationKeepsGreedyOutputTokenForToken) {
  // f32: against transformers' goldens as the plain decode test does; bf16: against the
  // engine without speculation. Every draft source: prompt-lookup chains and 3-branch
  // trees, self-speculation (the artifacts carry a 6-layer draft program) and a draft
  // model (the other artifact).
  const std::vector<GoldenCase> cases = loadGoldens();
  for (const char* path : {INGOT_SMOLLM2_F32, INGOT_SMOLLM2_BF16}) {
    auto artifact = openOrSkip(path);
    SKIP_WITHOUT(artifact, path);
    EngineMetrics m;
    const auto plain = engineGreedy(*artifact, cases, SpeculativeOptions{}, &m);
    if (path == std::string(INGOT_SMOLLM2_F32)) {
      for (size_t c = 0; c < cases.size(); ++c)
        for (size_t i = 0; i < cases[c].greedy.size(); ++i) {
          const size_t pos = cases[c].prompt_ids.size() + i - 1;
          if (cases[c].top_logits[pos][0] - cases[c].top_logits[pos][1] < 1e-3) break;
          ASSERT_EQ(plain[c][i], cases[c].greedy[i]) << "prompt '" << cases[c].prompt << "'";
        }
    }
    // The other artifact (f32 for bf16 and back) is a draft model with the same tokenizer.
    auto other = openOrSkip(path == std::string(INGOT_SMOLLM2_F32) ? INGOT_SMOLLM2_BF16
                                                                   : INGOT_SMOLLM2_F32);
    ASSERT_TRUE(other);
    struct Source {
      const char* name;
      int32_t branches;
    };
    for (const Source& s : {Source{"prompt-lookup", 1}, Source{"prompt-lookup", 3},
                            Source{"self", 1}, Source{"draft-model", 1},
                            Source{"draft-model", 3}}) {
      StatusOr<SpeculativeOptions> spec = speculativeOptions(s.name, 8, s.branches);
      ASSERT_TRUE(spec.ok());
      spec->draft = other.get();
      EXPECT_EQ(engineGreedy(*artifact, cases, *spec, &m), plain)
          << path << " with " << s.name << ", " << s.branches << " branch(es)";
      std::cout << "[ golden ] " << path << ", " << s.name << " x" << s.branches << ": "
                << m.spec_trees << " trees, " << m.spec_accepted_tokens
                << " draft tokens accepted, " << m.steps << " target passes for "
                << m.generation_tokens << " tokens\n";
      EXPECT_GT(m.spec_trees, 0);
    }
  }
}

}  // namespace
}  // namespace ingot
