// Tests of the SentencePiece-style BPE path on a small handmade vocabulary.
#include <gtest/gtest.h>

#include <cstdio>

#include "runtime/tokenizer/tokenizer.h"

namespace ingot {
namespace {

/// <unk>, <s>, </s>, optionally 256 <0xXX> byte tokens, then scored pieces.
TokenizerData smallSpmData(bool withBytes) {
  TokenizerData d;
  d.kind = TokenizerKind::kSentencePieceBpe;
  auto add = [&](const std::string& text, TokenType type, float score) {
    d.tokens.push_back(text);
    d.tokenTypes.push_back(type);
    d.scores.push_back(score);
  };
  add("<unk>", TokenType::kUnknown, 0);
  add("<s>", TokenType::kControl, 0);
  add("</s>", TokenType::kControl, 0);
  if (withBytes) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      add(name, TokenType::kByte, 0);
    }
  }
  // Higher score merges first.
  for (const char* piece : {"▁", "h", "e", "l", "o", "w", "r", "d", "a", "b", "c"}) {
    add(piece, TokenType::kNormal, -100);
  }
  add("▁h", TokenType::kNormal, -5);
  add("he", TokenType::kNormal, -1);  // beats ▁h: "▁hello" goes through "he", not "▁h"
  add("ll", TokenType::kNormal, -2);
  add("llo", TokenType::kNormal, -3);
  add("hello", TokenType::kNormal, -4);
  add("▁hello", TokenType::kNormal, -6);
  add("▁w", TokenType::kNormal, -7);
  add("or", TokenType::kNormal, -8);
  add("▁wor", TokenType::kNormal, -9);
  add("ab", TokenType::kNormal, -10);
  add("bc", TokenType::kNormal, -9.5f);
  d.unkId = 0;
  d.bosId = 1;
  d.eosId = 2;
  d.addBos = true;
  return d;
}

int32_t idOf(const TokenizerData& d, const std::string& text) {
  for (size_t i = 0; i < d.tokens.size(); ++i) {
    if (d.tokens[i] == text) return static_cast<int32_t>(i);
  }
  ADD_FAILURE() << "no token " << text;
  return -1;
}

Tokenizer make(const TokenizerData& d) {
  auto t = Tokenizer::create(d);
  EXPECT_TRUE(t.ok()) << t.status().toString();
  return *std::move(t);
}

TEST(SentencePieceBpe, AddsDummyPrefixAndMergesByScore) {
  TokenizerData d = smallSpmData(true);
  Tokenizer t = make(d);
  EXPECT_EQ(t.encode("hello", true, false),
            (std::vector<int32_t>{d.bosId, idOf(d, "▁hello")}));
  EXPECT_EQ(t.encode("hello world", false, false),
            (std::vector<int32_t>{idOf(d, "▁hello"), idOf(d, "▁wor"), idOf(d, "l"),
                                  idOf(d, "d")}));
}

TEST(SentencePieceBpe, HigherScoreWinsOverlappingPairs) {
  TokenizerData d = smallSpmData(true);
  d.addSpacePrefix = false;
  Tokenizer t = make(d);
  // "bc" (-9.5) outscores "ab" (-10).
  EXPECT_EQ(t.encode("abc", false, false), (std::vector<int32_t>{idOf(d, "a"), idOf(d, "bc")}));
}

TEST(SentencePieceBpe, NoDummyPrefixWhenDisabled) {
  TokenizerData d = smallSpmData(true);
  d.addSpacePrefix = false;
  Tokenizer t = make(d);
  EXPECT_EQ(t.encode("hello", false, false), std::vector<int32_t>{idOf(d, "hello")});
  EXPECT_EQ(t.decode(t.encode(" hello", false, false), false), " hello");
}

TEST(SentencePieceBpe, FallsBackToByteTokens) {
  TokenizerData d = smallSpmData(true);
  Tokenizer t = make(d);
  // "é" is not in the vocabulary: its UTF-8 bytes C3 A9 become <0xC3> <0xA9>.
  EXPECT_EQ(t.encode("hé", false, false),
            (std::vector<int32_t>{idOf(d, "▁h"), idOf(d, "<0xC3>"), idOf(d, "<0xA9>")}));
  EXPECT_EQ(t.decode(t.encode("hé", false, false), false), "hé");
}

TEST(SentencePieceBpe, UsesUnknownWithoutByteTokens) {
  TokenizerData d = smallSpmData(false);
  Tokenizer t = make(d);
  EXPECT_EQ(t.encode("hé", false, false), (std::vector<int32_t>{idOf(d, "▁h"), d.unkId}));
  EXPECT_EQ(t.decode(t.encode("hé", false, false), true), "h");
}

TEST(SentencePieceBpe, RoundTripsTextWithSpaces) {
  Tokenizer t = make(smallSpmData(true));
  for (const char* s : {"hello world", "  hello  ", "", "a\nb\tc", "héllo wörld 🙂",
                        " leading", "trailing "}) {
    EXPECT_EQ(t.decode(t.encode(s, true, false), true), s) << s;
  }
}

TEST(SentencePieceBpe, ParsesSpecialTokensAndPrefixesTheTextAfterThem) {
  TokenizerData d = smallSpmData(true);
  Tokenizer t = make(d);
  EXPECT_EQ(t.encode("hello</s>hello", false, true),
            (std::vector<int32_t>{idOf(d, "▁hello"), d.eosId, idOf(d, "▁hello")}));
}

}  // namespace
}  // namespace ingot
