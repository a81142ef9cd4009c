// Byte-level BPE merging with a heap over a linked list of symbols.
#include "runtime/tokenizer/bpe_model.h"

#include <queue>

#include "runtime/tokenizer/byte_level.h"

namespace ingot {

StatusOr<ByteLevelBpe> ByteLevelBpe::create(const TokenizerData& data, const Vocab& vocab,
                                            bool ignoreMerges) {
  ByteLevelBpe bpe;
  bpe.ignoreMerges_ = ignoreMerges;
  bpe.unkId_ = data.unkId;
  for (int b = 0; b < 256; ++b) {
    auto it = vocab.find(byteLevelChar(static_cast<uint8_t>(b)));
    bpe.byteToken_[b] = it == vocab.end() ? -1 : it->second;
  }
  bpe.merges_.reserve(data.merges.size());
  for (size_t rank = 0; rank < data.merges.size(); ++rank) {
    const std::string& merge = data.merges[rank];
    auto bad = [&](const std::string& why) {
      return invalidArgument("tokenizer: merge #" + std::to_string(rank) + " '" + merge +
                             "' " + why);
    };
    // The separator is the first space after the first character (a side may not be empty).
    size_t sp = merge.find(' ', 1);
    if (sp == std::string::npos) return bad("has no space between its two sides");
    std::string left = merge.substr(0, sp), right = merge.substr(sp + 1);
    auto l = vocab.find(left), r = vocab.find(right), m = vocab.find(left + right);
    if (l == vocab.end()) return bad("names unknown token '" + left + "'");
    if (r == vocab.end()) return bad("names unknown token '" + right + "'");
    if (m == vocab.end()) return bad("makes '" + left + right + "', which is not a token");
    // An earlier (better) rank for the same pair wins.
    bpe.merges_.emplace(pairKey(l->second, r->second),
                        Merge{static_cast<int32_t>(rank), m->second});
  }
  return bpe;
}

const ByteLevelBpe::Merge* ByteLevelBpe::findMerge(int32_t left, int32_t right) const {
  if (left < 0 || right < 0) return nullptr;
  auto it = merges_.find(pairKey(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void ByteLevelBpe::encodeWord(std::string_view word, const Vocab& vocab,
                              std::vector<int32_t>* out) const {
  if (word.empty()) return;
  if (ignoreMerges_) {
    auto it = vocab.find(byteLevelEncode(word));
    if (it != vocab.end()) {
      out->push_back(it->second);
      return;
    }
  }
  if (word.size() == 1) {
    int32_t id = byteToken_[static_cast<uint8_t>(word[0])];
    if (id >= 0 || unkId_ >= 0) out->push_back(id >= 0 ? id : unkId_);
    return;
  }

  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;  // -1 at the ends; a merged-away symbol has id == kGone
  };
  static constexpr int32_t kGone = -2;
  struct Candidate {
    int32_t rank, left, right, leftId, rightId;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };

  const int32_t n = static_cast<int32_t>(word.size());
  std::vector<Symbol> symbols(n);
  for (int32_t i = 0; i < n; ++i) {
    symbols[i] = {byteToken_[static_cast<uint8_t>(word[i])], i - 1, i + 1 < n ? i + 1 : -1};
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    if (const Merge* m = findMerge(symbols[left].id, symbols[right].id)) {
      heap.push({m->rank, left, right, symbols[left].id, symbols[right].id});
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i, i + 1);

  while (!heap.empty()) {
    Candidate c = heap.top();
    heap.pop();
    Symbol& left = symbols[c.left];
    Symbol& right = symbols[c.right];
    // Stale when either side has merged since the candidate was queued.
    if (left.id != c.leftId || right.id != c.rightId || left.next != c.right) continue;
    left.id = findMerge(c.leftId, c.rightId)->result;
    right.id = kGone;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    consider(left.prev, c.left);
    consider(c.left, left.next);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    int32_t id = symbols[i].id;
    if (id >= 0) out->push_back(id);
    else if (unkId_ >= 0) out->push_back(unkId_);  // a byte whose character is no token
  }
}

}  // namespace ingot
