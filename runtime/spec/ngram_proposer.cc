// NgramProposer: prompt-lookup drafting — continues the text with what followed the most
// recent earlier occurrence of its last few tokens, from an index updated per token.
#include "runtime/spec/ngram_proposer.h"

#include <algorithm>
#include <cassert>

namespace ingot {
namespace {

/// splitmix64's finalizer: a cheap bijective mix with good avalanche.
uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

NgramProposer::NgramProposer(NgramConfig config) : config_(config) {
  assert(config_.min_ngram >= 1 && config_.max_ngram >= config_.min_ngram);
  tables_.resize(config_.max_ngram - config_.min_ngram + 1);
}

uint64_t NgramProposer::hashNgram(int64_t end, int32_t n) const {
  uint64_t h = mix(static_cast<uint64_t>(n));
  for (int64_t i = end - n; i < end; ++i) h = mix(h ^ static_cast<uint32_t>(history_[i]));
  return h;
}

bool NgramProposer::sameNgram(int64_t end_a, int64_t end_b, int32_t n) const {
  return std::equal(history_.begin() + (end_a - n), history_.begin() + end_a,
                    history_.begin() + (end_b - n));
}

void NgramProposer::index(int64_t end, int32_t n) {
  // The n-gram history_[end - n, end) is followed by the token at `end`.
  Entry& e = tables_[n - config_.min_ngram][hashNgram(end, n)];
  const int32_t next = history_[end];
  int32_t keep = e.count;
  for (int32_t i = 0; i < e.count; ++i) {
    if (history_[e.starts[i]] == next) {  // same continuation token: it moves to the front
      keep = i;
      break;
    }
  }
  if (keep == e.count && e.count < kMaxNgramContinuations) ++e.count;
  const int32_t last = std::min(keep, kMaxNgramContinuations - 1);
  for (int32_t i = last; i > 0; --i) e.starts[i] = e.starts[i - 1];
  e.starts[0] = end;
}

void NgramProposer::append(int32_t token) {
  history_.push_back(token);
  const int64_t end = static_cast<int64_t>(history_.size()) - 1;  // the new token's index
  for (int32_t n = config_.min_ngram; n <= config_.max_ngram && n <= end; ++n) index(end, n);
}

void NgramProposer::append(const std::vector<int32_t>& tokens) {
  for (int32_t t : tokens) append(t);
}

std::vector<int64_t> NgramProposer::continuations(int32_t n, int32_t max) const {
  assert(n >= config_.min_ngram && n <= config_.max_ngram);
  std::vector<int64_t> out;
  const int64_t len = static_cast<int64_t>(history_.size());
  if (len < n || max <= 0) return out;
  const auto& table = tables_[n - config_.min_ngram];
  auto it = table.find(hashNgram(len, n));
  if (it == table.end()) return out;
  for (int32_t i = 0; i < it->second.count && static_cast<int32_t>(out.size()) < max; ++i) {
    int64_t start = it->second.starts[i];
    if (sameNgram(start, len, n)) out.push_back(start);
  }
  return out;
}

std::vector<int32_t> NgramProposer::proposeChain(int32_t k) const {
  if (k <= 0) return {};
  for (int32_t n = config_.max_ngram; n >= config_.min_ngram; --n) {
    std::vector<int64_t> found = continuations(n, 1);
    if (found.empty()) continue;
    const int64_t start = found[0];
    const int64_t end = std::min<int64_t>(start + k, history_.size());
    return std::vector<int32_t>(history_.begin() + start, history_.begin() + end);
  }
  return {};
}

TokenTree NgramProposer::proposeTree(int32_t k, int32_t max_branches) const {
  assert(!history_.empty());
  TokenTree tree(history_.back());
  if (k <= 0) return tree;
  std::vector<int32_t> first_tokens;
  for (int32_t n = config_.max_ngram; n >= config_.min_ngram; --n) {
    for (int64_t start : continuations(n, kMaxNgramContinuations)) {
      if (static_cast<int32_t>(first_tokens.size()) >= max_branches) return tree;
      if (std::find(first_tokens.begin(), first_tokens.end(), history_[start]) !=
          first_tokens.end())
        continue;
      first_tokens.push_back(history_[start]);
      const int64_t end = std::min<int64_t>(start + k, history_.size());
      tree.addChain(0, std::vector<int32_t>(history_.begin() + start, history_.begin() + end));
    }
  }
  return tree;
}

}  // namespace ingot
