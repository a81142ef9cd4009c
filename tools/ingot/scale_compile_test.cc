// ingot.scale end to end: a module with scale steps, compiled by `ingot compile` and run on
// the CPU backend. Scaling the embeddings by 4 and then by 1/4 (both exact in f32) gives
// the unscaled module's logits bit for bit, though both steps run; scaling them by 0 makes
// every logit 0 (a zero residual stream stays zero through a Llama without biases). The CUDA kernel is checked against the CPU one under the SIMT emulator
// (test/gpu/fused_ops_test.cc).
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/driver/CompileCommand.h"
#include "core/artifact/artifact_reader.h"
#include "runtime/generate/sequence_runner.h"

namespace ingot::compiler {
namespace {

std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "/scale-" + std::to_string(::getpid()) + "-" + name;
}

/// examples/models/tiny_llama.mlir with `scales` (at least one) applied to the embeddings
/// in turn.
std::string tinyLlamaScaled(const std::vector<const char *> &scales) {
  std::ifstream in(std::string(INGOT_SOURCE_DIR) + "/examples/models/tiny_llama.mlir");
  std::stringstream text;
  text << in.rdbuf();
  std::string module = text.str();
  const std::string embedding = "%h0 = ingot.embedding ";
  const size_t at = module.find(embedding);
  EXPECT_NE(at, std::string::npos);
  if (at == std::string::npos) return module;
  std::string name = "%h0e0";
  module.replace(at, 3, name);
  const size_t end = module.find('\n', at);
  std::string ops;
  for (size_t i = 0; i < scales.size(); ++i) {
    const std::string next = i + 1 == scales.size() ? "%h0" : "%h0e" + std::to_string(i + 1);
    ops += "\n    " + next + " = ingot.scale " + name + " {factor = " + scales[i] +
           " : f32} : tensor<?x64xf32>";
    name = next;
  }
  module.insert(end, ops);
  return module;
}

/// Compiles `module` with --random-weights --seed 7 (no CUDA kernels) to `output`.
void compile(const std::string &module, const std::string &name, const std::string &output) {
  const std::string input = tempPath(name + ".mlir");
  std::ofstream(input) << module;
  CompileOptions options;
  options.input = input;
  options.output = output;
  options.randomWeights = true;
  options.seed = 7;
  options.cudaTargets = "none";
  std::ostringstream out, err;
  std::filesystem::remove(output);
  ASSERT_EQ(runCompile(options, out, err), 0) << name << ": " << err.str();
}

/// The logits of every token of `tokens`, run as one sequence on the CPU backend.
std::vector<float> allLogits(const std::string &path, const std::vector<int32_t> &tokens) {
  StatusOr<Artifact> artifact = Artifact::open(path);
  EXPECT_TRUE(artifact.ok()) << path << ": " << artifact.status().message();
  if (!artifact.ok()) return {};
  SequenceRunnerOptions options;
  options.num_threads = 1;
  options.max_tokens = 32;
  StatusOr<std::unique_ptr<SequenceRunner>> runner = SequenceRunner::create(*artifact, options);
  EXPECT_TRUE(runner.ok()) << runner.status().message();
  if (!runner.ok()) return {};
  std::vector<float> logits(tokens.size() * (*runner)->vocabSize(), std::nanf(""));
  Status status = (*runner)->append(tokens, /*all_rows=*/true, &logits);
  EXPECT_TRUE(status.ok()) << status.message();
  return logits;
}

size_t countSteps(const std::string &path, schema::OpKind kind) {
  StatusOr<Artifact> artifact = Artifact::open(path);
  EXPECT_TRUE(artifact.ok());
  if (!artifact.ok()) return 0;
  size_t n = 0;
  for (const schema::ProgramDef *program : *artifact->manifest().programs())
    for (const schema::ProgramStepDef *step : *program->steps()) n += step->op() == kind;
  return n;
}

TEST(ScaleCompile, ScalingByFourThenAQuarterKeepsTheLogitsAndByZeroZeroesThem) {
  const std::string plain = tempPath("plain.ingot"), there = tempPath("there-and-back.ingot"),
                    zero = tempPath("zero.ingot");
  // The plain module: a scale by 1, which folds away.
  ASSERT_NO_FATAL_FAILURE(compile(tinyLlamaScaled({"1.0"}), "plain", plain));
  ASSERT_NO_FATAL_FAILURE(compile(tinyLlamaScaled({"4.0", "0.25"}), "there-and-back", there));
  ASSERT_NO_FATAL_FAILURE(compile(tinyLlamaScaled({"0.0"}), "zero", zero));
  // A factor of 1 folds away; the others are steps of their own.
  EXPECT_EQ(countSteps(plain, schema::OpKind::Scale), 0u);
  EXPECT_EQ(countSteps(there, schema::OpKind::Scale), 2u);
  EXPECT_EQ(countSteps(zero, schema::OpKind::Scale), 1u);

  const std::vector<int32_t> tokens = {1, 17, 200, 3, 99, 42, 255, 0, 128, 64};
  const std::vector<float> expected = allLogits(plain, tokens);
  const std::vector<float> same = allLogits(there, tokens);
  const std::vector<float> zeros = allLogits(zero, tokens);
  ASSERT_EQ(expected.size(), tokens.size() * 256);
  ASSERT_EQ(same.size(), expected.size());
  ASSERT_EQ(zeros.size(), expected.size());
  double largest = 0.0;
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_TRUE(std::isfinite(expected[i])) << "logit " << i;
    ASSERT_EQ(std::memcmp(&same[i], &expected[i], sizeof(float)), 0)
        << "logit " << i << ": " << same[i] << " vs " << expected[i];
    ASSERT_EQ(zeros[i], 0.0f) << "logit " << i;
    largest = std::max(largest, std::fabs(double(expected[i])));
  }
  EXPECT_GT(largest, 1e-2) << "the unscaled logits are zeros too: the test shows nothing";
}

}  // namespace
}  // namespace ingot::compiler
