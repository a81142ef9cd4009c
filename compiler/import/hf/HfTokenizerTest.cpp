//===- HfTokenizerTest.cpp - tokenizer.json conversion --------------------===//
#include "compiler/import/hf/HfTokenizer.h"

#include <gtest/gtest.h>

namespace ingot::importer::hf {
namespace {

/// A minimal tokenizer.json with `pre` as its pre_tokenizer and `merges` verbatim.
std::string tokenizerJson(const std::string &pre, const std::string &merges,
                          const std::string &extra = "") {
  return R"({"added_tokens": [{"id": 4, "content": "<s>", "special": true},
                              {"id": 5, "content": "<tool>", "special": false}],
             "pre_tokenizer": )" +
         pre + R"(, "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "c": 3},
             "merges": )" +
         merges + extra + "}}";
}

constexpr const char *kByteLevel =
    R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": true})";

TEST(HfTokenizer, ReadsBothMergeFormatsAndAddedTokens) {
  Tokenizer strings, pairs;
  ASSERT_TRUE(
      parseTokenizerJson(tokenizerJson(kByteLevel, R"(["a b", "ab c"])"), "t", strings).ok());
  ASSERT_TRUE(
      parseTokenizerJson(tokenizerJson(kByteLevel, R"([["a", "b"], ["ab", "c"]])"), "t", pairs)
          .ok());
  EXPECT_EQ(strings.merges, (std::vector<std::string>{"a b", "ab c"}));
  EXPECT_EQ(pairs.merges, strings.merges);
  EXPECT_EQ(strings.kind, schema::TokenizerKind::ByteLevelBpe);
  EXPECT_EQ(strings.preTokenizer, "gpt2");
  ASSERT_EQ(strings.tokens.size(), 6u);
  EXPECT_EQ(strings.tokens[4], "<s>");
  EXPECT_EQ(strings.tokenAttrs[4], schema::TokenAttr::Control);
  EXPECT_EQ(strings.tokenAttrs[5], schema::TokenAttr::UserDefined);
  EXPECT_EQ(strings.tokenAttrs[0], schema::TokenAttr::Normal);
}

TEST(HfTokenizer, RecognisesTheKnownByteLevelFamilies) {
  auto family = [](const std::string &pre) {
    Tokenizer t;
    Status status = parseTokenizerJson(tokenizerJson(pre, "[]"), "t", t);
    return status.ok() ? t.preTokenizer : status.message();
  };
  EXPECT_EQ(family(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Digits", "individual_digits": true},
      {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}]})"),
            "smollm");
  const std::string split = R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}NUM| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
       "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]})";
  auto withDigits = [&](const std::string &digits) {
    std::string s = split;
    return s.replace(s.find("NUM"), 3, digits);
  };
  EXPECT_EQ(family(withDigits("{1,3}")), "llama3");
  EXPECT_EQ(family(withDigits("")), "qwen2");
  std::string unknown = family(withDigits("{1,2}"));
  EXPECT_NE(unknown.find("is not one of the known families"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("\\\\p{N}{1,2}"), std::string::npos) << unknown;
}

TEST(HfTokenizer, ReadsSentencePieceStyleBpeWithMergeRankScores) {
  std::string text =
      tokenizerJson(R"({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first"})",
                    R"(["a b", "ab c"])", R"(, "byte_fallback": true, "unk_token": "c")");
  Tokenizer t;
  Status status = parseTokenizerJson(text, "t", t);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(t.kind, schema::TokenizerKind::SentencePieceBpe);
  EXPECT_TRUE(t.addSpacePrefix);
  ASSERT_EQ(t.scores.size(), 6u);
  EXPECT_EQ(t.scores[2], 0.0f); // "ab" comes from merge 0
  EXPECT_LT(t.scores[0], t.scores[2]);
  EXPECT_EQ(t.unkTokenId, 3);
}

TEST(HfTokenizer, RejectsNonBpeModels) {
  Tokenizer t;
  Status status =
      parseTokenizerJson(R"({"model": {"type": "Unigram", "vocab": []}})", "tok.json", t);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message(),
            "tok.json: tokenizer model 'Unigram' is not supported (BPE is: byte-level or "
            "SentencePiece-style)");
}

TEST(HfTokenizer, AppliesTokenizerConfig) {
  Tokenizer t;
  ASSERT_TRUE(parseTokenizerJson(tokenizerJson(kByteLevel, "[]"), "t", t).ok());
  Status status = applyTokenizerConfig(
      R"({"bos_token": {"content": "<s>"}, "eos_token": "c", "add_bos_token": true,
          "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})",
      "cfg", t);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(t.bosTokenId, 4);
  EXPECT_EQ(t.eosTokenId, 3);
  EXPECT_TRUE(t.addBos);
  EXPECT_EQ(t.chatTemplate, "D");
  Status missing = applyTokenizerConfig(R"({"eos_token": "</s>"})", "cfg", t);
  EXPECT_EQ(missing.message(), "cfg: eos_token '</s>' is not in the vocabulary");
}

} // namespace
} // namespace ingot::importer::hf
