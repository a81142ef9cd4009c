// SmolLM2's real tokenizer against llama.cpp's ids (test/data/tokenizer/smollm2_ids.json).
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "runtime/tokenizer/stream_decoder.h"
#include "runtime/tokenizer/tokenizer.h"

namespace ingot {
namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// SmolLM2's tokenizer from the committed text dump (loaded once).
const Tokenizer& smolTokenizer() {
  static const Tokenizer* tokenizer = [] {
    auto data = tokenizerDataFromText(readFile(INGOT_TOKENIZER_TEST_DATA "/smollm2_tokenizer.txt"));
    EXPECT_TRUE(data.ok()) << data.status().toString();
    auto t = Tokenizer::create(*std::move(data));
    EXPECT_TRUE(t.ok()) << t.status().toString();
    return new Tokenizer(*std::move(t));
  }();
  return *tokenizer;
}

nlohmann::json referenceIds() {
  return nlohmann::json::parse(readFile(INGOT_TOKENIZER_TEST_DATA "/smollm2_ids.json"));
}

TEST(SmolLM2Tokenizer, LoadsFromTheCommittedDump) {
  const Tokenizer& t = smolTokenizer();
  EXPECT_EQ(t.vocabSize(), 49152u);
  EXPECT_EQ(t.data().preTokenizer, "smollm");
  EXPECT_EQ(t.bosId(), 1);
  EXPECT_EQ(t.eosId(), 2);
  EXPECT_FALSE(t.data().addBos);
  EXPECT_EQ(t.data().merges.size(), 48900u);
  EXPECT_NE(t.data().chatTemplate.find("<|im_start|>"), std::string::npos);
}

TEST(SmolLM2Tokenizer, MatchesLlamaCppOnEveryReferenceText) {
  const Tokenizer& t = smolTokenizer();
  nlohmann::json ref = referenceIds();
  size_t matched = 0, total = 0;
  for (const auto& c : ref["cases"]) {
    std::string text = c["text"];
    bool parseSpecial = c["parse_special"];
    std::vector<int32_t> expected = c["ids"];
    std::vector<int32_t> got = t.encode(text, /*addSpecial=*/true, parseSpecial);
    ++total;
    if (got == expected) ++matched;
    EXPECT_EQ(got, expected) << "text: \"" << text << "\" parse_special=" << parseSpecial;
  }
  EXPECT_GE(total, 80u);
  std::cout << "[ smollm2 ] " << matched << "/" << total << " texts match llama.cpp\n";
}

TEST(SmolLM2Tokenizer, DecodeInvertsEncodeOnEveryReferenceText) {
  const Tokenizer& t = smolTokenizer();
  const nlohmann::json reference = referenceIds();  // the loop must not outlive it
  for (const auto& c : reference["cases"]) {
    std::string text = c["text"];
    bool parseSpecial = c["parse_special"];
    EXPECT_EQ(t.decode(t.encode(text, true, parseSpecial), false), text);
    StreamDecoder stream(t, false);
    std::string streamed;
    for (int32_t id : t.encode(text, true, parseSpecial)) streamed += stream.push(id);
    EXPECT_EQ(streamed + stream.finish(), text);
  }
}

TEST(SmolLM2Tokenizer, DecodeSkipsControlTokens) {
  const Tokenizer& t = smolTokenizer();
  std::vector<int32_t> ids = t.encode("<|im_start|>user\nhi<|im_end|>", false, true);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(ids.back(), 2);
  EXPECT_EQ(t.decode(ids, true), "user\nhi");
}

TEST(SmolLM2Tokenizer, EncodesAMegabyteOfEnglishQuickly) {
  const Tokenizer& t = smolTokenizer();
  const char* words[] = {"the", "model", "compiles", "ahead", "of", "time", "and", "serves",
                         "requests", "with", "paged", "attention,", "while", "tokens",
                         "stream", "back.", "Numbers", "like", "1234", "or", "3.14", "appear",
                         "in", "text", "too;", "Unusual", "wordforms", "incomprehensibilities"};
  std::mt19937 rng(42);
  std::string text;
  while (text.size() < (1u << 20)) {
    text += words[rng() % (sizeof(words) / sizeof(words[0]))];
    text += rng() % 12 == 0 ? "\n" : " ";
    if (rng() % 50 == 0) text += std::to_string(rng());
  }
  auto start = std::chrono::steady_clock::now();
  std::vector<int32_t> ids = t.encode(text, false, true);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "[ smollm2 ] encoded " << text.size() << " bytes into " << ids.size()
            << " tokens in " << seconds << " s\n";
  EXPECT_LT(seconds, 1.0);
  EXPECT_EQ(t.decode(ids, false), text);
}

}  // namespace
}  // namespace ingot
