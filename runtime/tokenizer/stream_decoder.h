// StreamDecoder: turns generated token ids into text pieces that are always whole UTF-8.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/tokenizer/tokenizer.h"

namespace ingot {

/// Incremental detokenizer for streaming generation: push() returns the text completed by
/// one more token, holding back the bytes of a UTF-8 character split across tokens
/// (byte-level and <0xXX> tokens often carry part of one). The concatenation of every
/// push() and finish() equals Tokenizer::decode of all ids, except that finish() turns an
/// unfinished character at the very end into U+FFFD.
class StreamDecoder {
 public:
  /// `tokenizer` must outlive the decoder.
  StreamDecoder(const Tokenizer& tokenizer, bool skipSpecial)
      : tokenizer_(&tokenizer), skipSpecial_(skipSpecial) {}

  /// Text made complete by `id` (possibly empty).
  std::string push(int32_t id);
  /// Flushes what is held back; the decoder can then be reused for a new sequence.
  std::string finish();

 private:
  const Tokenizer* tokenizer_;
  bool skipSpecial_;
  bool first_ = true;    // no text piece seen yet (for the SentencePiece leading space)
  std::string pending_;  // bytes of an unfinished UTF-8 character
};

/// Number of leading bytes of `s` that end on a UTF-8 character boundary, treating a final
/// incomplete (but so far valid) multi-byte sequence as unfinished. Invalid bytes count as
/// complete so they are never held back forever.
size_t completeUtf8Prefix(const std::string& s);

}  // namespace ingot
