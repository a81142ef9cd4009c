// ChatTemplate: renders a checkpoint's Jinja chat template (a small Jinja subset) to a prompt.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "runtime/tokenizer/jinja_value.h"

namespace ingot {

/// One chat message.
struct ChatMessage {
  std::string role;     // "system", "user", "assistant", ...
  std::string content;
};

/// A parsed chat template. Implements the Jinja subset chat templates of the supported
/// families use, with transformers' settings (trim_blocks, lstrip_blocks):
///   {{ expr }}, {% if/elif/else/endif %}, {% for x in xs %} and {% for k, v in pairs %}
///   with loop.index/index0/revindex/first/last/length/previtem/nextitem, {% set x = expr %},
///   {% set ns.attr = expr %} on a namespace(), {# comments #}, `-` whitespace control;
///   expressions: string/int/float/bool/none literals, list and dict literals, variables,
///   x.y, x['y'], x[i], slices x[a:b:c], + - * / // % ** ~ == != < > <= >= and or not in,
///   `is [not] <test>` (defined, none, string, number, mapping, iterable, equalto, ...),
///   `a if c else b`, filters (tojson(indent=), items, join, select/reject, length, trim,
///   default, ...), string and dict methods (strip, split, startswith, items, get, ...),
///   range(), namespace(), and raise_exception(msg) (rendering fails with msg).
/// Chosen over a Jinja library because no C++ Jinja engine is packaged for Debian and the
/// templates need only this much; anything outside the subset is a parse error naming it.
class ChatTemplate {
 public:
  static StatusOr<ChatTemplate> parse(const std::string& source);

  /// Renders with the variables transformers passes: messages, add_generation_prompt,
  /// bos_token, eos_token.
  StatusOr<std::string> render(const std::vector<ChatMessage>& messages,
                               bool addGenerationPrompt, const std::string& bosToken,
                               const std::string& eosToken) const;

  /// Renders with any top-level variables (messages carrying tool_calls, a `tools` list,
  /// ...); a value is built with jinja::Value.
  StatusOr<std::string> renderVariables(const std::map<std::string, jinja::Value>& variables) const;

  struct Node;

 private:
  explicit ChatTemplate(std::shared_ptr<const Node> root) : root_(std::move(root)) {}
  std::shared_ptr<const Node> root_;
};

class Tokenizer;

/// The token ids of `messages` as a chat prompt: rendered with `tmpl` and the tokenizer's
/// BOS/EOS pieces, a generation prompt added, special-token strings parsed. No BOS is
/// added by the tokenizer: the template writes every special token itself (as
/// transformers' apply_chat_template(tokenize=True) does).
StatusOr<std::vector<int32_t>> encodeChatPrompt(const ChatTemplate& tmpl, const Tokenizer& tokenizer,
                                                const std::vector<ChatMessage>& messages);

}  // namespace ingot
