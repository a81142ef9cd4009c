// BlockPool: reference counting, the free list, and the hand-off of cached blocks.
#include "runtime/kv/block_pool.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace ingot {
namespace {

constexpr const char* kOutOfBlocksPrefix = "out of KV blocks";

[[noreturn]] void kvBug(const char* what, BlockId block) {
  std::fprintf(stderr, "ingot kv: invariant violated: %s (block %d)\n", what, block);
  std::abort();
}

}  // namespace

Status outOfKvBlocks(int32_t wanted, int32_t available) {
  // kFailedPrecondition: retrying after blocks are released (preemption, finished requests)
  // can succeed; the prefix makes it recognisable without a dedicated code.
  return failedPrecondition(std::string(kOutOfBlocksPrefix) + ": need " +
                            std::to_string(wanted) + ", " + std::to_string(available) +
                            " available");
}

bool isOutOfKvBlocks(const Status& status) {
  return status.code() == StatusCode::kFailedPrecondition &&
         status.message().rfind(kOutOfBlocksPrefix, 0) == 0;
}

BlockPool::BlockPool(int32_t num_blocks)
    : ref_counts_(num_blocks > 0 ? num_blocks : 0, 0),
      cached_(ref_counts_.size(), 0),
      on_free_list_(ref_counts_.size(), 1) {
  free_list_.reserve(ref_counts_.size());
  // Lowest ids on top of the LIFO so allocation order is 0, 1, 2, ... (easy to read in tests).
  for (int32_t b = numBlocks() - 1; b >= 0; --b) free_list_.push_back(b);
}

void BlockPool::checkId(BlockId block, const char* what) const {
  if (block < 0 || block >= numBlocks()) kvBug(what, block);
}

StatusOr<std::vector<BlockId>> BlockPool::allocate(int32_t n) {
  if (n < 0) return invalidArgument("allocate: negative block count " + std::to_string(n));
  if (n > numAvailable()) return outOfKvBlocks(n, numAvailable());
  if (n > numFree() && observer_ != nullptr) observer_->evict(n - numFree());
  // Invariant: every evictable block can be evicted (an unreferenced cached block never has
  // a referenced descendant in the prefix tree), so this holds whenever the check above did.
  if (n > numFree()) return outOfKvBlocks(n, numAvailable());
  std::vector<BlockId> blocks;
  blocks.reserve(n);
  for (int32_t i = 0; i < n; ++i) {
    const BlockId b = free_list_.back();
    free_list_.pop_back();
    // Invariant: a block on the free list is unreferenced and uncached, so it is never
    // handed out twice.
    if (ref_counts_[b] != 0 || cached_[b] || !on_free_list_[b]) kvBug("free block in use", b);
    on_free_list_[b] = 0;
    ref_counts_[b] = 1;
    blocks.push_back(b);
  }
  return blocks;
}

void BlockPool::retain(BlockId block) {
  checkId(block, "retain: bad block id");
  if (on_free_list_[block]) kvBug("retain of a free block", block);
  if (ref_counts_[block]++ == 0) {
    if (!cached_[block]) kvBug("unreferenced uncached block off the free list", block);
    --num_evictable_;
    if (observer_ != nullptr) observer_->onCachedBlockReferenced(block);
  }
}

void BlockPool::release(BlockId block) {
  checkId(block, "release: bad block id");
  if (ref_counts_[block] <= 0) kvBug("release of an unreferenced block", block);
  if (--ref_counts_[block] > 0) return;
  if (cached_[block]) {
    ++num_evictable_;
    if (observer_ != nullptr) observer_->onCachedBlockUnreferenced(block);
  } else {
    on_free_list_[block] = 1;
    free_list_.push_back(block);
    if (track_freed_) freed_.push_back(block);
  }
}

int32_t BlockPool::refCount(BlockId block) const {
  checkId(block, "refCount: bad block id");
  return ref_counts_[block];
}

bool BlockPool::isCached(BlockId block) const {
  checkId(block, "isCached: bad block id");
  return cached_[block] != 0;
}

bool BlockPool::isFree(BlockId block) const {
  checkId(block, "isFree: bad block id");
  return on_free_list_[block] != 0;
}

void BlockPool::markCached(BlockId block) {
  checkId(block, "markCached: bad block id");
  // Only a referenced block can become cached: its owner has just filled it.
  if (ref_counts_[block] <= 0 || cached_[block]) kvBug("markCached of a bad block", block);
  cached_[block] = 1;
}

void BlockPool::uncache(BlockId block) {
  checkId(block, "uncache: bad block id");
  // Invariant: eviction never takes a block someone references.
  if (ref_counts_[block] != 0 || !cached_[block]) kvBug("uncache of a referenced block", block);
  cached_[block] = 0;
  --num_evictable_;
  on_free_list_[block] = 1;
  free_list_.push_back(block);
  if (track_freed_) freed_.push_back(block);
}

}  // namespace ingot
