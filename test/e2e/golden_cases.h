// Golden outputs of Hugging Face transformers (scripts/make_goldens.py) and what the
// real-model tests do with them: load the cases, open the artifact a ctest fixture
// compiled, run greedy continuations.
#pragma once

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/artifact/artifact_reader.h"
#include "runtime/engine/engine.h"
#include "runtime/generate/sampler.h"
#include "runtime/generate/sequence_runner.h"

namespace ingot {

struct GoldenCase {
  std::string prompt;
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> greedy;
  std::vector<std::vector<int32_t>> top_ids;     // [position][5]
  std::vector<std::vector<double>> top_logits;   // [position][5]
};

inline std::vector<GoldenCase> loadGoldens(const char* path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
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

/// Opens the artifact the ctest fixture compiled; null when it was not compiled.
inline std::unique_ptr<Artifact> openOrSkip(const char* path) {
  std::ifstream probe(path);
  if (!probe) return nullptr;
  StatusOr<Artifact> artifact = Artifact::open(path);
  EXPECT_TRUE(artifact.ok()) << artifact.status().message();
  if (!artifact.ok()) return nullptr;
  return std::make_unique<Artifact>(std::move(artifact).value());
}

inline std::unique_ptr<SequenceRunner> makeRunner(const Artifact& artifact) {
  SequenceRunnerOptions options;
  options.max_tokens = 512;
  StatusOr<std::unique_ptr<SequenceRunner>> runner = SequenceRunner::create(artifact, options);
  EXPECT_TRUE(runner.ok()) << runner.status().message();
  return runner.ok() ? std::move(runner).value() : nullptr;
}

/// Greedy continuation of `prompt` for `n` tokens, one decode step per token.
inline std::vector<int32_t> greedyContinuation(SequenceRunner& runner,
                                               const std::vector<int32_t>& prompt, size_t n) {
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

/// Teacher-forced logits of prompt + greedy continuation against the reference's top-5 at
/// every position, within `tolerance` of the position's largest logit; returns the worst
/// error seen (as a fraction of that logit).
inline double checkTeacherForcedTop5(SequenceRunner& runner, const GoldenCase& c,
                                     double tolerance) {
  std::vector<int32_t> sequence = c.prompt_ids;
  sequence.insert(sequence.end(), c.greedy.begin(), c.greedy.end());
  EXPECT_EQ(c.top_ids.size(), sequence.size());
  if (c.top_ids.size() != sequence.size()) return 1.0;
  runner.reset();
  std::vector<float> logits;
  EXPECT_TRUE(runner.append(sequence, /*all_rows=*/true, &logits).ok());
  const int64_t vocab = runner.vocabSize();
  double worst = 0;
  for (size_t pos = 0; pos < sequence.size(); ++pos) {
    const float* row = logits.data() + pos * vocab;
    const double top = std::fabs(c.top_logits[pos][0]);
    for (size_t k = 0; k < c.top_ids[pos].size(); ++k) {
      const double diff = std::fabs(row[c.top_ids[pos][k]] - c.top_logits[pos][k]);
      worst = std::max(worst, diff / top);
      EXPECT_LE(diff, tolerance * top) << "prompt '" << c.prompt << "' position " << pos
                                       << " token " << c.top_ids[pos][k];
      if (diff > tolerance * top) return worst;
    }
  }
  return worst;
}

/// Whether our greedy tokens equal the reference's, compared up to the first position
/// where the reference's top two logits are within 1e-3 (either choice is right there, and
/// everything after depends on it). Returns the tokens compared.
inline size_t expectGreedyMatches(const std::vector<int32_t>& ours, const GoldenCase& c) {
  for (size_t i = 0; i < c.greedy.size(); ++i) {
    const size_t pos = c.prompt_ids.size() + i - 1;
    if (c.top_logits[pos][0] - c.top_logits[pos][1] < 1e-3) return i;
    EXPECT_EQ(ours[i], c.greedy[i]) << "prompt '" << c.prompt << "' token " << i;
    if (ours[i] != c.greedy[i]) return i;
  }
  return c.greedy.size();
}

/// Greedy tokens of every prompt through the engine, all requests batched together, prompt
/// i generating max_tokens[i] tokens (end-of-sequence ignored); the engine's metrics into
/// `m` when given.
inline std::vector<std::vector<int32_t>> engineGreedyRuns(
    const Artifact& artifact, const std::vector<std::vector<int32_t>>& prompts,
    const std::vector<int32_t>& max_tokens, const SpeculativeOptions& spec,
    EngineMetrics* m = nullptr) {
  EngineOptions o;
  o.num_threads = 2;
  o.num_kv_blocks = 256;
  o.eos_token_ids = std::vector<int32_t>{};  // compare whole continuations
  o.speculative = spec;
  StatusOr<std::unique_ptr<Engine>> engine = Engine::create(artifact, o);
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  if (!engine.ok()) return {};
  std::vector<std::vector<int32_t>> out(prompts.size());
  std::map<RequestId, size_t> index;
  for (size_t i = 0; i < prompts.size(); ++i) {
    SamplingParams p;
    p.max_tokens = max_tokens[i];
    StatusOr<RequestId> id = (*engine)->addRequest(prompts[i], p);
    EXPECT_TRUE(id.ok());
    if (id.ok()) index[*id] = i;
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
  if (m) *m = (*engine)->metrics();
  return out;
}

/// engineGreedyRuns over the golden cases, each generating its reference's length.
inline std::vector<std::vector<int32_t>> engineGreedy(const Artifact& artifact,
                                                      const std::vector<GoldenCase>& cases,
                                                      const SpeculativeOptions& spec,
                                                      EngineMetrics* m) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int32_t> max_tokens;
  for (const GoldenCase& c : cases) {
    prompts.push_back(c.prompt_ids);
    max_tokens.push_back(static_cast<int32_t>(c.greedy.size()));
  }
  return engineGreedyRuns(artifact, prompts, max_tokens, spec, m);
}

}  // namespace ingot
