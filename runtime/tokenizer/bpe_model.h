// Byte-level BPE: merges ranked pairs of byte-level symbols inside one pre-tokenized word.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/base/status.h"
#include "runtime/tokenizer/tokenizer_data.h"

namespace ingot {

/// Token text -> id (for duplicated texts the highest id wins, as in llama.cpp).
using Vocab = std::unordered_map<std::string, int32_t>;

/// The merge table of a byte-level BPE vocabulary. A word's bytes start as one symbol each
/// (the token of that byte's GPT-2 character); the adjacent pair whose merge has the lowest
/// rank merges first (ties: leftmost), until no ranked pair is left.
class ByteLevelBpe {
 public:
  /// Checks every merge: both sides and their concatenation must be tokens.
  /// `ignoreMerges`: a word that is itself a token is emitted whole (Llama 3).
  static StatusOr<ByteLevelBpe> create(const TokenizerData& data, const Vocab& vocab,
                                       bool ignoreMerges);

  /// Appends the ids of one word given as raw bytes.
  void encodeWord(std::string_view word, const Vocab& vocab, std::vector<int32_t>* out) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  static uint64_t pairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  const Merge* findMerge(int32_t left, int32_t right) const;

  std::array<int32_t, 256> byteToken_{};  // -1 where the byte's character is not a token
  std::unordered_map<uint64_t, Merge> merges_;
  bool ignoreMerges_ = false;
  int32_t unkId_ = -1;
};

}  // namespace ingot
