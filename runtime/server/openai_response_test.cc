// Response formatting: OpenAI object shapes, chunks, logprobs, errors and SSE framing.
#include "runtime/server/openai_response.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace ingot::server {
namespace {

using Json = nlohmann::json;

std::string piece(int32_t id) { return "t" + std::to_string(id); }

ResponseHeader header(RequestKind kind) { return {kind, "id-1", 123, "m"}; }

TEST(OpenAiResponse, CompletionHasTextUsageAndLogprobs) {
  ChoiceDelta c;
  c.text = "hello";
  c.finish_reason = "length";
  c.logprobs = {{{5, -0.5f}, {{5, -0.5f}, {6, -1.0f}}}, {{7, -INFINITY}, {}}};
  Json j = Json::parse(formatResponse(header(RequestKind::kCompletion), {c}, {3, 2}, true, piece));
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], "hello");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["total_tokens"], 5);
  const Json& lp = j["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], Json::array({"t5", "t7"}));
  EXPECT_DOUBLE_EQ(lp["token_logprobs"][0].get<double>(), -0.5);
  EXPECT_LT(lp["token_logprobs"][1].get<double>(), -1000);  // -inf is not JSON
  EXPECT_DOUBLE_EQ(lp["top_logprobs"][0]["t6"].get<double>(), -1.0);
  EXPECT_EQ(lp["text_offset"], Json::array({0, 2}));
}

TEST(OpenAiResponse, ChatMessageAndChatLogprobs) {
  ChoiceDelta c;
  c.text = "hi";
  c.finish_reason = "stop";
  c.logprobs = {{{1, -0.25f}, {{1, -0.25f}}}};
  Json j = Json::parse(formatResponse(header(RequestKind::kChat), {c}, {1, 1}, true, piece));
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "hi");
  const Json& content = j["choices"][0]["logprobs"]["content"];
  EXPECT_EQ(content[0]["token"], "t1");
  EXPECT_EQ(content[0]["bytes"], Json::array({'t', '1'}));
  EXPECT_EQ(content[0]["top_logprobs"][0]["token"], "t1");
}

TEST(OpenAiResponse, ChatChunksCarryRoleFirstAndFinishLast) {
  ChoiceDelta c;
  c.text = "a";
  Json first = Json::parse(formatChunk(header(RequestKind::kChat), {c}, true, false, piece));
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(first["choices"][0]["delta"]["content"], "a");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  ChoiceDelta end;
  end.finish_reason = "stop";
  Json last = Json::parse(formatChunk(header(RequestKind::kChat), {end}, false, false, piece));
  EXPECT_FALSE(last["choices"][0]["delta"].contains("role"));
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  Json usage = Json::parse(formatUsageChunk(header(RequestKind::kChat), {4, 2}));
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 2);
}

TEST(OpenAiResponse, PartialUtf8IsReplacedNotThrown) {
  ChoiceDelta c;
  c.text = "\xe2\x82";
  Json j = Json::parse(formatChunk(header(RequestKind::kCompletion), {c}, true, false, piece));
  EXPECT_EQ(j["choices"][0]["text"], "\xef\xbf\xbd");  // one U+FFFD for the truncated character
}

TEST(OpenAiResponse, ErrorObjectAndSseFraming) {
  Json e = Json::parse(ApiError{429, "busy", "rate_limit_error", "", "queue_full"}.toJson());
  EXPECT_EQ(e["error"]["message"], "busy");
  EXPECT_EQ(e["error"]["type"], "rate_limit_error");
  EXPECT_TRUE(e["error"]["param"].is_null());
  EXPECT_EQ(e["error"]["code"], "queue_full");
  EXPECT_EQ(sseEvent("{}"), "data: {}\n\n");
  EXPECT_STREQ(sseDone(), "data: [DONE]\n\n");
  Json models = Json::parse(formatModels("m", 1, 2048));
  EXPECT_EQ(models["data"][0]["id"], "m");
}

}  // namespace
}  // namespace ingot::server
