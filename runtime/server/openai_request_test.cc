// Request parsing: fields map onto SamplingParams; each bad input is a 400 naming its field.
#include "runtime/server/openai_request.h"

#include <gtest/gtest.h>

namespace ingot::server {
namespace {

GenerateRequest parseOk(const std::string& body, RequestKind kind = RequestKind::kCompletion) {
  GenerateRequest r;
  ApiError e;
  EXPECT_TRUE(parseGenerateRequest(body, kind, 42, &r, &e)) << e.message;
  return r;
}

ApiError parseFails(const std::string& body, RequestKind kind = RequestKind::kCompletion) {
  GenerateRequest r;
  ApiError e;
  EXPECT_FALSE(parseGenerateRequest(body, kind, 42, &r, &e)) << body;
  EXPECT_EQ(e.status, 400);
  return e;
}

TEST(OpenAiRequest, MapsCompletionFieldsOntoSamplingParams) {
  GenerateRequest r = parseOk(
      R"({"model":"m","prompt":"hi","max_tokens":7,"temperature":0.5,"top_p":0.9,"top_k":5,)"
      R"("min_p":0.1,"presence_penalty":1,"frequency_penalty":-1,"repetition_penalty":1.2,)"
      R"("seed":9,"stop":["a","b"],"logprobs":3,"ignore_eos":true,"n":2,"stream":true,)"
      R"("stream_options":{"include_usage":true},"echo":true})");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.prompt, "hi");
  EXPECT_EQ(*r.sampling.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 5);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 1.0f);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, -1.0f);
  EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.2f);
  EXPECT_EQ(r.sampling.seed, 9u);
  EXPECT_EQ(r.sampling.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r.sampling.logprobs);
  EXPECT_EQ(r.sampling.top_logprobs, 3);
  EXPECT_TRUE(r.sampling.ignore_eos);
  EXPECT_EQ(r.n, 2);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.stream_usage);
  EXPECT_TRUE(r.echo);
}

TEST(OpenAiRequest, DefaultsFollowOpenAi) {
  GenerateRequest r = parseOk(R"({"prompt":"hi"})");
  EXPECT_EQ(*r.sampling.max_tokens, 16);  // completions default
  EXPECT_EQ(r.sampling.seed, 42u);        // the caller's per-request seed
  EXPECT_FALSE(r.sampling.logprobs);
  GenerateRequest chat = parseOk(R"({"messages":[{"role":"user","content":"x"}]})", RequestKind::kChat);
  EXPECT_FALSE(chat.sampling.max_tokens.has_value());
}

TEST(OpenAiRequest, AcceptsTokenIdPromptsAndStringStop) {
  GenerateRequest r = parseOk(R"({"prompt":[1,2,3],"stop":"x"})");
  EXPECT_TRUE(r.prompt_is_ids);
  EXPECT_EQ(r.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(r.sampling.stop, (std::vector<std::string>{"x"}));
}

TEST(OpenAiRequest, ParsesChatMessagesAndLogprobs) {
  GenerateRequest r = parseOk(
      R"({"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],)"
      R"("logprobs":true,"top_logprobs":2,"max_completion_tokens":3})",
      RequestKind::kChat);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1].content, "ab");
  EXPECT_TRUE(r.sampling.logprobs);
  EXPECT_EQ(r.sampling.top_logprobs, 2);
  EXPECT_EQ(*r.sampling.max_tokens, 3);
}

TEST(OpenAiRequest, RejectsMalformedJson) {
  EXPECT_EQ(parseFails(R"({"prompt": "x",)").code, "invalid_json");
  EXPECT_EQ(parseFails(R"([1,2])").code, "invalid_json");
}

TEST(OpenAiRequest, RejectsWrongTypesNamingTheField) {
  struct Case { const char* body; const char* field; };
  for (Case c : {Case{R"({"prompt":"x","max_tokens":"5"})", "max_tokens"},
                 Case{R"({"prompt":"x","temperature":"hot"})", "temperature"},
                 Case{R"({"prompt":"x","stream":1})", "stream"},
                 Case{R"({"prompt":"x","n":1.5})", "n"},
                 Case{R"({"prompt":"x","stop":3})", "stop"},
                 Case{R"({"prompt":"x","model":3})", "model"},
                 Case{R"({"prompt":{"a":1}})", "prompt"},
                 Case{R"({"prompt":"x","logprobs":true})", "logprobs"}}) {
    ApiError e = parseFails(c.body);
    EXPECT_EQ(e.param, c.field) << c.body;
    EXPECT_NE(e.message.find(c.field), std::string::npos) << e.message;
  }
  EXPECT_EQ(parseFails(R"({"messages":"hi"})", RequestKind::kChat).param, "messages");
  EXPECT_EQ(parseFails(R"({"messages":[{"role":"user"}],"top_logprobs":2})", RequestKind::kChat).param,
            "top_logprobs");
}

TEST(OpenAiRequest, RejectsOutOfRangeValues) {
  EXPECT_EQ(parseFails(R"({"prompt":"x","temperature":3})").param, "temperature");
  EXPECT_EQ(parseFails(R"({"prompt":"x","n":0})").param, "n");
  EXPECT_EQ(parseFails(R"({"prompt":"x","max_tokens":0})").param, "max_tokens");
  EXPECT_EQ(parseFails(R"({"prompt":"x","logprobs":21})").param, "logprobs");
  EXPECT_EQ(parseFails(R"({"prompt":"x","stop":[""]})").param, "stop");
  EXPECT_EQ(parseFails(R"({"prompt":[1,-2]})").param, "prompt");
  EXPECT_EQ(parseFails(R"({"prompt":""})").param, "prompt");
  EXPECT_EQ(parseFails(R"({})").param, "prompt");
}

TEST(OpenAiRequest, RejectsInvalidUtf8) {
  EXPECT_EQ(parseFails("{\"prompt\":\"a\xff\"}").code, "invalid_utf8");
  EXPECT_EQ(parseFails("{\"prompt\":\"\xc0\xaf\"}").code, "invalid_utf8");        // overlong
  EXPECT_EQ(parseFails("{\"prompt\":\"\xed\xa0\x80\"}").code, "invalid_utf8");    // surrogate
  EXPECT_TRUE(isValidUtf8("h\xc3\xa9llo \xf0\x9f\x98\x80"));
  EXPECT_FALSE(isValidUtf8("\xe2\x82"));  // truncated
}

}  // namespace
}  // namespace ingot::server
