// End to end on the real model: SmolLM2-135M-Instruct compiled from its GGUF, run on the CPU
// backend, against golden outputs of Hugging Face transformers (scripts/make_goldens.py).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/artifact/artifact_reader.h"
#include "runtime/engine/engine.h"
#include "runtime/generate/sampler.h"
#include "runtime/generate/sequence_runner.h"

namespace ingot {
namespace {

struct GoldenCase {
  std::string prompt;
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> greedy;
  std::vector<std::vector<int32_t>> top_ids;     // [position][5]
  std::vector<std::vector<double>> top_logits;   // [position][5]
};

std::vector<GoldenCase> loadGoldens() {
  std::ifstream in(INGOT_GOLDENS_JSON);
  EXPECT_TRUE(in) << "cannot read " << INGOT_GOLDENS_JSON;
  nlohmann::json j = nlohmann::json::parse(in);
  std::vector<GoldenCase> cases;
  for (const auto& c : j.at("cases")) {
    GoldenCase g;
    g.prompt = c.at("prompt").get<std::string>();
    g.prompt_ids = c.at("prompt_ids").get<std::vector<int32_t>>();
    g.greedy = c.at("greedy").get<std::vector<int32_t>>();
    g.top_ids = c.at("top_ids").get<std::vector<std::vector<int32_t>>>();
    g.top_logits = c.at("top_logits").get<std::vector<std::vector<double>>>();
    cases.push_back(std::move(g));
  }
  return cases;
}

/// Opens the artifact the ctest fixture compiled, or skips the test saying why.
std::unique_ptr<Artifact> openOrSkip(const char* path) {
  std::ifstream probe(path);
  if (!probe) return nullptr;
  StatusOr<Artifact> artifact = Artifact::open(path);
  EXPECT_TRUE(artifact.ok()) << artifact.status().message();
  if (!artifact.ok()) return nullptr;
  return std::make_unique<Artifact>(std::move(artifact).value());
}

#define SKIP_WITHOUT(artifact, path)                                                      \
  if (!(artifact))                                                                        \
  GTEST_SKIP() << path << " was not compiled (set INGOT_SMOLLM2_GGUF; scripts/test.sh " \
                          "does)"

std::unique_ptr<SequenceRunner> makeRunner(const Artifact& artifact) {
  SequenceRunnerOptions options;
  options.max_tokens = 512;
  StatusOr<std::unique_ptr<SequenceRunner>> runner = SequenceRunner::create(artifact, options);
  EXPECT_TRUE(runner.ok()) << runner.status().message();
  return runner.ok() ? std::move(runner).value() : nullptr;
}

/// Greedy continuation of `prompt` for `n` tokens, one decode step per token.
std::vector<int32_t> greedyContinuation(SequenceRunner& runner, const std::vector<int32_t>& prompt,
                                        size_t n) {
  runner.reset();
  std::vector<float> logits;
  EXPECT_TRUE(runner.append(prompt, false, &logits).ok());
  std::vector<int32_t> out;
  while (out.size() < n) {
    out.push_back(argmax(logits.data(), runner.vocabSize()));
    if (out.size() < n) EXPECT_TRUE(runner.append({out.back()}, false, &logits).ok());
  }
  return out;
}

TEST(SmolLM2Golden, TeacherForcedTop5LogitsMatchTransformersInF32) {
  auto artifact = openOrSkip(INGOT_SMOLLM2_F32);
  SKIP_WITHOUT(artifact, INGOT_SMOLLM2_F32);
  auto runner = makeRunner(*artifact);
  ASSERT_TRUE(runner);
  double worst = 0;
  for (const GoldenCase& c : loadGoldens()) {
    std::vector<int32_t> sequence = c.prompt_ids;
    sequence.insert(sequence.end(), c.greedy.begin(), c.greedy.end());
    ASSERT_EQ(c.top_ids.size(), sequence.size());
    runner->reset();
    std::vector<float> logits;
    ASSERT_TRUE(runner->append(sequence, /*all_rows=*/true, &logits).ok());
    const int64_t vocab = runner->vocabSize();
    for (size_t pos = 0; pos < sequence.size(); ++pos) {
      const float* row = logits.data() + pos * vocab;
      // Tolerance: 1e-3 of the largest logit at this position (the reference's top-1).
      const double tolerance = 1e-3 * std::fabs(c.top_logits[pos][0]);
      for (size_t k = 0; k < c.top_ids[pos].size(); ++k) {
        double diff = std::fabs(row[c.top_ids[pos][k]] - c.top_logits[pos][k]);
        worst = std::max(worst, diff / std::fabs(c.top_logits[pos][0]));
        ASSERT_LE(diff, tolerance) << "prompt '" << c.prompt << "' position " << pos
                                   << " token " << c.top_ids[pos][k];
      }
    }
  }
  std::cout << "[ golden ] worst top-5 logit error: " << worst << " of the largest logit\n";
}

TEST(SmolLM2Golden, FreeRunningGreedyMatchesTransformersInF32) {
  auto artifact = openOrSkip(INGOT_SMOLLM2_F32);
  SKIP_WITHOUT(artifact, INGOT_SMOLLM2_F32);
  auto runner = makeRunner(*artifact);
  ASSERT_TRUE(runner);
  for (const GoldenCase& c : loadGoldens()) {
    std::vector<int32_t> ours = greedyContinuation(*runner, c.prompt_ids, c.greedy.size());
    for (size_t i = 0; i < c.greedy.size(); ++i) {
      // Where the reference's top two are within 1e-3 either choice is right, and
      // everything after depends on it: stop comparing there.
      const size_t pos = c.prompt_ids.size() + i - 1;
      if (c.top_logits[pos][0] - c.top_logits[pos][1] < 1e-3) break;
      ASSERT_EQ(ours[i], c.greedy[i]) << "prompt '" << c.prompt << "' token " << i;
    }
  }
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

/// Greedy tokens of every golden prompt through the engine, all requests batched together.
std::vector<std::vector<int32_t>> engineGreedy(const Artifact& artifact,
                                               const std::vector<GoldenCase>& cases,
                                               const SpeculativeOptions& spec, EngineMetrics* m) {
  EngineOptions o;
  o.num_threads = 2;
  o.num_kv_blocks = 256;
  o.eos_token_ids = std::vector<int32_t>{};  // compare whole continuations
  o.speculative = spec;
  StatusOr<std::unique_ptr<Engine>> engine = Engine::create(artifact, o);
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  if (!engine.ok()) return {};
  std::vector<std::vector<int32_t>> out(cases.size());
  std::map<RequestId, size_t> index;
  for (size_t i = 0; i < cases.size(); ++i) {
    SamplingParams p;
    p.max_tokens = static_cast<int32_t>(cases[i].greedy.size());
    StatusOr<RequestId> id = (*engine)->addRequest(cases[i].prompt_ids, p);
    EXPECT_TRUE(id.ok());
    index[*id] = i;
  }
  while ((*engine)->hasWork()) {
    StatusOr<std::vector<RequestOutput>> step = (*engine)->step();
    EXPECT_TRUE(step.ok()) << step.status().message();
    if (!step.ok()) break;
    for (const RequestOutput& r : *step) {
      std::vector<int32_t>& t = out[index.at(r.id)];
      t.insert(t.end(), r.token_ids.begin(), r.token_ids.end());
    }
  }
  *m = (*engine)->metrics();
  return out;
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
