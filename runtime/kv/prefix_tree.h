// PrefixTree: a radix tree over full KV blocks of token ids, for reusing computed prefixes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "runtime/kv/block_pool.h"

namespace ingot {

/// The longest cached prefix of some tokens.
struct PrefixMatch {
  /// Physical blocks holding the prefix, in order; each retained once for the caller.
  std::vector<BlockId> blocks;
  /// Tokens the blocks cover (blocks.size() * block size).
  int32_t num_tokens = 0;
};

/// A radix tree whose edges are full blocks of token ids. A node stands for one physical
/// block holding the KV of its edge's tokens given every token on the path from the root,
/// so equal blocks after different prefixes are different nodes.
///
/// The tree holds no references: a cached block is kept alive by the sequences using it and,
/// once none do, stays cached as "evictable" until evicted least-recently-used.
///
/// Invariants (enforced here and relied on by BlockPool::allocate):
///   - only full blocks are cached; a cached block is never written again;
///   - a node's block is referenced only if its parent's is (sequences hold whole chains:
///     match() retains the path, insert() extends only a chain the caller holds), so every
///     evictable block is eventually evictable and eviction takes leaves before parents;
///   - eviction takes only unreferenced leaves, least recently used (match or insert) first.
class PrefixTree : public CachedBlockObserver {
 public:
  /// Attaches to `pool` as its cache observer; `pool` must outlive the tree.
  PrefixTree(BlockPool* pool, int32_t block_size);
  ~PrefixTree() override;
  PrefixTree(const PrefixTree&) = delete;
  PrefixTree& operator=(const PrefixTree&) = delete;

  /// The longest cached prefix of the first `max_tokens` of `tokens` (whole blocks only),
  /// retaining its blocks for the caller and marking them used now.
  PrefixMatch match(const std::vector<int32_t>& tokens, size_t max_tokens = SIZE_MAX);

  /// Caches the full blocks of a sequence: `blocks[i]` holds the KV of tokens
  /// [i * B, (i + 1) * B) given everything before. Only the first tokens.size() / B blocks
  /// are considered; each must be referenced by the caller. Where a block's position is
  /// already cached with a different physical block, the walk stops there (the caller's
  /// duplicate stays private) so the chain invariant holds. Returns how many leading blocks
  /// are now the cached ones for their position.
  int32_t insert(const std::vector<int32_t>& tokens, const std::vector<BlockId>& blocks);

  /// insert() for a sequence whose first `num_chained` blocks are already the cached ones
  /// for their positions (an earlier insert() or extend() returned at least that): considers
  /// blocks [num_chained, num_blocks) only, starting from the node of blocks[num_chained - 1]
  /// instead of walking from the root, so caching a long sequence block by block stays
  /// linear. Returns how many leading blocks are now cached for their positions.
  int32_t extend(const std::vector<int32_t>& tokens, const std::vector<BlockId>& blocks,
                 int32_t num_blocks, int32_t num_chained);

  /// Frees up to `n` unreferenced cached blocks, least recently used leaves first; returns
  /// how many went back to the pool's free list.
  int32_t evict(int32_t n) override;

  /// Counts one lookup: `hit` of `total` prompt tokens were served from the cache.
  void recordLookup(int64_t total, int64_t hit) {
    hit_tokens_ += hit;
    miss_tokens_ += total - hit;
  }
  /// Prompt tokens served from the cache so far (for /metrics).
  int64_t hitTokens() const { return hit_tokens_; }
  /// Prompt tokens looked up and not found so far (for /metrics).
  int64_t missTokens() const { return miss_tokens_; }
  /// Blocks in the tree (referenced or not).
  int32_t numCachedBlocks() const { return num_nodes_; }
  /// True when `block` is a node of the tree.
  bool contains(BlockId block) const;

  void onCachedBlockUnreferenced(BlockId block) override;
  void onCachedBlockReferenced(BlockId block) override;

 private:
  struct Node {
    BlockId block = -1;  // -1 for the root
    Node* parent = nullptr;
    std::vector<int32_t> key;  // the block's token ids
    std::map<std::vector<int32_t>, std::unique_ptr<Node>> children;
    uint64_t last_use = 0;
    bool in_lru = false;
  };

  void touch(Node* node, uint64_t tick);
  /// Puts the node in the LRU set exactly when it is an unreferenced leaf.
  void refreshLru(Node* node);

  BlockPool* pool_;
  int32_t block_size_;
  Node root_;
  std::vector<Node*> node_of_block_;  // indexed by BlockId; null when not cached
  /// Evictable leaves ordered by (last use, block).
  std::set<std::pair<uint64_t, BlockId>> lru_;
  uint64_t clock_ = 0;
  int32_t num_nodes_ = 0;
  int64_t hit_tokens_ = 0;
  int64_t miss_tokens_ = 0;
};

}  // namespace ingot
