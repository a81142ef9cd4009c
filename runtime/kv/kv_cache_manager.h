// KvCacheManager: the paged KV cache the scheduler talks to — sequences, prefix reuse, usage.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/base/status.h"
#include "runtime/kv/block_pool.h"
#include "runtime/kv/block_table.h"
#include "runtime/kv/prefix_tree.h"

namespace ingot {

/// Identifies a sequence inside one KvCacheManager.
using SeqId = int64_t;

/// What admit() did for a prompt.
struct SequenceKv {
  SeqId id = -1;
  /// Prompt tokens whose KV came from the prefix cache (a multiple of the block size).
  int32_t num_cached_tokens = 0;
  /// Prompt tokens the engine must still compute: positions [num_cached_tokens, prompt size).
  int32_t num_tokens_to_compute = 0;
};

/// Block usage for /metrics and admission control. used + cached + free == total.
struct KvUsage {
  int32_t total = 0;
  /// Referenced by at least one sequence.
  int32_t used = 0;
  /// Cached prefix blocks no sequence references (evictable).
  int32_t cached = 0;
  /// On the free list.
  int32_t free = 0;
};

/// The paged KV cache of one model on one device: a BlockPool shared by the sequences'
/// BlockTables and the PrefixTree.
///
/// Lifecycle of a sequence: admit(prompt) -> the engine computes the prompt's KV (in chunks)
/// and calls markComputed() after each step -> appendTokens() for each sampled token ->
/// free(). Blocks reach the prefix cache only through markComputed(): a block is cached once
/// it is full and its KV has been written, never before.
///
/// Not thread-safe: the engine's scheduling thread owns it.
class KvCacheManager {
 public:
  /// A pool of `num_blocks` blocks of `block_size` tokens; `enable_prefix_cache` = false
  /// makes admit() never reuse and free() never keep blocks.
  explicit KvCacheManager(int32_t num_blocks, int32_t block_size = kDefaultKvBlockSize,
                          bool enable_prefix_cache = true);
  KvCacheManager(const KvCacheManager&) = delete;
  KvCacheManager& operator=(const KvCacheManager&) = delete;

  /// Starts a sequence on `prompt`: reuses the longest cached prefix (whole blocks, always
  /// leaving at least the last prompt token to compute so the step yields its logits) and
  /// allocates blocks for the rest. All or nothing: on outOfKvBlocks() nothing is held.
  StatusOr<SequenceKv> admit(const std::vector<int32_t>& prompt);

  /// True when admit() of `num_tokens` prompt tokens cannot fail for lack of blocks
  /// (assumes no prefix hit, so it is conservative).
  bool canAdmit(int32_t num_tokens) const;

  /// Appends tokens (e.g. the token just sampled) to a sequence; returns their KV slots and
  /// any copy-on-write copies the backend must do first. All or nothing.
  StatusOr<AppendResult> appendTokens(SeqId seq, const std::vector<int32_t>& tokens);

  /// Blocks appendTokens(seq, n tokens) would allocate (0 for an unknown sequence).
  int32_t blocksNeededToAppend(SeqId seq, int32_t num_tokens) const;

  /// Records that the KV of the sequence's first `num_tokens` tokens is written; its full
  /// blocks among them become cached prefix blocks.
  Status markComputed(SeqId seq, int32_t num_tokens);

  /// Drops the sequence's tokens from position `num_tokens` on (rejected speculative
  /// tokens), returning blocks no longer needed. Only tokens not yet computed can go:
  /// fails when num_tokens < numComputedTokens(seq).
  Status truncate(SeqId seq, int32_t num_tokens);

  /// Records `tokens` at positions [pos, pos + size) of a sequence whose KV there is not
  /// yet marked computed (a verified speculative path moved into place), so the prefix
  /// cache keys those blocks by the right tokens once markComputed() covers them.
  Status rewriteTokens(SeqId seq, int32_t pos, const std::vector<int32_t>& tokens);

  /// A new sequence sharing all of `seq`'s blocks (parallel sampling, n > 1). Fork after
  /// the parent's KV is computed: a later copy-on-write copies what the block holds then.
  StatusOr<SeqId> fork(SeqId seq);

  /// Ends a sequence: its references go at once; its computed full blocks stay cached.
  Status free(SeqId seq);

  /// Tokens whose KV markComputed() has recorded (0 for an unknown sequence).
  int32_t numComputedTokens(SeqId seq) const;

  /// The sequence's block table (slots, blocks, tokens), or null for an unknown id.
  const BlockTable* table(SeqId seq) const;

  /// Evicts up to `n` unreferenced cached blocks, least recently used first.
  int32_t evict(int32_t n) { return tree_.evict(n); }

  KvUsage usage() const;
  int32_t blockSize() const { return block_size_; }
  int32_t numSequences() const { return static_cast<int32_t>(seqs_.size()); }
  /// Prompt tokens served from / missed by the prefix cache so far (for /metrics).
  int64_t prefixHitTokens() const { return tree_.hitTokens(); }
  int64_t prefixMissTokens() const { return tree_.missTokens(); }

  const BlockPool& pool() const { return pool_; }
  /// BlockPool::trackFreed / takeFreed of the pool.
  void trackFreedBlocks(bool on) { pool_.trackFreed(on); }
  std::vector<BlockId> takeFreedBlocks() { return pool_.takeFreed(); }
  const PrefixTree& prefixTree() const { return tree_; }

 private:
  struct Sequence {
    BlockTable table;
    /// Tokens whose KV is written.
    int32_t num_computed = 0;
    /// Leading blocks already offered to the prefix tree.
    int32_t num_offered_blocks = 0;
    /// The tree keeps another block at some position of this chain: stop offering.
    bool chain_broken = false;
  };

  Sequence* find(SeqId seq);
  const Sequence* find(SeqId seq) const;
  void offerToCache(Sequence& s);

  int32_t block_size_;
  bool prefix_cache_;
  // Declaration order matters (members die in reverse): the sequences release their blocks
  // while tree and pool exist, then the tree detaches, then the pool goes.
  BlockPool pool_;
  PrefixTree tree_;
  std::unordered_map<SeqId, Sequence> seqs_;
  SeqId next_id_ = 0;
};

}  // namespace ingot
