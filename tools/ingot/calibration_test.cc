//===- calibration_test.cc - folding is exact; calibration runs on the tiny models ===//
#include "compiler/driver/Calibration.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <numeric>
#include <random>
#include <unistd.h>

#include <gtest/gtest.h>

#include "compiler/import/HfImporter.h"
#include "core/artifact/artifact_reader.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/step_inputs.h"
#include "tools/ingot/calibration_forward.h"

namespace ingot::compiler {
namespace {

StatusOr<importer::ImportedModel> importTiny(const std::string &arch) {
  return importer::importHuggingFace(std::string(INGOT_TINY_DATA_DIR) + "/" + arch,
                                     importer::HfImportOptions{schema::DType::F32});
}

std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "/calibration-" + std::to_string(::getpid()) + "-" + name;
}

/// Logits of every token of `tokens`, run as one sequence on the CPU backend.
StatusOr<std::vector<float>> allLogits(const std::string &artifactPath,
                                       const std::vector<int32_t> &tokens) {
  INGOT_ASSIGN_OR_RETURN(Artifact artifact, Artifact::open(artifactPath));
  CpuBackendOptions options;
  options.num_threads = 1;
  options.num_kv_blocks = 16;
  INGOT_ASSIGN_OR_RETURN(std::unique_ptr<CpuBackend> backend,
                         CpuBackend::create(artifact, options));
  const int32_t n = static_cast<int32_t>(tokens.size());
  const int32_t blockSize = backend->modelShape().kv_block_size;
  StepInputs step;
  step.tokens = tokens;
  step.positions.resize(n);
  std::iota(step.positions.begin(), step.positions.end(), 0);
  step.slot_mapping = step.positions;
  step.num_requests = 1;
  step.max_blocks_per_request = (n + blockSize - 1) / blockSize;
  step.block_tables.resize(step.max_blocks_per_request);
  std::iota(step.block_tables.begin(), step.block_tables.end(), 0);
  step.seq_lens = {n};
  step.query_start = {0, n};
  step.logit_rows.resize(n);
  std::iota(step.logit_rows.begin(), step.logit_rows.end(), 0);
  std::vector<float> logits(1, std::nanf(""));
  INGOT_RETURN_IF_ERROR(backend->step(step, &logits));
  return logits;
}

std::vector<float> randomScales(int64_t size, std::mt19937 &rng) {
  std::uniform_real_distribution<float> exponent(-2.0f, 2.0f); // 0.25x .. 4x
  std::vector<float> s(static_cast<size_t>(size));
  for (float &v : s)
    v = std::exp2(exponent(rng));
  return s;
}

/// Largest |a - b| over the largest |a|.
double relativeDifference(const std::vector<float> &a, const std::vector<float> &b) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(a[i])));
  }
  return diff / std::max(scale, 1e-30);
}

/// Folding random scales into every place calibration folds them (norm gammas, v_proj
/// rows and bias with GQA repeat into o_proj, up_proj rows into down_proj) leaves an f32
/// model computing the same logits; folding a gamma alone does not (the check can fail).
TEST(CalibrationTest, FoldedScalesLeaveTheModelTheSameFunction) {
  std::mt19937 rng(std::random_device{}());
  // Gemma 3's MLP reads its own norm (sandwich norms); Qwen3 and Gemma 3 norm q/k per head.
  for (const char *arch : {"llama", "qwen2", "qwen3", "gemma3", "phi3"}) {
    SCOPED_TRACE(arch);
    StatusOr<importer::ImportedModel> model = importTiny(arch);
    ASSERT_TRUE(model.ok()) << model.status().message();
    const ModelConfig &cfg = model->config;
    ASSERT_LT(cfg.numKvHeads, cfg.numHeads) << "the tiny model should exercise GQA";
    FoldPlan plan;
    for (int32_t layer = 0; layer < cfg.numLayers; ++layer) {
      LayerScales scales;
      scales.attentionInput = randomScales(cfg.hiddenSize, rng);
      scales.mlpInput = randomScales(cfg.hiddenSize, rng);
      scales.value = randomScales(int64_t{cfg.numKvHeads} * cfg.headDim, rng);
      scales.mlpHidden = randomScales(cfg.intermediateSize, rng);
      Status added = addLayerFolds(*model, layer, scales, plan);
      ASSERT_TRUE(added.ok()) << added.message();
    }
    if (std::string(arch) == "qwen2") {
      EXPECT_TRUE(plan.count("model.layers.0.self_attn.v_proj.bias"));
    }
    StatusOr<importer::ImportedModel> folded = foldCheckpoint(*model, plan);
    ASSERT_TRUE(folded.ok()) << folded.status().message();
    FoldPlan gammaOnly;
    gammaOnly["model.layers.0.input_layernorm.weight"] =
        plan["model.layers.0.input_layernorm.weight"];
    StatusOr<importer::ImportedModel> broken = foldCheckpoint(*model, gammaOnly);
    ASSERT_TRUE(broken.ok()) << broken.status().message();

    const std::string original = tempPath(std::string(arch) + "-original.ingot"),
                      foldedPath = tempPath(std::string(arch) + "-folded.ingot"),
                      brokenPath = tempPath(std::string(arch) + "-broken.ingot");
    ASSERT_TRUE(writeCheckpointArtifact(*model, original).ok());
    ASSERT_TRUE(writeCheckpointArtifact(*folded, foldedPath).ok());
    ASSERT_TRUE(writeCheckpointArtifact(*broken, brokenPath).ok());
    std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(cfg.vocabSize) - 1);
    std::vector<int32_t> tokens(40);
    for (int32_t &t : tokens)
      t = token(rng);
    StatusOr<std::vector<float>> a = allLogits(original, tokens), b = allLogits(foldedPath, tokens),
                                 c = allLogits(brokenPath, tokens);
    ::unlink(original.c_str());
    ::unlink(foldedPath.c_str());
    ::unlink(brokenPath.c_str());
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    ASSERT_EQ(a->size(), tokens.size() * static_cast<size_t>(cfg.vocabSize));
    ASSERT_EQ(a->size(), b->size());
    EXPECT_TRUE(std::all_of(a->begin(), a->end(), [](float v) { return std::isfinite(v); }));
    EXPECT_LT(relativeDifference(*a, *b), 1e-4);
    EXPECT_GT(relativeDifference(*a, *c), 1e-2);
  }
}

TEST(CalibrationTest, FoldsThatDoNotFitAreRefusedByName) {
  StatusOr<importer::ImportedModel> model = importTiny("llama");
  ASSERT_TRUE(model.ok()) << model.status().message();
  FoldPlan plan;
  plan["model.layers.0.mlp.down_proj.weight"].columnScale = std::vector<float>(5, 1.0f);
  StatusOr<importer::ImportedModel> folded = foldCheckpoint(*model, plan);
  ASSERT_FALSE(folded.ok());
  EXPECT_NE(folded.status().message().find("model.layers.0.mlp.down_proj.weight"),
            std::string::npos);
  plan.clear();
  plan["model.layers.9.mlp.up_proj.weight"].rowDivisor = {1.0f};
  EXPECT_FALSE(foldCheckpoint(*model, plan).ok());
  plan.clear();
  plan["model.norm.weight"].rowDivisor = std::vector<float>(model->config.hiddenSize, 0.0f);
  EXPECT_FALSE(foldCheckpoint(*model, plan).ok());
  LayerScales wrong;
  wrong.value = std::vector<float>(3, 1.0f);
  EXPECT_FALSE(addLayerFolds(*model, 0, wrong, plan).ok());
}

/// The backend's observer sees each linear's real input: layer 0's q_proj reads
/// rms_norm(embedding) * gamma, so every recorded row must be that of some token.
TEST(CalibrationTest, RecordsTheInputsTheLinearsRead) {
  StatusOr<importer::ImportedModel> model = importTiny("llama");
  ASSERT_TRUE(model.ok()) << model.status().message();
  const std::string path = tempPath("observed.ingot");
  ASSERT_TRUE(writeCheckpointArtifact(*model, path).ok());
  std::ifstream in(std::string(INGOT_TEXT_DATA_DIR) + "/pride_and_prejudice_ch31-32.txt");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ForwardOptions options;
  options.maxTokens = 100;
  options.chunkTokens = 32;
  options.sampleRows = 100; // keeps every row, in order
  options.numThreads = 1;
  int calls = 0;
  StatusOr<RecordedActivations> recorded =
      tools::recordLinearInputsOnCpu(path, text, "chapters 31-32", options, [&](const std::string &name) {
        ++calls;
        return name.rfind("model.layers.0.", 0) == 0;
      });
  ::unlink(path.c_str());
  ASSERT_TRUE(recorded.ok()) << recorded.status().message();
  EXPECT_EQ(recorded->tokens, 100);
  EXPECT_EQ(calls, 4 * 7 * model->config.numLayers); // 4 chunks, 7 linears per layer
  ASSERT_EQ(recorded->inputs.size(), 7u);
  const quant::ChannelStats &q = *recorded->inputs.at("model.layers.0.self_attn.q_proj.weight");
  ASSERT_EQ(q.sampledRows(), 100);

  const int64_t d = model->config.hiddenSize;
  std::vector<float> embedding, gamma;
  ASSERT_TRUE(model->tensors[model->find("model.embed_tokens.weight")].readF32(embedding).ok());
  ASSERT_TRUE(
      model->tensors[model->find("model.layers.0.input_layernorm.weight")].readF32(gamma).ok());
  const int64_t vocab = static_cast<int64_t>(embedding.size()) / d;
  std::vector<float> normed(embedding.size());
  for (int64_t v = 0; v < vocab; ++v) {
    double sum = 0.0;
    for (int64_t c = 0; c < d; ++c)
      sum += static_cast<double>(embedding[v * d + c]) * embedding[v * d + c];
    const double inv = 1.0 / std::sqrt(sum / d + model->config.rmsNormEps);
    for (int64_t c = 0; c < d; ++c)
      normed[v * d + c] = static_cast<float>(embedding[v * d + c] * inv * gamma[c]);
  }
  for (int64_t r = 0; r < q.sampledRows(); ++r) {
    const float *row = q.sample().data() + r * d;
    double best = INFINITY;
    for (int64_t v = 0; v < vocab && best > 1e-5; ++v) {
      double diff = 0.0;
      for (int64_t c = 0; c < d; ++c)
        diff = std::max(diff, static_cast<double>(std::fabs(row[c] - normed[v * d + c])));
      best = std::min(best, diff);
    }
    EXPECT_LE(best, 1e-5) << "row " << r << " is no token's normalised embedding";
  }
  // With every row kept, the means are the sample's.
  std::vector<float> meanAbs = q.meanAbs();
  for (int64_t c = 0; c < d; ++c) {
    double sum = 0.0;
    for (int64_t r = 0; r < 100; ++r)
      sum += std::fabs(q.sample()[r * d + c]);
    EXPECT_NEAR(meanAbs[c], sum / 100, 1e-5 * (1 + sum / 100));
  }
}

CalibrationOptions tinyOptions(quant::WeightEncoding encoding, int64_t group) {
  CalibrationOptions options;
  options.recordInputs = tools::recordLinearInputsOnCpu;
  options.textPath = std::string(INGOT_TEXT_DATA_DIR) + "/pride_and_prejudice_ch31-32.txt";
  options.encoding = encoding;
  options.group = group;
  options.maxTokens = 300;
  options.chunkTokens = 128;
  options.numThreads = 1;
  options.tempDir = ::testing::TempDir();
  return options;
}

/// Calibration records every layer, searches the groups the encoding can hold, never ends
/// above the unscaled error on its sample, and hands every searched weight its importance.
TEST(CalibrationTest, CalibratesTheTinyModel) {
  StatusOr<importer::ImportedModel> model = importTiny("llama");
  ASSERT_TRUE(model.ok()) << model.status().message();
  const ModelConfig &cfg = model->config;
  StatusOr<CalibrationResult> nvfp4 =
      calibrateCheckpoint(*model, tinyOptions(quant::WeightEncoding::Nvfp4, 32));
  ASSERT_TRUE(nvfp4.ok()) << nvfp4.status().message();
  EXPECT_EQ(nvfp4->tokens, 300);
  EXPECT_EQ(nvfp4->alphas.size(), static_cast<size_t>(4 * cfg.numLayers));
  EXPECT_LE(nvfp4->error, nvfp4->unscaledError);
  EXPECT_EQ(nvfp4->columnImportance.size(), static_cast<size_t>(7 * cfg.numLayers));
  const auto &down = nvfp4->columnImportance.at("model.layers.1.mlp.down_proj.weight");
  EXPECT_EQ(down.size(), static_cast<size_t>(cfg.intermediateSize));
  EXPECT_TRUE(std::all_of(down.begin(), down.end(), [](float v) { return v >= 0.0f; }));
  EXPECT_EQ(nvfp4->model.tensors.size(), model->tensors.size());

  // int4 groups of 32 fit only down_proj (K = 64) of a hidden size of 16.
  StatusOr<CalibrationResult> int4 =
      calibrateCheckpoint(*model, tinyOptions(quant::WeightEncoding::Int4Min, 32));
  ASSERT_TRUE(int4.ok()) << int4.status().message();
  EXPECT_EQ(int4->alphas.size(), static_cast<size_t>(cfg.numLayers));
  for (const auto &[name, fold] : int4->folds)
    EXPECT_TRUE(name.find("down_proj") != std::string::npos ||
                name.find("up_proj") != std::string::npos)
        << name;

  CalibrationOptions clipOnly = tinyOptions(quant::WeightEncoding::Nvfp4, 32);
  clipOnly.searchScales = false;
  StatusOr<CalibrationResult> clip = calibrateCheckpoint(*model, clipOnly);
  ASSERT_TRUE(clip.ok()) << clip.status().message();
  EXPECT_TRUE(clip->folds.empty());
  EXPECT_EQ(clip->columnImportance.size(), static_cast<size_t>(7 * cfg.numLayers));
}

TEST(CalibrationTest, BadTextsAreReportedByName) {
  StatusOr<importer::ImportedModel> model = importTiny("llama");
  ASSERT_TRUE(model.ok()) << model.status().message();
  CalibrationOptions options = tinyOptions(quant::WeightEncoding::Nvfp4, 32);
  options.textPath = tempPath("missing.txt");
  StatusOr<CalibrationResult> missing = calibrateCheckpoint(*model, options);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(options.textPath), std::string::npos)
      << missing.status().message();
  options.textPath = tempPath("short.txt");
  std::ofstream(options.textPath) << "It is a truth universally acknowledged.";
  StatusOr<CalibrationResult> tooShort = calibrateCheckpoint(*model, options);
  ::unlink(options.textPath.c_str());
  ASSERT_FALSE(tooShort.ok());
  EXPECT_NE(tooShort.status().message().find("at least 64"), std::string::npos)
      << tooShort.status().message();
}

} // namespace
} // namespace ingot::compiler
