// Tokenizer: text <-> token ids for byte-level BPE and SentencePiece-style BPE vocabularies.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "runtime/tokenizer/tokenizer_data.h"

namespace ingot {

/// Encodes and decodes text the way llama.cpp's tokenizer does for the same GGUF data.
/// Immutable after create(): thread-safe, and cheap to copy (copies share the tables).
class Tokenizer {
 public:
  /// Builds lookup tables and validates the data (merges name known tokens, special ids
  /// are in range, the pre-tokenizer is known). Errors are one line.
  static StatusOr<Tokenizer> create(TokenizerData data);

  /// Token ids of `text` (UTF-8; invalid bytes are encoded as their byte tokens).
  /// `addSpecial`: prepend BOS / append EOS where the data says add_bos / add_eos.
  /// `parseSpecial`: text like "<|im_start|>" becomes that control token; otherwise only
  /// user-defined tokens are matched and control-token text is tokenized as plain text.
  std::vector<int32_t> encode(std::string_view text, bool addSpecial, bool parseSpecial) const;

  /// The text of `ids`. `skipSpecial` drops control and unknown tokens. For SentencePiece
  /// vocabularies the dummy-prefix space of the first piece is removed, so
  /// decode(encode(x)) == x for text without special tokens.
  std::string decode(const std::vector<int32_t>& ids, bool skipSpecial) const;

  /// The bytes one token stands for (may be part of a UTF-8 character); control tokens
  /// give their text. Empty for an id out of range.
  std::string tokenPiece(int32_t id) const;

  /// True for control and unknown tokens (what decode's skipSpecial drops).
  bool isSpecial(int32_t id) const;
  /// True when decoding strips one leading space from the first text piece.
  bool stripsLeadingSpace() const;

  size_t vocabSize() const;
  const TokenizerData& data() const;
  int32_t bosId() const { return data().bosId; }
  int32_t eosId() const { return data().eosId; }

 private:
  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace ingot
