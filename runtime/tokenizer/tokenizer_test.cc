// Tests of the byte-level BPE tokenizer on a small handmade vocabulary.
#include "runtime/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <random>

#include "runtime/tokenizer/byte_level.h"
#include "schemas/artifact_generated.h"

namespace ingot {
namespace {

/// 256 byte tokens (id == byte), then merged tokens, then special tokens.
TokenizerData smallBpeData(std::vector<std::string> merges) {
  TokenizerData d;
  d.kind = TokenizerKind::kByteLevelBpe;
  d.preTokenizer = "gpt2";
  for (int b = 0; b < 256; ++b) d.tokens.push_back(byteLevelChar(static_cast<uint8_t>(b)));
  d.tokenTypes.assign(256, TokenType::kNormal);
  for (const std::string& m : merges) {
    size_t sp = m.find(' ');
    d.tokens.push_back(m.substr(0, sp) + m.substr(sp + 1));
    d.tokenTypes.push_back(TokenType::kNormal);
  }
  d.merges = std::move(merges);
  for (auto [text, type] : {std::pair<const char*, TokenType>{"<|im_start|>", TokenType::kControl},
                            {"<|im_end|>", TokenType::kControl},
                            {"<user>", TokenType::kUserDefined}}) {
    d.tokens.push_back(text);
    d.tokenTypes.push_back(type);
  }
  d.bosId = static_cast<int32_t>(d.tokens.size()) - 3;  // <|im_start|>
  d.eosId = d.bosId + 1;
  return d;
}

int32_t idOf(const TokenizerData& d, const std::string& text) {
  for (size_t i = 0; i < d.tokens.size(); ++i) {
    if (d.tokens[i] == text) return static_cast<int32_t>(i);
  }
  ADD_FAILURE() << "no token " << text;
  return -1;
}

Tokenizer make(TokenizerData d) {
  auto t = Tokenizer::create(std::move(d));
  EXPECT_TRUE(t.ok()) << t.status().toString();
  return *std::move(t);
}

TEST(ByteLevelBpe, MergesByRankIntoOneToken) {
  TokenizerData d = smallBpeData({"h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or"});
  Tokenizer t = make(d);
  EXPECT_EQ(t.encode("hello", false, false), std::vector<int32_t>{idOf(d, "hello")});
  EXPECT_EQ(t.encode("hello wor", false, false),
            (std::vector<int32_t>{idOf(d, "hello"), idOf(d, "Ġwor")}));
}

TEST(ByteLevelBpe, LowerRankWinsOverlappingPairs) {
  TokenizerData ab = smallBpeData({"a b", "b c"});
  EXPECT_EQ(make(ab).encode("abc", false, false),
            (std::vector<int32_t>{idOf(ab, "ab"), 'c'}));
  TokenizerData bc = smallBpeData({"b c", "a b"});
  EXPECT_EQ(make(bc).encode("abc", false, false),
            (std::vector<int32_t>{'a', idOf(bc, "bc")}));
}

TEST(ByteLevelBpe, EqualRankPairsMergeLeftmostFirst) {
  TokenizerData d = smallBpeData({"a a"});
  EXPECT_EQ(make(d).encode("aaa", false, false), (std::vector<int32_t>{idOf(d, "aa"), 'a'}));
}

TEST(ByteLevelBpe, ParsesControlTokensOnlyWhenAsked) {
  TokenizerData d = smallBpeData({});
  Tokenizer t = make(d);
  std::vector<int32_t> parsed = t.encode("<|im_start|>hi<|im_end|>", false, true);
  EXPECT_EQ(parsed, (std::vector<int32_t>{d.bosId, 'h', 'i', d.eosId}));
  std::vector<int32_t> plain = t.encode("<|im_start|>hi", false, false);
  EXPECT_EQ(plain.size(), std::string("<|im_start|>hi").size());  // one byte token each
  EXPECT_EQ(t.decode(plain, true), "<|im_start|>hi");
}

TEST(ByteLevelBpe, UserDefinedTokensAreAlwaysMatched) {
  TokenizerData d = smallBpeData({});
  Tokenizer t = make(d);
  EXPECT_EQ(t.encode("a<user>b", false, false),
            (std::vector<int32_t>{'a', idOf(d, "<user>"), 'b'}));
  EXPECT_EQ(t.decode(t.encode("a<user>b", false, false), true), "a<user>b");
}

TEST(ByteLevelBpe, AddsBosAndEosOnlyWhenTheDataSaysSo) {
  TokenizerData d = smallBpeData({});
  d.addBos = true;
  d.addEos = true;
  Tokenizer t = make(d);
  EXPECT_EQ(t.encode("x", true, false), (std::vector<int32_t>{d.bosId, 'x', d.eosId}));
  EXPECT_EQ(t.encode("x", false, false), std::vector<int32_t>{'x'});
  EXPECT_EQ(t.encode("", true, false), (std::vector<int32_t>{d.bosId, d.eosId}));
}

TEST(ByteLevelBpe, DecodeSkipsSpecialTokensWhenAsked) {
  TokenizerData d = smallBpeData({});
  Tokenizer t = make(d);
  std::vector<int32_t> ids = t.encode("<|im_start|>ok<|im_end|>", false, true);
  EXPECT_EQ(t.decode(ids, false), "<|im_start|>ok<|im_end|>");
  EXPECT_EQ(t.decode(ids, true), "ok");
  EXPECT_EQ(t.tokenPiece(' '), " ");
  EXPECT_EQ(t.tokenPiece(-1), "");
  EXPECT_EQ(t.tokenPiece(1 << 20), "");
}

TEST(ByteLevelBpe, RoundTripsRandomBytesIncludingInvalidUtf8) {
  Tokenizer t = make(smallBpeData({"h e", "Ġ t", "e r"}));
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::string s(rng() % 64, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 4 == 0 ? rng() % 256 : " the\n\t1é"[rng() % 9]);
    EXPECT_EQ(t.decode(t.encode(s, false, false), false), s);
  }
}

TEST(ByteLevelBpe, RejectsMergeNamingAnUnknownToken) {
  TokenizerData d = smallBpeData({"h e"});
  d.merges.push_back("he zzz");
  auto t = Tokenizer::create(d);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("merge #1 'he zzz' names unknown token 'zzz'"),
            std::string::npos)
      << t.status().message();
}

TEST(ByteLevelBpe, RejectsMergeWithoutSeparator) {
  TokenizerData d = smallBpeData({});
  d.merges.push_back("ab");
  auto t = Tokenizer::create(d);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("has no space"), std::string::npos);
}

TEST(ByteLevelBpe, RejectsUnknownPreTokenizerAndBadIds) {
  TokenizerData d = smallBpeData({});
  d.preTokenizer = "klingon";
  auto t = Tokenizer::create(d);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("'klingon'"), std::string::npos);

  TokenizerData e = smallBpeData({});
  e.bosId = 1 << 20;
  auto u = Tokenizer::create(e);
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.status().message().find("bos id"), std::string::npos);

  TokenizerData f = smallBpeData({});
  f.tokenTypes.pop_back();
  EXPECT_FALSE(Tokenizer::create(f).ok());
  EXPECT_FALSE(Tokenizer::create(TokenizerData{}).ok());
}

TEST(TokenizerData, ConvertsFromManifest) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<std::string> tokens = {"<unk>", "a", "b", "ab"};
  std::vector<schema::TokenAttr> attrs = {schema::TokenAttr::Unknown, schema::TokenAttr::Normal,
                                          schema::TokenAttr::Normal, schema::TokenAttr::Normal};
  std::vector<std::string> merges = {"a b"};
  auto tokenOffsets = fbb.CreateVectorOfStrings(tokens);
  auto mergeOffsets = fbb.CreateVectorOfStrings(merges);
  auto def = schema::CreateTokenizerDef(
      fbb, schema::TokenizerKind::ByteLevelBpe, fbb.CreateString("smollm"), tokenOffsets, 0,
      fbb.CreateVector(attrs), mergeOffsets,
      /*bos=*/-1, /*eos=*/3, /*pad=*/-1, /*unk=*/0, false, false, fbb.CreateString("{{ x }}"));
  fbb.Finish(def);
  auto* parsed = flatbuffers::GetRoot<schema::TokenizerDef>(fbb.GetBufferPointer());
  auto data = tokenizerDataFromManifest(parsed);
  ASSERT_TRUE(data.ok()) << data.status().toString();
  EXPECT_EQ(data->kind, TokenizerKind::kByteLevelBpe);
  EXPECT_EQ(data->preTokenizer, "smollm");
  EXPECT_EQ(data->tokens, tokens);
  EXPECT_EQ(data->tokenTypes[0], TokenType::kUnknown);
  EXPECT_EQ(data->merges, merges);
  EXPECT_EQ(data->bosId, -1);
  EXPECT_EQ(data->eosId, 3);
  EXPECT_EQ(data->unkId, 0);
  EXPECT_EQ(data->chatTemplate, "{{ x }}");
  EXPECT_FALSE(tokenizerDataFromManifest(nullptr).ok());
}

TEST(TokenizerData, RejectsManifestArraysOfTheWrongLength) {
  flatbuffers::FlatBufferBuilder fbb;
  auto tokens = fbb.CreateVectorOfStrings({"a", "b"});
  auto scores = fbb.CreateVector(std::vector<float>{1.0f});
  auto def = schema::CreateTokenizerDef(fbb, schema::TokenizerKind::SentencePieceBpe, 0, tokens,
                                        scores);
  fbb.Finish(def);
  auto data = tokenizerDataFromManifest(
      flatbuffers::GetRoot<schema::TokenizerDef>(fbb.GetBufferPointer()));
  ASSERT_FALSE(data.ok());
  EXPECT_NE(data.status().message().find("1 scores for 2 tokens"), std::string::npos);
}

TEST(TokenizerData, ParsesTextDumpAndRejectsBadLines) {
  auto ok = tokenizerDataFromText(
      "ingot-tokenizer-text 1\nkind gpt2\npre smollm\nbos 1\nadd_bos 1\n"
      "chat_template a\\nb\ntokens 2\n1 <s>\n0 a\\\\b\nmerges 0\n");
  ASSERT_TRUE(ok.ok()) << ok.status().toString();
  EXPECT_EQ(ok->tokens, (std::vector<std::string>{"<s>", "a\\b"}));
  EXPECT_EQ(ok->tokenTypes[0], TokenType::kControl);
  EXPECT_EQ(ok->chatTemplate, "a\nb");
  EXPECT_TRUE(ok->addBos);
  EXPECT_EQ(ok->bosId, 1);
  EXPECT_FALSE(tokenizerDataFromText("nonsense\n").ok());
  EXPECT_FALSE(tokenizerDataFromText("ingot-tokenizer-text 1\ntokens 5\n0 a\n").ok());
  EXPECT_FALSE(tokenizerDataFromText("ingot-tokenizer-text 1\ntokens 1\n9 a\n").ok());
  EXPECT_FALSE(tokenizerDataFromText("ingot-tokenizer-text 1\nwhat 1\n").ok());
}

}  // namespace
}  // namespace ingot
