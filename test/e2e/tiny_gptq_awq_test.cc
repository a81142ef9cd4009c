// The tiny GPTQ / AWQ checkpoints of test/data/tiny (scripts/make_tiny_gptq_awq.py): the
// int4 artifact that copies their integers gives the logits of the f32 artifact compiled
// from the script's own dequantized weights (within the f32 rounding of the kernels), and
// the f32 artifact compiled from the packed checkpoint gives them bit for bit.
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

/// The token sequences of the tiny Llama's goldens.
std::vector<std::vector<int32_t>> goldenSequences() {
  std::ifstream in(INGOT_TINY_DIR "/goldens.json");
  EXPECT_TRUE(in) << "cannot read " << INGOT_TINY_DIR "/goldens.json";
  std::vector<std::vector<int32_t>> out;
  if (!in) return out;
  nlohmann::json j = nlohmann::json::parse(in);
  for (const auto& c : j.at("models").at("llama"))
    out.push_back(c.at("ids").get<std::vector<int32_t>>());
  return out;
}

/// Teacher-forced logits of every position of every sequence, concatenated (NaN-poisoned).
std::vector<float> logitsOf(const std::string& name,
                            const std::vector<std::vector<int32_t>>& seqs) {
  const std::string path = std::string(INGOT_TINY_ARTIFACTS) + "/tiny-" + name + ".ingot";
  std::vector<float> out;
  StatusOr<Artifact> artifact = Artifact::open(path);
  EXPECT_TRUE(artifact.ok()) << path << ": " << artifact.status().message()
                             << " (the tiny_packed_* ctest fixtures write it)";
  if (!artifact.ok()) return out;
  SequenceRunnerOptions options;
  options.max_tokens = 64;
  StatusOr<std::unique_ptr<SequenceRunner>> runner = SequenceRunner::create(*artifact, options);
  EXPECT_TRUE(runner.ok()) << runner.status().message();
  if (!runner.ok()) return out;
  const int64_t vocab = (*runner)->vocabSize();
  for (const auto& ids : seqs) {
    (*runner)->reset();
    std::vector<float> logits(ids.size() * vocab, std::nanf(""));
    EXPECT_TRUE((*runner)->append(ids, /*all_rows=*/true, &logits).ok());
    out.insert(out.end(), logits.begin(), logits.end());
  }
  return out;
}

class TinyPacked : public testing::TestWithParam<const char*> {};

TEST_P(TinyPacked, Int4ArtifactMatchesTheDequantizedReference) {
  const std::string model = GetParam();
  auto seqs = goldenSequences();
  ASSERT_FALSE(seqs.empty());
  std::vector<float> int4 = logitsOf(model + "-int4", seqs);
  std::vector<float> reference = logitsOf(model + "-dequantized-f32", seqs);
  ASSERT_EQ(int4.size(), reference.size());
  ASSERT_FALSE(int4.empty());
  // Tolerance: 1e-5 of the largest logit of each row. The int4 kernel and the f32 GEMM add
  // the same exact products of two down_proj layers in another order (f32 rounding only).
  constexpr int64_t kVocab = 49152;
  double worst = 0;
  for (size_t row = 0; row * kVocab < int4.size(); ++row) {
    const float* a = int4.data() + row * kVocab;
    const float* b = reference.data() + row * kVocab;
    double largest = 0;
    for (int64_t v = 0; v < kVocab; ++v) largest = std::max(largest, std::fabs(double(b[v])));
    for (int64_t v = 0; v < kVocab; ++v) {
      ASSERT_TRUE(std::isfinite(a[v]) && std::isfinite(b[v])) << "row " << row;
      double diff = std::fabs(double(a[v]) - double(b[v]));
      worst = std::max(worst, diff / largest);
      ASSERT_LE(diff, 1e-5 * largest) << model << " row " << row << " token " << v;
    }
  }
  std::cout << "[ tiny ] " << model << ": int4 vs dequantized f32 worst difference " << worst
            << " of the largest logit\n";
}

TEST_P(TinyPacked, F32ArtifactEqualsTheDequantizedReferenceBitForBit) {
  const std::string model = GetParam();
  auto seqs = goldenSequences();
  std::vector<float> packed = logitsOf(model + "-f32", seqs);
  std::vector<float> reference = logitsOf(model + "-dequantized-f32", seqs);
  ASSERT_EQ(packed.size(), reference.size());
  ASSERT_FALSE(packed.empty());
  for (size_t i = 0; i < packed.size(); ++i)
    ASSERT_EQ(packed[i], reference[i]) << model << " logit " << i;
}

INSTANTIATE_TEST_SUITE_P(Formats, TinyPacked, testing::Values("gptq", "awq"));

}  // namespace
}  // namespace ingot
