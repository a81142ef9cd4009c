// SentencePiece-style BPE (Llama 2 / Mistral): merges by token score, byte fallback.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "runtime/tokenizer/bpe_model.h"
#include "runtime/tokenizer/tokenizer_data.h"

namespace ingot {

/// SentencePiece BPE as llama.cpp runs it: the text (spaces already written as "▁") starts
/// as one symbol per UTF-8 character; repeatedly the adjacent pair whose concatenation is
/// the token with the highest score merges (ties: leftmost). A final symbol that is no token
/// becomes its bytes' <0xXX> tokens, or the unknown token where those are missing.
class SentencePieceBpe {
 public:
  static StatusOr<SentencePieceBpe> create(const TokenizerData& data, const Vocab& vocab);

  /// Appends the ids of `text` (already escaped and prefixed).
  void encode(std::string_view text, const Vocab& vocab, std::vector<int32_t>* out) const;

 private:
  std::vector<float> scores_;
  std::array<int32_t, 256> byteToken_{};  // <0xXX> tokens, -1 where missing
  int32_t unkId_ = -1;
};

}  // namespace ingot
