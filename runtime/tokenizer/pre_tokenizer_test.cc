// Tests of the pre-tokenizer regex families.
#include "runtime/tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

namespace ingot {
namespace {

std::vector<std::string> split(const std::string& name, const std::string& text) {
  auto pre = PreTokenizer::create(name);
  EXPECT_TRUE(pre.ok()) << pre.status().toString();
  std::vector<std::string> out;
  for (std::string_view w : pre->split(text)) out.emplace_back(w);
  return out;
}

using Words = std::vector<std::string>;

TEST(PreTokenizer, Gpt2KeepsTheLastSpaceOfARunWithTheNextWord) {
  EXPECT_EQ(split("gpt2", "Hello  world's 123!"),
            (Words{"Hello", " ", " world", "'s", " 123", "!"}));
  EXPECT_EQ(split("gpt2", "a \n\nb  "), (Words{"a", " \n", "\n", "b", "  "}));
}

TEST(PreTokenizer, SmolLmSplitsEveryDigit) {
  EXPECT_EQ(split("smollm", "x 1234 3.14"),
            (Words{"x", " ", "1", "2", "3", "4", " ", "3", ".", "1", "4"}));
}

TEST(PreTokenizer, Llama3GroupsUpToThreeDigits) {
  EXPECT_EQ(split("llama3", "1234567 I'M ok\n\n"),
            (Words{"123", "456", "7", " I", "'M", " ok", "\n\n"}));
}

TEST(PreTokenizer, Qwen2SplitsDigitsAndGluesPunctuationToLetters) {
  EXPECT_EQ(split("qwen2", "12 (hi)"), (Words{"1", "2", " (", "hi", ")"}));
}

TEST(PreTokenizer, UsesUnicodeCategories) {
  EXPECT_EQ(split("gpt2", "héllo 你好 ٣٤"), (Words{"héllo", " 你好", " ٣٤"}));
}

TEST(PreTokenizer, PiecesCoverTheTextEvenWithInvalidUtf8) {
  std::string text = "ab\xff\xfe cd \xc3";
  std::string joined;
  for (const std::string& w : split("smollm", text)) joined += w;
  EXPECT_EQ(joined, text);
}

TEST(PreTokenizer, RejectsUnknownNameAndBadRegex) {
  EXPECT_FALSE(PreTokenizer::create("nope").ok());
  auto bad = PreTokenizer::fromRegexes({"(unclosed"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad pre-tokenizer regex"), std::string::npos);
}

}  // namespace
}  // namespace ingot
