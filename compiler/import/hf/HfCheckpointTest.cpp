//===- HfCheckpointTest.cpp - Hugging Face directories, valid and broken ---===//
#include "compiler/import/hf/HfCheckpoint.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace ingot::importer::hf {
namespace {

namespace fs = std::filesystem;

constexpr const char *kTinyConfig = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
  "num_attention_heads": 2, "num_key_value_heads": 1, "rms_norm_eps": 1e-6,
  "rope_theta": 500000.0, "max_position_embeddings": 64, "vocab_size": 4,
  "tie_word_embeddings": true, "bos_token_id": 0, "eos_token_id": [1, 2]
})";

std::string configError(const std::string &text) {
  ModelConfig config;
  GraphFeatures features;
  Status status = parseHfConfig(text, "config.json", config, features);
  return status.ok() ? "" : status.message();
}

/// A fresh empty directory under the test temp dir.
std::string freshDir(const std::string &name) {
  std::string dir = testing::TempDir() + "/" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void writeText(const std::string &path, const std::string &text) {
  std::ofstream(path, std::ios::binary) << text;
}

/// A safetensors file holding one f32 tensor `name` of `shape`.
void writeShard(const std::string &path, const std::string &name, std::vector<int64_t> shape) {
  int64_t n = 1;
  std::string dims;
  for (int64_t d : shape) {
    n *= d;
    dims += (dims.empty() ? "" : ",") + std::to_string(d);
  }
  std::string header = "{\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[" + dims +
                       "],\"data_offsets\":[0," + std::to_string(4 * n) + "]}}";
  std::ofstream out(path, std::ios::binary);
  uint64_t length = header.size();
  for (int i = 0; i < 8; ++i)
    out.put(static_cast<char>((length >> (8 * i)) & 0xff));
  out << header << std::string(4 * n, '\0');
}

TEST(HfConfig, ParsesLlamaConfig) {
  ModelConfig c;
  GraphFeatures f;
  ASSERT_TRUE(parseHfConfig(kTinyConfig, "config.json", c, f).ok());
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.hiddenSize, 8);
  EXPECT_EQ(c.numKvHeads, 1);
  EXPECT_EQ(c.headDim, 4);
  EXPECT_EQ(c.rope.theta, 500000.0);
  EXPECT_TRUE(c.tieWordEmbeddings);
  EXPECT_EQ(c.eosTokenIds, (std::vector<int64_t>{1, 2}));
  EXPECT_FALSE(f.attentionBias);
}

TEST(HfConfig, ParsesLlama3RopeScalingAndQwen2Bias) {
  std::string text = kTinyConfig;
  text.replace(text.find("\"model_type\": \"llama\""), 21, "\"model_type\": \"qwen2\"");
  text.replace(text.rfind('}'), 1,
               R"(, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                  "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 8192}})");
  ModelConfig c;
  GraphFeatures f;
  Status status = parseHfConfig(text, "config.json", c, f);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(c.architecture, "qwen2");
  EXPECT_TRUE(f.attentionBias);
  EXPECT_EQ(c.rope.scaling, schema::RopeScalingKind::Llama3);
  EXPECT_EQ(c.rope.factor, 8.0);
  EXPECT_EQ(c.rope.originalMaxPosition, 8192);
}

TEST(HfConfig, NamesAMissingKey) {
  std::string text = kTinyConfig;
  text.replace(text.find("\"hidden_size\": 8,"), 17, "");
  EXPECT_EQ(configError(text), "config.json: missing key 'hidden_size'");
}

TEST(HfConfig, NamesAnUnsupportedArchitecture) {
  std::string error =
      configError(R"({"architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox"})");
  EXPECT_NE(error.find("architecture 'GPTNeoXForCausalLM' (model_type 'gpt_neox') is not "
                       "supported"),
            std::string::npos)
      << error;
}

TEST(HfConfig, RejectsValuesOfTheWrongType) {
  std::string text = kTinyConfig;
  text.replace(text.find("\"tie_word_embeddings\": true"), 27, "\"tie_word_embeddings\": \"yes\"");
  EXPECT_NE(configError(text).find("config.json"), std::string::npos);
}

TEST(HfCheckpoint, ReadsASingleFileCheckpoint) {
  std::string dir = freshDir("single");
  writeText(dir + "/config.json", kTinyConfig);
  writeShard(dir + "/model.safetensors", "model.norm.weight", {8});
  StatusOr<HfCheckpoint> ckpt = readHfCheckpoint(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
  ASSERT_EQ(ckpt->tensors.size(), 1u);
  EXPECT_EQ(ckpt->tensors[0].tensor->name, "model.norm.weight");
  EXPECT_FALSE(ckpt->hasTokenizer);
  EXPECT_EQ(ckpt->config.name, "single");
}

TEST(HfCheckpoint, RejectsATensorWithTheWrongShape) {
  std::string dir = freshDir("badshape");
  writeText(dir + "/config.json", kTinyConfig);
  writeShard(dir + "/model.safetensors", "model.norm.weight", {9});
  StatusOr<HfCheckpoint> ckpt = readHfCheckpoint(dir);
  ASSERT_FALSE(ckpt.ok());
  EXPECT_NE(ckpt.status().message().find("'model.norm.weight' has shape [9], expected [8]"),
            std::string::npos)
      << ckpt.status().message();
}

TEST(HfCheckpoint, RejectsAnUnexpectedTensor) {
  std::string dir = freshDir("unexpected");
  writeText(dir + "/config.json", kTinyConfig);
  writeShard(dir + "/model.safetensors", "model.layers.0.mlp.fc1.weight", {8});
  StatusOr<HfCheckpoint> ckpt = readHfCheckpoint(dir);
  ASSERT_FALSE(ckpt.ok());
  EXPECT_NE(ckpt.status().message().find("unexpected tensor 'model.layers.0.mlp.fc1.weight'"),
            std::string::npos);
}

TEST(HfCheckpoint, RejectsAnIndexNamingAMissingShard) {
  std::string dir = freshDir("missingshard");
  writeText(dir + "/config.json", kTinyConfig);
  writeShard(dir + "/model-00001-of-00002.safetensors", "model.norm.weight", {8});
  writeText(dir + "/model.safetensors.index.json",
            R"({"weight_map": {"model.norm.weight": "model-00001-of-00002.safetensors",
                "model.embed_tokens.weight": "model-00002-of-00002.safetensors"}})");
  StatusOr<HfCheckpoint> ckpt = readHfCheckpoint(dir);
  ASSERT_FALSE(ckpt.ok());
  EXPECT_NE(ckpt.status().message().find("model-00002-of-00002.safetensors: cannot open"),
            std::string::npos)
      << ckpt.status().message();
}

TEST(HfCheckpoint, RejectsAnIndexNamingATensorItsShardLacks) {
  std::string dir = freshDir("missingtensor");
  writeText(dir + "/config.json", kTinyConfig);
  writeShard(dir + "/model-00001-of-00001.safetensors", "model.norm.weight", {8});
  writeText(dir + "/model.safetensors.index.json",
            R"({"weight_map": {"model.norm.weight": "model-00001-of-00001.safetensors",
                "model.embed_tokens.weight": "model-00001-of-00001.safetensors"}})");
  StatusOr<HfCheckpoint> ckpt = readHfCheckpoint(dir);
  ASSERT_FALSE(ckpt.ok());
  EXPECT_NE(ckpt.status().message().find("tensor 'model.embed_tokens.weight' is not in its shard "
                                         "'model-00001-of-00001.safetensors'"),
            std::string::npos)
      << ckpt.status().message();
}

TEST(HfCheckpoint, RejectsADirectoryWithoutWeights) {
  std::string dir = freshDir("noweights");
  writeText(dir + "/config.json", kTinyConfig);
  StatusOr<HfCheckpoint> ckpt = readHfCheckpoint(dir);
  ASSERT_FALSE(ckpt.ok());
  EXPECT_NE(ckpt.status().message().find("no model.safetensors"), std::string::npos);
}

TEST(HfCheckpoint, ReadsTheTinyShardedLlama) {
  StatusOr<HfCheckpoint> ckpt = readHfCheckpoint(INGOT_TINY_DATA_DIR "/llama");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
  const ModelConfig &c = ckpt->config;
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.vocabSize, 49152);
  EXPECT_EQ(c.hiddenSize, 16);
  EXPECT_EQ(c.numLayers, 2);
  EXPECT_EQ(c.numHeads, 4);
  EXPECT_EQ(c.numKvHeads, 2);
  EXPECT_TRUE(c.tieWordEmbeddings);
  EXPECT_EQ(ckpt->tensors.size(), 20u); // embed + 2 x 9 + norm, tied: no lm_head
  ASSERT_TRUE(ckpt->hasTokenizer);
  EXPECT_EQ(ckpt->tokenizer.kind, schema::TokenizerKind::ByteLevelBpe);
  EXPECT_EQ(ckpt->tokenizer.preTokenizer, "smollm");
  EXPECT_EQ(ckpt->tokenizer.tokens.size(), 49152u);
  EXPECT_EQ(ckpt->tokenizer.merges.size(), 48900u);
  EXPECT_EQ(ckpt->tokenizer.tokens[2], "<|im_end|>");
  EXPECT_EQ(ckpt->tokenizer.tokenAttrs[2], schema::TokenAttr::Control);
  EXPECT_FALSE(ckpt->tokenizer.chatTemplate.empty());
}

TEST(HfCheckpoint, ReadsTheTinyShardedQwen2WithBiases) {
  StatusOr<HfCheckpoint> ckpt = readHfCheckpoint(INGOT_TINY_DATA_DIR "/qwen2");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
  EXPECT_EQ(ckpt->config.architecture, "qwen2");
  EXPECT_TRUE(ckpt->features.attentionBias);
  EXPECT_FALSE(ckpt->config.tieWordEmbeddings);
  EXPECT_EQ(ckpt->tensors.size(), 27u); // embed + lm_head + norm + 2 x 12
}

} // namespace
} // namespace ingot::importer::hf
