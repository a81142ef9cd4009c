// PrefixTree: matching, insertion and least-recently-used eviction of cached blocks.
#include "runtime/kv/prefix_tree.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace ingot {

PrefixTree::PrefixTree(BlockPool* pool, int32_t block_size)
    : pool_(pool),
      block_size_(block_size > 0 ? block_size : kDefaultKvBlockSize),
      node_of_block_(pool->numBlocks(), nullptr) {
  pool_->setObserver(this);
}

PrefixTree::~PrefixTree() { pool_->setObserver(nullptr); }

bool PrefixTree::contains(BlockId block) const {
  return block >= 0 && block < static_cast<BlockId>(node_of_block_.size()) &&
         node_of_block_[block] != nullptr;
}

void PrefixTree::refreshLru(Node* node) {
  const bool evictable = node != &root_ && node->children.empty() &&
                         pool_->refCount(node->block) == 0;
  if (evictable == node->in_lru) return;
  if (evictable) {
    lru_.insert({node->last_use, node->block});
  } else {
    lru_.erase({node->last_use, node->block});
  }
  node->in_lru = evictable;
}

void PrefixTree::touch(Node* node, uint64_t tick) {
  if (node->in_lru) {
    lru_.erase({node->last_use, node->block});
    node->in_lru = false;
  }
  node->last_use = tick;
  refreshLru(node);
}

PrefixMatch PrefixTree::match(const std::vector<int32_t>& tokens, size_t max_tokens) {
  PrefixMatch result;
  const size_t limit = std::min(tokens.size(), max_tokens);
  const uint64_t tick = ++clock_;
  Node* node = &root_;
  std::vector<int32_t> key(block_size_);
  for (size_t start = 0; start + block_size_ <= limit; start += block_size_) {
    key.assign(tokens.begin() + start, tokens.begin() + start + block_size_);
    auto it = node->children.find(key);
    if (it == node->children.end()) break;  // first block that differs ends the prefix
    node = it->second.get();
    pool_->retain(node->block);  // leaves the LRU set through onCachedBlockReferenced
    touch(node, tick);
    result.blocks.push_back(node->block);
  }
  result.num_tokens = static_cast<int32_t>(result.blocks.size()) * block_size_;
  return result;
}

int32_t PrefixTree::insert(const std::vector<int32_t>& tokens,
                           const std::vector<BlockId>& blocks) {
  const size_t full = std::min(blocks.size(), tokens.size() / block_size_);
  return extend(tokens, blocks, static_cast<int32_t>(full), 0);
}

int32_t PrefixTree::extend(const std::vector<int32_t>& tokens,
                           const std::vector<BlockId>& blocks, int32_t num_blocks,
                           int32_t num_chained) {
  const size_t full = std::min({blocks.size(), tokens.size() / block_size_,
                                static_cast<size_t>(std::max(num_blocks, 0))});
  const uint64_t tick = ++clock_;
  Node* node = &root_;
  size_t i = 0;
  if (num_chained > 0 && static_cast<size_t>(num_chained) <= full &&
      contains(blocks[num_chained - 1])) {
    node = node_of_block_[blocks[num_chained - 1]];
    i = static_cast<size_t>(num_chained);
    // The skipped path counts as used now too (cheap: no keys compared).
    for (Node* up = node; up != &root_; up = up->parent) touch(up, tick);
  }
  int32_t chained = static_cast<int32_t>(i);
  for (; i < full; ++i) {
    const BlockId block = blocks[i];
    // The caller must hold what it caches, so the chain invariant holds.
    if (pool_->refCount(block) <= 0) break;
    std::vector<int32_t> key(tokens.begin() + i * block_size_,
                             tokens.begin() + (i + 1) * block_size_);
    auto it = node->children.find(key);
    if (it != node->children.end()) {
      if (it->second->block != block) break;  // cached elsewhere: keep ours private
      node = it->second.get();
      touch(node, tick);
      ++chained;
      continue;
    }
    if (pool_->isCached(block)) break;  // cached at another position: not this chain
    auto child = std::make_unique<Node>();
    child->block = block;
    child->parent = node;
    child->key = std::move(key);
    Node* raw = child.get();
    node->children.emplace(raw->key, std::move(child));
    pool_->markCached(block);
    node_of_block_[block] = raw;
    ++num_nodes_;
    refreshLru(node);  // no longer a leaf
    touch(raw, tick);
    node = raw;
    ++chained;
  }
  return chained;
}

int32_t PrefixTree::evict(int32_t n) {
  int32_t evicted = 0;
  while (evicted < n && !lru_.empty()) {
    const BlockId block = lru_.begin()->second;
    lru_.erase(lru_.begin());
    Node* node = node_of_block_[block];
    node->in_lru = false;
    Node* parent = node->parent;
    node_of_block_[block] = nullptr;
    --num_nodes_;
    parent->children.erase(parent->children.find(node->key));  // destroys node
    pool_->uncache(block);
    ++evicted;
    refreshLru(parent);  // may now be an unreferenced leaf
  }
  return evicted;
}

void PrefixTree::onCachedBlockUnreferenced(BlockId block) {
  if (!contains(block)) {
    std::fprintf(stderr, "ingot kv: cached block %d unknown to the prefix tree\n", block);
    std::abort();
  }
  refreshLru(node_of_block_[block]);
}

void PrefixTree::onCachedBlockReferenced(BlockId block) {
  if (!contains(block)) {
    std::fprintf(stderr, "ingot kv: cached block %d unknown to the prefix tree\n", block);
    std::abort();
  }
  refreshLru(node_of_block_[block]);
}

}  // namespace ingot
