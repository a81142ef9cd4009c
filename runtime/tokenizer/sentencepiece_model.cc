// SentencePiece-style BPE merging with a heap over a linked list of characters.
#include "runtime/tokenizer/sentencepiece_model.h"

#include <cstdio>
#include <queue>
#include <string>

namespace ingot {

StatusOr<SentencePieceBpe> SentencePieceBpe::create(const TokenizerData& data,
                                                    const Vocab& vocab) {
  SentencePieceBpe spm;
  spm.scores_ = data.scores;
  spm.scores_.resize(data.tokens.size(), 0.0f);
  spm.unkId_ = data.unkId;
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto it = vocab.find(name);
    spm.byteToken_[b] = it == vocab.end() ? -1 : it->second;
  }
  return spm;
}

void SentencePieceBpe::encode(std::string_view text, const Vocab& vocab,
                              std::vector<int32_t>* out) const {
  struct Symbol {
    uint32_t offset, size;  // bytes of text; size 0 once merged away
    int32_t prev, next;
  };
  struct Candidate {
    float score;
    int32_t left, right;
    uint32_t size;  // size of the merged text, to detect stale candidates
    bool operator<(const Candidate& o) const {  // max-heap: best score, then leftmost
      return score != o.score ? score < o.score : left > o.left;
    }
  };
  std::vector<Symbol> symbols;
  for (uint32_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    uint32_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (i + n > text.size()) n = static_cast<uint32_t>(text.size()) - i;
    int32_t index = static_cast<int32_t>(symbols.size());
    symbols.push_back({i, n, index - 1, i + n < text.size() ? index + 1 : -1});
    i += n;
  }
  if (symbols.empty()) return;

  std::priority_queue<Candidate> heap;
  std::string scratch;
  auto lookup = [&](uint32_t offset, uint32_t size) -> int32_t {
    scratch.assign(text.data() + offset, size);
    auto it = vocab.find(scratch);
    return it == vocab.end() ? -1 : it->second;
  };
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    uint32_t size = symbols[left].size + symbols[right].size;
    int32_t id = lookup(symbols[left].offset, size);
    if (id >= 0) heap.push({scores_[id], left, right, size});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) consider(i, i + 1);

  while (!heap.empty()) {
    Candidate c = heap.top();
    heap.pop();
    Symbol& left = symbols[c.left];
    Symbol& right = symbols[c.right];
    if (left.size == 0 || right.size == 0 || left.size + right.size != c.size) continue;
    left.size += right.size;
    right.size = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    consider(left.prev, c.left);
    consider(c.left, left.next);
  }

  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    const Symbol& s = symbols[i];
    int32_t id = lookup(s.offset, s.size);
    if (id >= 0) {
      out->push_back(id);
      continue;
    }
    // Byte fallback: only single characters can get here (merges always make tokens).
    for (uint32_t k = 0; k < s.size; ++k) {
      int32_t byteId = byteToken_[static_cast<unsigned char>(text[s.offset + k])];
      if (byteId >= 0) {
        out->push_back(byteId);
      } else if (unkId_ >= 0) {
        out->push_back(unkId_);
        break;  // one <unk> for the whole character
      }
    }
  }
}

}  // namespace ingot
