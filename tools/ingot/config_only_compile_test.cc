//===- config_only_compile_test.cc - artifacts from a config alone run like checkpoints' ===//
//
// `ingot compile --dummy-weights` of a Hugging Face config alone and of the checkpoint it
// came from declare the same tensors, so the runtime fills both with the same seeded values:
// the two artifacts give bit-identical logits on the CPU backend, and those logits are
// finite and far from flat.
//
//===----------------------------------------------------------------------===//
#include "compiler/driver/CompileCommand.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <sstream>
#include <unistd.h>

#include <gtest/gtest.h>

#include "core/artifact/artifact_reader.h"
#include "runtime/generate/sequence_runner.h"

namespace ingot::compiler {
namespace {

namespace fs = std::filesystem;

std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "/config-only-" + std::to_string(::getpid()) + "-" + name;
}

/// Compiles `input` with --dummy-weights --seed `seed` (no CUDA kernels) to `output`.
void compileDummy(const std::string &input, uint64_t seed, const std::string &output) {
  CompileOptions options;
  options.input = input;
  options.output = output;
  options.dummyWeights = true;
  options.seed = seed;
  options.cudaTargets = "none";
  std::ostringstream out, err;
  fs::remove(output);
  ASSERT_EQ(runCompile(options, out, err), 0) << input << ": " << err.str();
}

/// The logits of every token of `tokens`, run as one sequence on the CPU backend.
std::vector<float> allLogits(const std::string &path, const std::vector<int32_t> &tokens,
                             int64_t *vocab) {
  StatusOr<Artifact> artifact = Artifact::open(path);
  EXPECT_TRUE(artifact.ok()) << path << ": " << artifact.status().message();
  if (!artifact.ok())
    return {};
  SequenceRunnerOptions options;
  options.num_threads = 1;
  options.max_tokens = 64;
  StatusOr<std::unique_ptr<SequenceRunner>> runner = SequenceRunner::create(*artifact, options);
  EXPECT_TRUE(runner.ok()) << runner.status().message();
  if (!runner.ok())
    return {};
  *vocab = (*runner)->vocabSize();
  // Poisoned: a row the backend does not write stays NaN and fails the checks below.
  std::vector<float> logits(tokens.size() * *vocab, std::nanf(""));
  Status status = (*runner)->append(tokens, /*all_rows=*/true, &logits);
  EXPECT_TRUE(status.ok()) << status.message();
  return logits;
}

std::vector<int32_t> randomTokens(int64_t vocab, size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> tokens(count);
  for (int32_t &t : tokens)
    t = pick(rng);
  return tokens;
}

class ConfigOnlyCompile : public testing::TestWithParam<const char *> {};

TEST_P(ConfigOnlyCompile, GivesTheCheckpointsDummyLogitsAndTheyAreNotFlat) {
  const std::string model = GetParam();
  const std::string checkpoint = std::string(INGOT_TINY_DATA_DIR) + "/" + model;
  // config.json alone in a directory of its own (no tokenizer, no weights).
  const std::string configDir = tempPath(model + "-config");
  fs::remove_all(configDir);
  fs::create_directories(configDir);
  fs::copy_file(checkpoint + "/config.json", configDir + "/config.json");

  const uint64_t weightSeed = std::random_device{}();
  SCOPED_TRACE("weight seed " + std::to_string(weightSeed));
  const std::string fromCheckpoint = tempPath(model + "-checkpoint.ingot");
  const std::string fromConfig = tempPath(model + "-config.ingot");
  // Both bf16: --dtype's default for a checkpoint, the config's dtype for the config.
  ASSERT_NO_FATAL_FAILURE(compileDummy(checkpoint, weightSeed, fromCheckpoint));
  ASSERT_NO_FATAL_FAILURE(compileDummy(configDir, weightSeed, fromConfig));

  const uint32_t tokenSeed = std::random_device{}();
  SCOPED_TRACE("token seed " + std::to_string(tokenSeed));
  int64_t vocab = 0, vocabConfig = 0;
  const std::vector<int32_t> tokens = randomTokens(49152, 12, tokenSeed);
  std::vector<float> expected = allLogits(fromCheckpoint, tokens, &vocab);
  std::vector<float> got = allLogits(fromConfig, tokens, &vocabConfig);
  ASSERT_EQ(vocab, 49152);
  ASSERT_EQ(vocabConfig, vocab);
  ASSERT_EQ(got.size(), expected.size());
  ASSERT_EQ(got.size(), tokens.size() * static_cast<size_t>(vocab));
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(std::memcmp(&got[i], &expected[i], sizeof(float)), 0)
        << "logit " << i << ": " << got[i] << " vs " << expected[i];

  // Not flat: every row spreads well beyond float noise, and rows differ by token. (Not by
  // their argmax: random weights can make one token every position's favourite, as a seed
  // of the tiny Qwen2 did.)
  double smallestSpread = 1e30, largestRowChange = 0.0;
  for (size_t row = 0; row < tokens.size(); ++row) {
    const float *r = got.data() + row * vocab;
    double mean = 0.0, squares = 0.0, change = 0.0;
    for (int64_t v = 0; v < vocab; ++v) {
      ASSERT_TRUE(std::isfinite(r[v])) << "row " << row << " logit " << v;
      mean += r[v];
      change = std::max(change, static_cast<double>(std::fabs(r[v] - got[v])));
    }
    mean /= static_cast<double>(vocab);
    for (int64_t v = 0; v < vocab; ++v)
      squares += (r[v] - mean) * (r[v] - mean);
    const double stddev = std::sqrt(squares / static_cast<double>(vocab));
    EXPECT_GT(stddev, 0.2) << "row " << row << " is nearly flat";
    smallestSpread = std::min(smallestSpread, stddev);
    largestRowChange = std::max(largestRowChange, change);
  }
  EXPECT_GT(largestRowChange, 0.1 * smallestSpread)
      << "every position gives the first position's logits";
}

INSTANTIATE_TEST_SUITE_P(Tiny, ConfigOnlyCompile, testing::Values("llama", "qwen2"));

TEST(ConfigOnlyCompileSeed, AnotherSeedGivesOtherWeights) {
  const std::string config = std::string(INGOT_TINY_DATA_DIR) + "/llama/config.json";
  const std::string a = tempPath("seed-a.ingot"), b = tempPath("seed-b.ingot");
  ASSERT_NO_FATAL_FAILURE(compileDummy(config, 1, a));
  ASSERT_NO_FATAL_FAILURE(compileDummy(config, 2, b));
  const std::vector<int32_t> tokens = randomTokens(49152, 4, std::random_device{}());
  int64_t vocab = 0;
  std::vector<float> la = allLogits(a, tokens, &vocab), lb = allLogits(b, tokens, &vocab);
  ASSERT_EQ(la.size(), lb.size());
  ASSERT_FALSE(la.empty());
  size_t differing = 0;
  for (size_t i = 0; i < la.size(); ++i)
    differing += la[i] != lb[i];
  EXPECT_GT(differing, la.size() / 2);
}

} // namespace
} // namespace ingot::compiler
