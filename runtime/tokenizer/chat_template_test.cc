// Tests of the chat template renderer, against transformers-style renders of SmolLM2's template.
#include "runtime/tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>
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

  auto filter = ChatTemplate::parse("{{ x|tojson }}");
  ASSERT_FALSE(filter.ok());
  EXPECT_NE(filter.status().message().find("unsupported filter 'tojson'"), std::string::npos);
  EXPECT_FALSE(ChatTemplate::parse("{% for x in y %}no end").ok());
  EXPECT_FALSE(ChatTemplate::parse("{{ unclosed").ok());
  EXPECT_FALSE(ChatTemplate::parse("{% macro m() %}{% endmacro %}").ok());
}

}  // namespace
}  // namespace ingot
