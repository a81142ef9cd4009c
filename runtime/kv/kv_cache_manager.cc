// KvCacheManager: admission with prefix reuse, appends, forks, and returning blocks.
#include "runtime/kv/kv_cache_manager.h"

#include <string>
#include <utility>

namespace ingot {
namespace {

int32_t blocksFor(int64_t tokens, int32_t block_size) {
  return static_cast<int32_t>((tokens + block_size - 1) / block_size);
}

Status unknownSequence(SeqId seq) {
  return notFound("kv cache: unknown sequence " + std::to_string(seq));
}

}  // namespace

KvCacheManager::KvCacheManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_cache)
    : block_size_(block_size > 0 ? block_size : kDefaultKvBlockSize),
      prefix_cache_(enable_prefix_cache),
      pool_(num_blocks),
      tree_(&pool_, block_size_) {}

KvCacheManager::Sequence* KvCacheManager::find(SeqId seq) {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? nullptr : &it->second;
}

const KvCacheManager::Sequence* KvCacheManager::find(SeqId seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? nullptr : &it->second;
}

bool KvCacheManager::canAdmit(int32_t num_tokens) const {
  // A hit needs fewer new blocks than it takes out of the evictable set, so ignoring hits
  // is safe: canAdmit(n) implies admit() of n tokens succeeds.
  return num_tokens >= 0 && blocksFor(num_tokens, block_size_) <= pool_.numAvailable();
}

StatusOr<SequenceKv> KvCacheManager::admit(const std::vector<int32_t>& prompt) {
  if (prompt.empty()) return invalidArgument("kv cache: admit of an empty prompt");
  PrefixMatch hit;
  if (prefix_cache_) hit = tree_.match(prompt, prompt.size() - 1);
  BlockTable table = BlockTable::adopt(
      &pool_, block_size_, hit.blocks,
      std::vector<int32_t>(prompt.begin(), prompt.begin() + hit.num_tokens));
  const std::vector<int32_t> rest(prompt.begin() + hit.num_tokens, prompt.end());
  StatusOr<AppendResult> appended = table.append(rest);
  // On failure `table` goes out of scope and releases the matched blocks: nothing is held.
  if (!appended.ok()) return appended.status();
  if (prefix_cache_) tree_.recordLookup(static_cast<int64_t>(prompt.size()), hit.num_tokens);

  const SeqId id = next_id_++;
  Sequence s{std::move(table), hit.num_tokens,
             static_cast<int32_t>(hit.blocks.size()), false};
  seqs_.emplace(id, std::move(s));
  SequenceKv result;
  result.id = id;
  result.num_cached_tokens = hit.num_tokens;
  result.num_tokens_to_compute = static_cast<int32_t>(prompt.size()) - hit.num_tokens;
  return result;
}

StatusOr<AppendResult> KvCacheManager::appendTokens(SeqId seq,
                                                    const std::vector<int32_t>& tokens) {
  Sequence* s = find(seq);
  if (s == nullptr) return unknownSequence(seq);
  return s->table.append(tokens);
}

int32_t KvCacheManager::blocksNeededToAppend(SeqId seq, int32_t num_tokens) const {
  const Sequence* s = find(seq);
  return s == nullptr ? 0 : s->table.blocksNeededToAppend(num_tokens);
}

void KvCacheManager::offerToCache(Sequence& s) {
  if (!prefix_cache_ || s.chain_broken) return;
  const int32_t full = s.num_computed / block_size_;
  if (full <= s.num_offered_blocks) return;
  // Invariant: blocks [0, num_offered_blocks) are the cached ones for their positions while
  // the chain is unbroken (they are referenced by this sequence, so never evicted).
  const int32_t chained =
      tree_.extend(s.table.tokens(), s.table.blocks(), full, s.num_offered_blocks);
  s.num_offered_blocks = full;
  if (chained < full) s.chain_broken = true;
}

Status KvCacheManager::markComputed(SeqId seq, int32_t num_tokens) {
  Sequence* s = find(seq);
  if (s == nullptr) return unknownSequence(seq);
  if (num_tokens < s->num_computed || num_tokens > s->table.numTokens())
    return invalidArgument("kv cache: markComputed(" + std::to_string(num_tokens) +
                           ") outside [" + std::to_string(s->num_computed) + ", " +
                           std::to_string(s->table.numTokens()) + "]");
  s->num_computed = num_tokens;
  offerToCache(*s);
  return okStatus();
}

Status KvCacheManager::truncate(SeqId seq, int32_t num_tokens) {
  Sequence* s = find(seq);
  if (s == nullptr) return unknownSequence(seq);
  if (num_tokens < s->num_computed)
    return invalidArgument("kv cache: truncate(" + std::to_string(num_tokens) +
                           ") below the " + std::to_string(s->num_computed) +
                           " computed tokens");
  s->table.truncate(num_tokens);
  return okStatus();
}

Status KvCacheManager::rewriteTokens(SeqId seq, int32_t pos,
                                     const std::vector<int32_t>& tokens) {
  Sequence* s = find(seq);
  if (s == nullptr) return unknownSequence(seq);
  const int64_t end = static_cast<int64_t>(pos) + static_cast<int64_t>(tokens.size());
  if (pos < s->num_computed || end > s->table.numTokens())
    return invalidArgument("kv cache: rewriteTokens at [" + std::to_string(pos) + ", " +
                           std::to_string(end) + ") outside the uncomputed tokens [" +
                           std::to_string(s->num_computed) + ", " +
                           std::to_string(s->table.numTokens()) + ")");
  s->table.setTokens(pos, tokens);
  return okStatus();
}

StatusOr<SeqId> KvCacheManager::fork(SeqId seq) {
  Sequence* s = find(seq);
  if (s == nullptr) return unknownSequence(seq);
  Sequence child{s->table.fork(), s->num_computed, s->num_offered_blocks, s->chain_broken};
  const SeqId id = next_id_++;
  seqs_.emplace(id, std::move(child));
  return id;
}

Status KvCacheManager::free(SeqId seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return unknownSequence(seq);
  offerToCache(it->second);
  seqs_.erase(it);  // the table releases its blocks
  return okStatus();
}

int32_t KvCacheManager::numComputedTokens(SeqId seq) const {
  const Sequence* s = find(seq);
  return s == nullptr ? 0 : s->num_computed;
}

const BlockTable* KvCacheManager::table(SeqId seq) const {
  const Sequence* s = find(seq);
  return s == nullptr ? nullptr : &s->table;
}

KvUsage KvCacheManager::usage() const {
  KvUsage u;
  u.total = pool_.numBlocks();
  u.used = pool_.numInUse();
  u.cached = pool_.numEvictable();
  u.free = pool_.numFree();
  return u;
}

}  // namespace ingot
