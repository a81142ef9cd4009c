// Tests of the chat template renderer against jinja2 renders (transformers' settings) of each family.
#include "runtime/tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

namespace ingot {
namespace {

std::string render(const std::string& source, const std::vector<ChatMessage>& messages,
                   bool addGenerationPrompt = false) {
  auto t = ChatTemplate::parse(source);
  EXPECT_TRUE(t.ok()) << t.status().toString();
  if (!t.ok()) return "<parse error>";
  auto out = t->render(messages, addGenerationPrompt, "<s>", "</s>");
  EXPECT_TRUE(out.ok()) << out.status().toString();
  return out.ok() ? *out : "<render error>";
}

TEST(ChatTemplate, MatchesTransformersOnSmolLM2Template) {
  std::ifstream in(INGOT_TOKENIZER_TEST_DATA "/smollm2_chat.json");
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json ref = nlohmann::json::parse(ss.str());
  auto t = ChatTemplate::parse(ref["template"].get<std::string>());
  ASSERT_TRUE(t.ok()) << t.status().toString();
  size_t n = 0;
  for (const auto& c : ref["cases"]) {
    std::vector<ChatMessage> messages;
    for (const auto& m : c["messages"]) messages.push_back({m["role"], m["content"]});
    auto out = t->render(messages, c["add_generation_prompt"], "<|im_start|>", "<|im_end|>");
    ASSERT_TRUE(out.ok()) << out.status().toString();
    EXPECT_EQ(*out, c["expected"].get<std::string>());
    ++n;
  }
  EXPECT_EQ(n, 8u);
}

TEST(ChatTemplate, AppliesTrimBlocksLstripBlocksAndDashes) {
  std::vector<ChatMessage> m = {{"user", "a"}, {"assistant", "b"}};
  EXPECT_EQ(render("{% for x in messages %}\n  {{ x.role }}\n{% endfor %}\n", m),
            "  user\n  assistant\n");
  EXPECT_EQ(render("  {% if true %}\nyes\n  {% endif %}\nend", m), "yes\nend");
  EXPECT_EQ(render("a  {{- 'b' -}}  \n c", m), "abc");
  EXPECT_EQ(render("x {# comment #}\ny", m), "x y");
}

TEST(ChatTemplate, EvaluatesConditionsLoopsAndSet) {
  std::vector<ChatMessage> m = {{"system", "S"}, {"user", " hi "}, {"assistant", "ok"}};
  const char* src =
      "{% set sep = '|' %}"
      "{% for msg in messages %}"
      "{% if loop.first and msg['role'] == 'system' %}[{{ msg.content }}]"
      "{% elif msg.role == 'user' %}{{ loop.index ~ ':' + msg.content|trim }}"
      "{% else %}{{ bos_token + msg.content|upper + eos_token }}{% endif %}"
      "{% if not loop.last %}{{ sep }}{% endif %}"
      "{% endfor %}"
      "{% if add_generation_prompt %}>{% endif %}"
      "{{ messages|length }}{{ 'x' if messages[-1].role is defined else 'y' }}"
      "{{ missing is defined }}{{ 'user' in ['user', 'tool'] }}";
  EXPECT_EQ(render(src, m, true), "[S]|2:hi|<s>OK</s>>3xFalseTrue");
}

TEST(ChatTemplate, ReportsRaiseExceptionAndUnsupportedSyntax) {
  auto t = ChatTemplate::parse("{{ raise_exception('roles must alternate') }}");
  ASSERT_TRUE(t.ok());
  auto out = t->render({}, false, "", "");
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("roles must alternate"), std::string::npos);

  auto names = [](const char* src) {
    auto t = ChatTemplate::parse(src);
    return t.ok() ? std::string("<parsed>") : t.status().message();
  };
  EXPECT_NE(names("{{ x|wordcount }}").find("unsupported filter 'wordcount'"), std::string::npos);
  EXPECT_NE(names("{{ x is divisible }}").find("unsupported test 'divisible'"), std::string::npos);
  EXPECT_NE(names("{{ x.format(1) }}").find("unsupported method 'format'"), std::string::npos);
  EXPECT_NE(names("{{ cycler() }}").find("unsupported function 'cycler'"), std::string::npos);
  EXPECT_NE(names("{% macro m() %}{% endmacro %}").find("unsupported statement 'macro'"),
            std::string::npos);
  EXPECT_NE(names("{% for x in y if x %}{% endfor %}").find("'for ... if'"), std::string::npos);
  EXPECT_NE(names("{% set x %}a{% endset %}").find("block 'set'"), std::string::npos);
  EXPECT_FALSE(ChatTemplate::parse("{% for x in y %}no end").ok());
  EXPECT_FALSE(ChatTemplate::parse("{{ unclosed").ok());
}

TEST(ChatTemplate, EvaluatesSlicesArithmeticNamespacesAndUnpacking) {
  std::vector<ChatMessage> m = {{"system", "S"}, {"user", "u1"}, {"assistant", "a1"}, {"user", "u2"}};
  EXPECT_EQ(render("{% for x in messages[1:] %}{{ x.role[:1] }}{% endfor %}|"
                   "{% for x in messages[::-2] %}{{ x.content }}{% endfor %}|{{ messages[-1:][0].content }}",
                   m),
            "uau|u2u1|u2");
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 * 3 + 1 }} {{ 2 ** 10 }} "
                   "{{ '-' * 3 }} {{ 'a' ~ 2 * 3 }} {{ 6 / 3 }}",
                   m),
            "3 -4 2 3.5 7 1024 --- a6 2.0");
  EXPECT_EQ(render("{% set ns = namespace(n=0, seen=false) %}{% for x in messages %}"
                   "{% if x.role == 'user' %}{% set ns.n = ns.n + 1 %}{% set ns.seen = true %}{% endif %}"
                   "{% endfor %}{{ ns.n }}{{ ns.seen }}",
                   m),
            "2True");
  EXPECT_EQ(render("{% for k, v in {'b': 1, 'a': [1, 'x']}|items %}{{ k }}={{ v|tojson }};{% endfor %}"
                   "{% for i in range(3) %}{{ loop.previtem }}{{ i }}{% endfor %}",
                   m),
            "b=1;a=[1, \"x\"];00112");
  EXPECT_EQ(render("{{ {'k': ['v', none, true], 'e': {} }|tojson(indent=2) }}", m),
            "{\n  \"k\": [\n    \"v\",\n    null,\n    true\n  ],\n  \"e\": {}\n}");
  EXPECT_EQ(render("{{ ['a', 'code', 'b']|reject('equalto', 'code')|join(', ') }}|"
                   "{{ 'a,b'.split(',')|length }}|{{ '\u00e9t\u00e9'|length }}|{{ x|default('d') }}",
                   m),
            "a, b|2|3|d");
  EXPECT_EQ(render("{% set messages = messages[1:] %}{{ messages|length }}", m), "3");
  // As in Jinja's lexer, `}}` inside brackets or a string does not close the tag.
  EXPECT_EQ(render("{{ {'a': {}}|tojson }}{{ '}}' -}} x", m), "{\"a\": {}}}}x");
}

/// Converts a JSON value (key order kept) to a template value.
jinja::Value toValue(const nlohmann::ordered_json& j) {
  using jinja::Value;
  if (j.is_null()) return Value::none();
  if (j.is_boolean()) return Value::boolean(j.get<bool>());
  if (j.is_number_integer()) return Value::integer(j.get<int64_t>());
  if (j.is_number()) return Value::number(j.get<double>());
  if (j.is_string()) return Value::string(j.get<std::string>());
  if (j.is_array()) {
    Value v = Value::emptyList();
    for (const auto& item : j) v.list->push_back(toValue(item));
    return v;
  }
  Value v = Value::emptyMap();
  for (const auto& [key, item] : j.items()) v.put(key, toValue(item));
  return v;
}

// Every supported family's published template, rendered over varied conversations (system
// or not, multi-turn, unicode, tools, generation prompt on/off), must be byte-identical to
// what jinja2 renders with transformers' settings; where the template raises, the Status
// carries its message.
TEST(ChatTemplate, MatchesTransformersOnEveryFamilyTemplate) {
  const std::string dir = INGOT_TOKENIZER_TEST_DATA "/chat_templates/";
  std::ifstream in(dir + "expected.json");
  ASSERT_TRUE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  auto ref = nlohmann::ordered_json::parse(ss.str());
  std::map<std::string, size_t> casesPerFamily;
  for (const auto& family : ref["families"]) {
    const std::string name = family["name"];
    std::ifstream tin(dir + family["template"].get<std::string>());
    std::stringstream source;
    source << tin.rdbuf();
    auto t = ChatTemplate::parse(source.str());
    ASSERT_TRUE(t.ok()) << name << ": " << t.status().toString();
    for (const auto& c : family["cases"]) {
      SCOPED_TRACE(name + " " + c["name"].get<std::string>());
      std::map<std::string, jinja::Value> vars = {
          {"messages", toValue(c["messages"])},
          {"tools", c.contains("tools") ? toValue(c["tools"]) : jinja::Value::none()},
          {"documents", jinja::Value::none()},
          {"add_generation_prompt", jinja::Value::boolean(c["add_generation_prompt"])},
          {"bos_token", jinja::Value::string(family["bos_token"])},
          {"eos_token", jinja::Value::string(family["eos_token"])}};
      auto out = t->renderVariables(vars);
      if (c.contains("error")) {
        ASSERT_FALSE(out.ok()) << *out;
        EXPECT_NE(out.status().message().find(c["error"].get<std::string>()), std::string::npos)
            << out.status().toString();
      } else {
        ASSERT_TRUE(out.ok()) << out.status().toString();
        EXPECT_EQ(*out, c["expected"].get<std::string>());
      }
      ++casesPerFamily[name];
    }
  }
  for (const char* family : {"llama2", "llama3", "llama3.1", "mistral_v0.1", "mistral_v0.2", "qwen2",
                             "qwen2.5", "smollm2", "chatml"}) {
    EXPECT_GE(casesPerFamily[family], 12u) << family;
  }
}

TEST(ChatTemplate, MistralRejectsBadRoleOrderWithTheTemplatesMessage) {
  std::ifstream in(INGOT_TOKENIZER_TEST_DATA "/chat_templates/mistral_v0.1.jinja");
  std::stringstream source;
  source << in.rdbuf();
  auto t = ChatTemplate::parse(source.str());
  ASSERT_TRUE(t.ok()) << t.status().toString();
  auto out = t->render({{"user", "a"}, {"user", "b"}}, true, "<s>", "</s>");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            "chat template: Conversation roles must alternate user/assistant/user/assistant/...");
  auto ok = t->render({{"user", "a"}, {"assistant", "b"}, {"user", "c"}}, true, "<s>", "</s>");
  ASSERT_TRUE(ok.ok()) << ok.status().toString();
  EXPECT_EQ(*ok, "<s>[INST] a [/INST]b</s>[INST] c [/INST]");
}

}  // namespace
}  // namespace ingot
