//===- HfConfigModelTest.cpp - config-only imports against real checkpoints ===//
#include "compiler/import/hf/HfConfigModel.h"

#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "compiler/import/hf/HfCheckpoint.h"

namespace ingot::importer::hf {
namespace {

namespace fs = std::filesystem;

std::string freshDir(const std::string &name) {
  std::string dir = testing::TempDir() + "/config-model-" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string readText(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void writeText(const std::string &path, const std::string &text) {
  std::ofstream(path, std::ios::binary) << text;
}

/// `text` with the first `"key": value` replaced by `"key": replacement`.
std::string withValue(std::string text, const std::string &key, const std::string &replacement) {
  size_t at = text.find("\"" + key + "\"");
  EXPECT_NE(at, std::string::npos) << key;
  size_t start = text.find(':', at) + 1;
  size_t end = text.find_first_of(",\n}", start);
  return text.replace(start, end - start, " " + replacement);
}

/// The checkpoint's own tensors by name: shape (dtype as importHuggingFace gives it is
/// checked separately).
std::map<std::string, std::vector<int64_t>> checkpointShapes(const std::string &dir) {
  StatusOr<HfCheckpoint> ckpt = readHfCheckpoint(dir);
  EXPECT_TRUE(ckpt.ok()) << ckpt.status().message();
  std::map<std::string, std::vector<int64_t>> shapes;
  if (ckpt.ok())
    for (const HfTensorRef &ref : ckpt->tensors)
      shapes[ref.tensor->name] = ref.tensor->shape;
  return shapes;
}

class ConfigOnlyMatchesCheckpoint : public testing::TestWithParam<const char *> {};

// The tensor table a config alone declares is exactly the one the real checkpoint holds:
// the same names, the same shapes (Llama with tied embeddings, Qwen2 with q/k/v biases).
TEST_P(ConfigOnlyMatchesCheckpoint, SameTensorsAndConfig) {
  const std::string dir = std::string(INGOT_TINY_DATA_DIR) + "/" + GetParam();
  // A copy of config.json alone, so no tokenizer sits beside it.
  const std::string alone = freshDir(GetParam()) + "/" + GetParam() + ".json";
  fs::copy_file(dir + "/config.json", alone);
  ASSERT_TRUE(isConfigOnlyInput(alone));
  StatusOr<ImportedModel> model = importConfigOnly(alone, {});
  ASSERT_TRUE(model.ok()) << model.status().message();

  std::map<std::string, std::vector<int64_t>> expected = checkpointShapes(dir);
  ASSERT_FALSE(expected.empty());
  std::map<std::string, std::vector<int64_t>> got;
  for (const ImportedTensor &t : model->tensors) {
    EXPECT_TRUE(got.emplace(t.name, t.shape).second) << "duplicate " << t.name;
    // The tiny configs say dtype bfloat16; norms and biases stay f32.
    EXPECT_EQ(t.dtype, t.shape.size() == 1 ? schema::DType::F32 : schema::DType::BF16) << t.name;
  }
  EXPECT_EQ(got, expected);
  EXPECT_EQ(model->config.name, GetParam());
  EXPECT_FALSE(model->hasTokenizer);
  EXPECT_NE(model->sourceXxh64, 0u);

  StatusOr<HfCheckpoint> ckpt = readHfCheckpoint(dir);
  ASSERT_TRUE(ckpt.ok());
  const ModelConfig &a = model->config, &b = ckpt->config;
  EXPECT_EQ(a.architecture, b.architecture);
  EXPECT_EQ(a.vocabSize, b.vocabSize);
  EXPECT_EQ(a.numLayers, b.numLayers);
  EXPECT_EQ(a.numKvHeads, b.numKvHeads);
  EXPECT_EQ(a.headDim, b.headDim);
  EXPECT_EQ(a.tieWordEmbeddings, b.tieWordEmbeddings);
  EXPECT_EQ(model->features.attentionBias, ckpt->features.attentionBias);
}

INSTANTIATE_TEST_SUITE_P(Tiny, ConfigOnlyMatchesCheckpoint, testing::Values("llama", "qwen2"));

TEST(ConfigOnly, TakesTheTokenizerBesideTheConfig) {
  const std::string tiny = std::string(INGOT_TINY_DATA_DIR) + "/llama";
  const std::string dir = freshDir("with-tokenizer");
  for (const char *file : {"config.json", "tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(tiny + "/" + file, dir + "/" + file);
  ASSERT_TRUE(isConfigOnlyInput(dir));
  StatusOr<ImportedModel> model = importConfigOnly(dir, {});
  ASSERT_TRUE(model.ok()) << model.status().message();
  EXPECT_TRUE(model->hasTokenizer);
  EXPECT_EQ(static_cast<int64_t>(model->tokenizer.tokens.size()), model->config.vocabSize);
  EXPECT_EQ(model->config.name, "config-model-with-tokenizer");
}

TEST(ConfigOnly, RecognisesOnlyConfigsAndWeightlessDirectories) {
  const std::string tiny = std::string(INGOT_TINY_DATA_DIR);
  EXPECT_FALSE(isConfigOnlyInput(tiny + "/llama")); // a checkpoint: it has weights
  EXPECT_FALSE(isConfigOnlyInput(tiny + "/llama.gguf"));
  EXPECT_FALSE(isConfigOnlyInput(tiny + "/no-such-file.json"));
  EXPECT_TRUE(isConfigOnlyInput(tiny + "/llama/config.json"));
  const std::string dir = freshDir("recognise");
  EXPECT_FALSE(isConfigOnlyInput(dir)); // no config.json
  writeText(dir + "/module.mlir", "module {\n}\n");
  EXPECT_FALSE(isConfigOnlyInput(dir + "/module.mlir"));
  writeText(dir + "/padded.json", "\n  {\"model_type\": \"llama\"}");
  EXPECT_TRUE(isConfigOnlyInput(dir + "/padded.json"));
}

TEST(ConfigOnly, DtypeFromTorchDtypeUnlessGiven) {
  const std::string config = readText(std::string(INGOT_TINY_DATA_DIR) + "/llama/config.json");
  const std::string dir = freshDir("dtype");
  auto matrixDtype = [&](const std::string &text, std::optional<schema::DType> given) {
    writeText(dir + "/c.json", text);
    StatusOr<ImportedModel> model = importConfigOnly(dir + "/c.json", {given});
    EXPECT_TRUE(model.ok()) << model.status().message();
    return model.ok() ? model->tensors.at(model->find("model.embed_tokens.weight")).dtype
                      : schema::DType::Invalid;
  };
  // transformers >= 5 writes "dtype", older versions "torch_dtype".
  EXPECT_EQ(matrixDtype(withValue(config, "dtype", "\"float16\""), std::nullopt),
            schema::DType::F16);
  std::string old = config;
  old.replace(old.find("\"dtype\""), 7, "\"torch_dtype\"");
  EXPECT_EQ(matrixDtype(withValue(old, "torch_dtype", "\"float32\""), std::nullopt),
            schema::DType::F32);
  EXPECT_EQ(matrixDtype(withValue(config, "dtype", "null"), std::nullopt), schema::DType::BF16);
  EXPECT_EQ(matrixDtype(withValue(config, "dtype", "\"float32\""), schema::DType::F16),
            schema::DType::F16);
  // An unsupported torch_dtype is refused by name, unless a dtype is given.
  writeText(dir + "/fp8.json", withValue(config, "dtype", "\"float8_e4m3fn\""));
  StatusOr<ImportedModel> fp8 = importConfigOnly(dir + "/fp8.json", {});
  ASSERT_FALSE(fp8.ok());
  EXPECT_NE(fp8.status().message().find("float8_e4m3fn"), std::string::npos)
      << fp8.status().message();
  EXPECT_NE(fp8.status().message().find("--dtype"), std::string::npos);
  EXPECT_TRUE(importConfigOnly(dir + "/fp8.json", {schema::DType::BF16}).ok());
}

TEST(ConfigOnly, TensorsHaveNoBytesAndSaySo) {
  const std::string path = std::string(INGOT_TINY_DATA_DIR) + "/qwen2/config.json";
  const std::string dir = freshDir("no-bytes");
  fs::copy_file(path, dir + "/config.json");
  StatusOr<ImportedModel> model = importConfigOnly(dir, {});
  ASSERT_TRUE(model.ok()) << model.status().message();
  const ImportedTensor &t = model->tensors.at(model->find("model.layers.1.mlp.up_proj.weight"));
  bool wrote = false;
  Status produced = t.produce([&](const void *, uint64_t) {
    wrote = true;
    return okStatus();
  });
  EXPECT_FALSE(produced.ok());
  EXPECT_FALSE(wrote);
  EXPECT_NE(produced.message().find("model.layers.1.mlp.up_proj.weight"), std::string::npos);
  EXPECT_NE(produced.message().find("--dummy-weights"), std::string::npos);
  std::vector<float> values;
  EXPECT_FALSE(t.readF32(values).ok());
}

TEST(ConfigOnly, BadConfigsNameTheFileAndTheProblem) {
  const std::string dir = freshDir("bad");
  auto error = [&](const std::string &text) {
    writeText(dir + "/bad.json", text);
    StatusOr<ImportedModel> model = importConfigOnly(dir + "/bad.json", {});
    return model.ok() ? std::string() : model.status().message();
  };
  EXPECT_NE(error("{ not json").find("bad.json: not a JSON object"), std::string::npos);
  const std::string config = readText(std::string(INGOT_TINY_DATA_DIR) + "/llama/config.json");
  std::string gpt2 = withValue(config, "model_type", "\"gpt2\"");
  gpt2.replace(gpt2.find("LlamaForCausalLM"), 16, "GPT2LMHeadModel");
  EXPECT_NE(error(gpt2).find("is not supported"), std::string::npos);
  std::string noLayers = config;
  noLayers.replace(noLayers.find("\"num_hidden_layers\""), 19, "\"layers\"");
  EXPECT_NE(error(noLayers).find("missing key 'num_hidden_layers'"), std::string::npos);
  EXPECT_FALSE(importConfigOnly(dir + "/absent.json", {}).ok());
}

} // namespace
} // namespace ingot::importer::hf
