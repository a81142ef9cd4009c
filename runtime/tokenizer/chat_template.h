// ChatTemplate: renders a checkpoint's Jinja chat template (a small Jinja subset) to a prompt.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/base/status.h"

namespace ingot {

/// One chat message.
struct ChatMessage {
  std::string role;     // "system", "user", "assistant", ...
  std::string content;
};

/// A parsed chat template. Implements the Jinja subset chat templates of the supported
/// families use, with transformers' settings (trim_blocks, lstrip_blocks):
///   {{ expr }}, {% if/elif/else/endif %}, {% for x in xs %}...{% endfor %} with
///   loop.index/index0/first/last/length, {% set x = expr %}, {# comments #}, `-` whitespace
///   control; expressions: string/int/bool/none literals, variables, x.y, x['y'], x[i],
///   + - ~ == != < > <= >= and or not in, `is [not] defined/none/string`, `a if c else b`,
///   filters trim/length/upper/lower, string methods strip/startswith/endswith, and
///   raise_exception(msg) (rendering fails with msg).
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

  struct Node;

 private:
  explicit ChatTemplate(std::shared_ptr<const Node> root) : root_(std::move(root)) {}
  std::shared_ptr<const Node> root_;
};

}  // namespace ingot
