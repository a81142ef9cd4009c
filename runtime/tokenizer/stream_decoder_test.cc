// Tests of the streaming detokenizer on characters split across tokens.
#include "runtime/tokenizer/stream_decoder.h"

#include <gtest/gtest.h>

#include "runtime/tokenizer/byte_level.h"

namespace ingot {
namespace {

/// A byte-level vocabulary of the 256 byte tokens (id == byte) plus one control token.
Tokenizer byteTokenizer() {
  TokenizerData d;
  d.preTokenizer = "gpt2";
  for (int b = 0; b < 256; ++b) d.tokens.push_back(byteLevelChar(static_cast<uint8_t>(b)));
  d.tokenTypes.assign(256, TokenType::kNormal);
  d.tokens.push_back("<|end|>");
  d.tokenTypes.push_back(TokenType::kControl);
  return *Tokenizer::create(d);
}

TEST(StreamDecoder, HoldsBackSplitMultiByteCharacters) {
  Tokenizer t = byteTokenizer();
  StreamDecoder s(t, true);
  std::string text = "a€🙂b";  // € is 3 bytes, 🙂 is 4
  std::vector<std::string> outputs;
  for (unsigned char c : text) outputs.push_back(s.push(c));
  EXPECT_EQ(outputs, (std::vector<std::string>{"a", "", "", "€", "", "", "", "🙂", "b"}));
  EXPECT_EQ(s.finish(), "");
}

TEST(StreamDecoder, ConcatenationEqualsDecode) {
  Tokenizer t = byteTokenizer();
  const std::string text = "héllo 世界 🦀🐍 ok";
  std::vector<int32_t> ids = t.encode(text, false, false);
  ids.insert(ids.begin() + 3, 256);  // a control token in the middle
  for (bool skip : {true, false}) {
    StreamDecoder s(t, skip);
    std::string streamed;
    for (int32_t id : ids) {
      std::string piece = s.push(id);
      EXPECT_EQ(completeUtf8Prefix(piece), piece.size()) << "emitted a partial character";
      streamed += piece;
    }
    streamed += s.finish();
    EXPECT_EQ(streamed, t.decode(ids, skip));
  }
}

TEST(StreamDecoder, FinishReplacesAnUnfinishedCharacter) {
  Tokenizer t = byteTokenizer();
  StreamDecoder s(t, true);
  EXPECT_EQ(s.push('x'), "x");
  EXPECT_EQ(s.push(0xE2), "");
  EXPECT_EQ(s.push(0x82), "");
  EXPECT_EQ(s.finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(s.push('y'), "y");  // reusable after finish()
}

TEST(StreamDecoder, LetsInvalidBytesThrough) {
  Tokenizer t = byteTokenizer();
  StreamDecoder s(t, true);
  EXPECT_EQ(s.push(0x80), "\x80");  // a stray continuation byte is never completed
  EXPECT_EQ(s.push(0xC3), "");
  EXPECT_EQ(s.push('a'), "\xC3" "a");  // the lead byte was followed by a non-continuation
}

}  // namespace
}  // namespace ingot
