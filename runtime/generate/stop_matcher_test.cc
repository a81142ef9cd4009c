// StopMatcher and finish reasons: stop strings across pieces, overlaps, held-back text.
#include "runtime/generate/stop_matcher.h"

#include <random>

#include <gtest/gtest.h>

namespace ingot {
namespace {

/// Feeds `pieces` and returns what the stream showed, concatenated, plus the final flush.
std::string stream(StopMatcher& m, const std::vector<std::string>& pieces) {
  std::string shown;
  for (const std::string& piece : pieces) {
    shown += m.push(piece);
    if (m.stopped()) break;
  }
  shown += m.finish();
  return shown;
}

TEST(StopMatcherTest, StopStringSplitAcrossTokensIsCutBeforeIt) {
  StopMatcher m({"</end>"});
  EXPECT_EQ(m.push("Hello </"), "Hello ");  // "</" could begin the stop string
  EXPECT_EQ(m.heldBack(), 2u);
  EXPECT_EQ(m.push("en"), "");
  EXPECT_EQ(m.push("d> tail"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matchedIndex(), 0);
  EXPECT_EQ(m.emitted(), "Hello ");
  EXPECT_EQ(m.push("more"), "");
  EXPECT_EQ(m.finish(), "");
}

TEST(StopMatcherTest, HeldBackTextIsReleasedWhenItStopsMatching) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("go ST"), "go ");
  EXPECT_EQ(m.push("O"), "");
  EXPECT_EQ(m.push("P!"), "");  // completes
  EXPECT_EQ(m.emitted(), "go ");

  StopMatcher n({"STOP"});
  EXPECT_EQ(n.push("go ST"), "go ");
  EXPECT_EQ(n.push("OW"), "STOW");
  EXPECT_EQ(n.push("S"), "");
  EXPECT_EQ(n.finish(), "S");  // the end of generation flushes what was held
  EXPECT_FALSE(n.stopped());
  EXPECT_EQ(n.emitted(), "go STOWS");
}

TEST(StopMatcherTest, FirstCompletedStopWinsAmongOverlappingCandidates) {
  // "abcd" is pending while "bc" completes inside it.
  StopMatcher m({"abcd", "bc"});
  EXPECT_EQ(m.push("xab"), "x");
  EXPECT_EQ(m.push("c"), "a");
  EXPECT_EQ(m.matchedIndex(), 1);
  // Same end: the longer (earlier-starting) string wins.
  StopMatcher n({"b", "ab"});
  EXPECT_EQ(stream(n, {"zab"}), "z");
  EXPECT_EQ(n.matchedIndex(), 1);
  // A stop string that overlaps itself: "aab" inside "aaab".
  StopMatcher o({"aab"});
  EXPECT_EQ(stream(o, {"a", "a", "a", "b", "c"}), "a");
}

TEST(StopMatcherTest, ResultDoesNotDependOnHowTextIsSplit) {
  std::mt19937 gen(8);
  const std::vector<std::string> stops = {"ab", "bca", "cc", "abcab", "\n\n"};
  const std::string alphabet = "abc\nx";
  for (int trial = 0; trial < 300; ++trial) {
    std::string text;
    const int len = 1 + gen() % 30;
    for (int i = 0; i < len; ++i) text += alphabet[gen() % alphabet.size()];
    // Reference: one character at a time.
    StopMatcher one(stops);
    std::vector<std::string> chars;
    for (char c : text) chars.push_back(std::string(1, c));
    const std::string want = stream(one, chars);
    // Random pieces.
    std::vector<std::string> pieces;
    for (size_t i = 0; i < text.size();) {
      size_t take = 1 + gen() % 5;
      pieces.push_back(text.substr(i, take));
      i += take;
    }
    StopMatcher split(stops);
    EXPECT_EQ(stream(split, pieces), want) << "text " << text;
    EXPECT_EQ(split.stopped(), one.stopped());
    EXPECT_EQ(split.matchedIndex(), one.matchedIndex());
    EXPECT_EQ(split.emitted(), want);
    if (!one.stopped()) {
      EXPECT_EQ(want, text);
    }
  }
}

TEST(StopMatcherTest, WithoutStopStringsEverythingPassesThrough) {
  StopMatcher m({});
  EXPECT_EQ(m.push("abc"), "abc");
  EXPECT_EQ(m.heldBack(), 0u);
  EXPECT_EQ(m.finish(), "");
}

TEST(FinishReasonTest, StopTokensEosAndMaxTokens) {
  SamplingParams p;
  p.stop_token_ids = {7};
  p.max_tokens = 3;
  EXPECT_EQ(finishAfterToken(p, 5, 1, false), FinishReason::kNone);
  EXPECT_EQ(finishAfterToken(p, 7, 1, false), FinishReason::kStop);
  EXPECT_EQ(finishAfterToken(p, 2, 2, true), FinishReason::kStop);
  EXPECT_EQ(finishAfterToken(p, 5, 3, false), FinishReason::kLength);
  EXPECT_EQ(finishAfterToken(p, 7, 3, false), FinishReason::kStop);  // stop beats length
  p.ignore_eos = true;
  EXPECT_EQ(finishAfterToken(p, 2, 2, true), FinishReason::kNone);
  p.max_tokens.reset();
  EXPECT_EQ(finishAfterToken(p, 5, 100000, false), FinishReason::kNone);
  EXPECT_STREQ(finishReasonName(FinishReason::kStop), "stop");
  EXPECT_STREQ(finishReasonName(FinishReason::kLength), "length");
  EXPECT_STREQ(finishReasonName(FinishReason::kNone), "");
}

}  // namespace
}  // namespace ingot
