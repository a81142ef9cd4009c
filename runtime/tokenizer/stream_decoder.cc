// StreamDecoder: holds back a trailing partial UTF-8 character between tokens.
#include "runtime/tokenizer/stream_decoder.h"

namespace ingot {

size_t completeUtf8Prefix(const std::string& s) {
  // Look back at most 3 bytes for the start of the last character.
  size_t n = s.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    unsigned char c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t need = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3
                : (c >> 3) == 0x1E ? 4 : 1;
    return need > back ? n - back : n;  // the last character still lacks bytes
  }
  return n;  // only continuation bytes at the end: invalid, let them through
}

std::string StreamDecoder::push(int32_t id) {
  if (id < 0 || static_cast<size_t>(id) >= tokenizer_->vocabSize()) return std::string();
  if (tokenizer_->isSpecial(id) && skipSpecial_) return std::string();
  std::string piece = tokenizer_->tokenPiece(id);
  if (!tokenizer_->isSpecial(id)) {
    if (first_ && tokenizer_->stripsLeadingSpace() && !piece.empty() && piece[0] == ' ') {
      piece.erase(0, 1);
    }
    first_ = false;
  }
  pending_ += piece;
  size_t complete = completeUtf8Prefix(pending_);
  std::string out = pending_.substr(0, complete);
  pending_.erase(0, complete);
  return out;
}

std::string StreamDecoder::finish() {
  std::string out = pending_.empty() ? std::string() : std::string("\xEF\xBF\xBD");
  pending_.clear();
  first_ = true;
  return out;
}

}  // namespace ingot
