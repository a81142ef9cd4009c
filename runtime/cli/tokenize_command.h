// `ingot tokenize`: the token ids (and pieces) an artifact's tokenizer gives a text.
#pragma once

#include <ostream>
#include <string>

namespace ingot {

struct TokenizeOptions {
  std::string artifact;
  std::string text;
  /// Add BOS/EOS as the tokenizer's config says.
  bool add_special = true;
  /// Match special-token strings (e.g. <|im_start|>) in the text.
  bool parse_special = true;
  /// Print "id<TAB>piece" lines instead of one line of ids.
  bool pieces = false;
};

/// Prints the ids to `out`; returns the process exit code.
int runTokenize(const TokenizeOptions& options, std::ostream& out, std::ostream& err);

}  // namespace ingot
