// PreTokenizer: splits text into words with a family's regexes (GGUF tokenizer.ggml.pre).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"

namespace ingot {

/// Splits text into the words that byte-level BPE merges inside, as llama.cpp does for
/// a given `tokenizer.ggml.pre`: the regexes apply in order, each one to every piece the
/// previous ones left (matches and the gaps between them both become pieces), and a
/// regex sees only its piece, so a look-ahead stops at the piece's end.
/// Regexes are PCRE2 with UTF + UCP, JIT-compiled. Thread-safe after create().
class PreTokenizer {
 public:
  /// Known names: "gpt2" (and "default", llama.cpp's fallback list), "llama3"/"llama-bpe"/
  /// "llama-v3", "smollm" (GPT-2 pattern after splitting every digit), "qwen2".
  static StatusOr<PreTokenizer> create(const std::string& name);
  /// A pre-tokenizer from explicit regexes (tests, tokenizer.json patterns).
  static StatusOr<PreTokenizer> fromRegexes(const std::vector<std::string>& regexes);

  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  /// The words of `text`, in order; their concatenation is `text`. Views point into text.
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  struct Regex;
  PreTokenizer();
  std::vector<std::unique_ptr<Regex>> regexes_;
};

}  // namespace ingot
