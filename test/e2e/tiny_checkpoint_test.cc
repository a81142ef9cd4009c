// The tiny random Llama, Qwen2, Qwen3 and Gemma 3 (test/data/tiny,
// scripts/make_tiny_checkpoints.py), each
// compiled from its Hugging Face directory and from llama.cpp's GGUF conversion: both
// importers give the same logits, and those match transformers' float32 goldens.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/artifact/artifact_reader.h"
#include "runtime/generate/sequence_runner.h"

namespace ingot {
namespace {

struct TinyCase {
  std::vector<int32_t> ids;
  std::vector<std::vector<int32_t>> top_ids;      // [position][5]
  std::vector<std::vector<double>> top_logits;    // [position][5]
  std::vector<int32_t> fixed_ids;
  std::vector<std::vector<double>> fixed_logits;  // [position][fixed_ids.size()]
};

std::vector<TinyCase> loadGoldens(const std::string& model) {
  std::ifstream in(INGOT_TINY_DIR "/goldens.json");
  EXPECT_TRUE(in) << "cannot read " << INGOT_TINY_DIR "/goldens.json";
  nlohmann::json j = nlohmann::json::parse(in);
  std::vector<TinyCase> cases;
  for (const auto& c : j.at("models").at(model)) {
    TinyCase t;
    t.ids = c.at("ids").get<std::vector<int32_t>>();
    t.top_ids = c.at("top_ids").get<std::vector<std::vector<int32_t>>>();
    t.top_logits = c.at("top_logits").get<std::vector<std::vector<double>>>();
    t.fixed_ids = c.at("fixed_ids").get<std::vector<int32_t>>();
    t.fixed_logits = c.at("fixed_logits").get<std::vector<std::vector<double>>>();
    cases.push_back(std::move(t));
  }
  return cases;
}

/// The artifact the ctest fixture compiled from `model`'s directory ("dir") or GGUF ("gguf").
std::string artifactPath(const std::string& model, const std::string& source) {
  return std::string(INGOT_TINY_ARTIFACTS) + "/tiny-" + model + "-" + source + ".ingot";
}

/// Teacher-forced logits of every position of every golden sequence, concatenated.
std::vector<std::vector<float>> runAll(const std::string& path, const std::vector<TinyCase>& cases,
                                       int64_t* vocab) {
  std::vector<std::vector<float>> out;
  StatusOr<Artifact> artifact = Artifact::open(path);
  EXPECT_TRUE(artifact.ok()) << path << ": " << artifact.status().message()
                             << " (the tiny_compile_* ctest fixtures write it)";
  if (!artifact.ok()) return out;
  SequenceRunnerOptions options;
  options.max_tokens = 64;
  StatusOr<std::unique_ptr<SequenceRunner>> runner = SequenceRunner::create(*artifact, options);
  EXPECT_TRUE(runner.ok()) << runner.status().message();
  if (!runner.ok()) return out;
  *vocab = (*runner)->vocabSize();
  for (const TinyCase& c : cases) {
    (*runner)->reset();
    std::vector<float> logits(c.ids.size() * *vocab, std::nanf(""));
    EXPECT_TRUE((*runner)->append(c.ids, /*all_rows=*/true, &logits).ok());
    out.push_back(std::move(logits));
  }
  return out;
}

class TinyCheckpoint : public testing::TestWithParam<const char*> {};

TEST_P(TinyCheckpoint, DirectoryAndGgufGiveTheSameLogits) {
  const std::string model = GetParam();
  std::vector<TinyCase> cases = loadGoldens(model);
  int64_t vocab = 0, vocabGguf = 0;
  auto fromDir = runAll(artifactPath(model, "dir"), cases, &vocab);
  auto fromGguf = runAll(artifactPath(model, "gguf"), cases, &vocabGguf);
  ASSERT_EQ(fromDir.size(), cases.size());
  ASSERT_EQ(fromGguf.size(), cases.size());
  ASSERT_EQ(vocab, 49152);
  ASSERT_EQ(vocabGguf, vocab);
  // Both importers read the same numbers, so the logits are bit-identical. llama3 too: its
  // directory gives rope_scaling parameters, its GGUF the factors llama.cpp's converter
  // computed from them in f32; the runtime turns the parameters into the same f32 factors
  // (llama3RopeFactor) and divides both alike.
  const double tolerance = 0.0;
  double worst = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_EQ(fromDir[i].size(), fromGguf[i].size());
    for (size_t pos = 0; pos < cases[i].ids.size(); ++pos) {
      const float* a = fromDir[i].data() + pos * vocab;
      const float* b = fromGguf[i].data() + pos * vocab;
      double largest = 0;
      for (int64_t v = 0; v < vocab; ++v) largest = std::max(largest, std::fabs(double(a[v])));
      for (int64_t v = 0; v < vocab; ++v) {
        ASSERT_TRUE(std::isfinite(a[v]) && std::isfinite(b[v])) << "sequence " << i;
        double diff = std::fabs(double(a[v]) - double(b[v]));
        worst = std::max(worst, diff / largest);
        ASSERT_LE(diff, tolerance * largest)
            << model << " sequence " << i << " position " << pos << " token " << v;
      }
    }
  }
  std::cout << "[ tiny ] " << model << ": directory vs GGUF worst difference " << worst
            << " of the largest logit\n";
}

TEST_P(TinyCheckpoint, MatchesTransformers) {
  const std::string model = GetParam();
  std::vector<TinyCase> cases = loadGoldens(model);
  for (const char* source : {"dir", "gguf"}) {
    int64_t vocab = 0;
    auto logits = runAll(artifactPath(model, source), cases, &vocab);
    ASSERT_EQ(logits.size(), cases.size());
    double worst = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
      const TinyCase& c = cases[i];
      ASSERT_EQ(c.top_ids.size(), c.ids.size());
      for (size_t pos = 0; pos < c.ids.size(); ++pos) {
        const float* row = logits[i].data() + pos * vocab;
        // Tolerance: 1e-4 of the largest logit at this position (the reference's top-1).
        const double largest = std::fabs(c.top_logits[pos][0]);
        auto check = [&](int32_t id, double expected) {
          double diff = std::fabs(row[id] - expected);
          worst = std::max(worst, diff / largest);
          EXPECT_LE(diff, 1e-4 * largest) << model << " (" << source << ") sequence " << i
                                          << " position " << pos << " token " << id;
        };
        for (size_t k = 0; k < c.top_ids[pos].size(); ++k) check(c.top_ids[pos][k], c.top_logits[pos][k]);
        for (size_t k = 0; k < c.fixed_ids.size(); ++k) check(c.fixed_ids[k], c.fixed_logits[pos][k]);
        EXPECT_EQ(std::max_element(row, row + vocab) - row, c.top_ids[pos][0])
            << model << " (" << source << ") sequence " << i << " position " << pos;
      }
    }
    std::cout << "[ tiny ] " << model << " (" << source << "): worst logit error " << worst
              << " of the largest logit\n";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, TinyCheckpoint,
                         testing::Values("llama", "qwen2", "qwen3", "gemma3", "llama3", "phi3"));

}  // namespace
}  // namespace ingot
