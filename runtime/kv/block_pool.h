// BlockPool: the fixed set of physical KV blocks, with reference counts and a free list.
#pragma once

#include <cstdint>
#include <vector>

#include "core/base/status.h"

namespace ingot {

/// Index of a physical KV block in the backend's pool (the ids the block tables hold).
using BlockId = int32_t;

/// Tokens per KV block unless the artifact says otherwise (ModelConfigDef.kv_block_size;
/// 16 is vLLM's default and the size the CPU backend's paged attention is tuned for).
constexpr int32_t kDefaultKvBlockSize = 16;

/// What a pool tells the cache of cached blocks, and how it asks the cache for room.
/// The prefix tree implements it.
class CachedBlockObserver {
 public:
  virtual ~CachedBlockObserver() = default;
  /// A cached block's reference count dropped to zero: it is now evictable.
  virtual void onCachedBlockUnreferenced(BlockId block) = 0;
  /// A cached block's reference count rose from zero: it is no longer evictable.
  virtual void onCachedBlockReferenced(BlockId block) = 0;
  /// Frees up to `n` evictable cached blocks (through BlockPool::uncache); returns how many.
  virtual int32_t evict(int32_t n) = 0;
};

/// A fixed number of physical KV blocks. Each block is in exactly one state:
///   free      - on the free list, reference count 0, not cached;
///   in use    - reference count > 0 (cached or not);
///   evictable - reference count 0 and cached (holds a full prefix block the prefix tree
///               may hand out again, or evict back to the free list).
/// So numFree() + numEvictable() + numInUse() == numBlocks() at all times.
/// Misuse (releasing a free block, retaining an unallocated one) is a bug in the caller and
/// aborts with a message rather than corrupting another request's KV.
class BlockPool {
 public:
  explicit BlockPool(int32_t num_blocks);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  /// Registers the cache that owns cached blocks (at most one; null to detach).
  void setObserver(CachedBlockObserver* observer) { observer_ = observer; }

  int32_t numBlocks() const { return static_cast<int32_t>(ref_counts_.size()); }
  /// Blocks on the free list.
  int32_t numFree() const { return static_cast<int32_t>(free_list_.size()); }
  /// Cached blocks nobody references (reclaimable by eviction).
  int32_t numEvictable() const { return num_evictable_; }
  /// Blocks with a reference count above zero.
  int32_t numInUse() const { return numBlocks() - numFree() - numEvictable(); }
  /// Blocks an allocation could obtain right now: free plus evictable.
  int32_t numAvailable() const { return numFree() + numEvictable(); }

  /// Hands out `n` distinct blocks, each with reference count 1, evicting least recently
  /// used cached blocks when the free list is short. All or nothing: on failure no block
  /// is taken (evictions already made stay made) and the status is outOfKvBlocks().
  StatusOr<std::vector<BlockId>> allocate(int32_t n);

  /// Adds a reference to a block that is in use or evictable (never a free one).
  void retain(BlockId block);
  /// Drops a reference; at zero the block returns to the free list, or becomes evictable
  /// if it is cached.
  void release(BlockId block);

  int32_t refCount(BlockId block) const;
  bool isCached(BlockId block) const;
  bool isFree(BlockId block) const;

  /// Records the blocks that go back to the free list from now on (takeFreed hands them
  /// over): the SIMT emulator's backend fills freed blocks with NaN so a read of one shows.
  void trackFreed(bool on) { track_freed_ = on; }
  std::vector<BlockId> takeFreed() { return std::move(freed_); }

  /// Marks an in-use block as holding a cached full prefix block (called by the cache).
  void markCached(BlockId block);
  /// Returns an evictable block to the free list (called by the cache when it evicts).
  void uncache(BlockId block);

 private:
  bool track_freed_ = false;
  std::vector<BlockId> freed_;
  void checkId(BlockId block, const char* what) const;

  std::vector<int32_t> ref_counts_;
  std::vector<uint8_t> cached_;
  std::vector<uint8_t> on_free_list_;
  /// LIFO so a just-freed (cache-warm) block is reused first.
  std::vector<BlockId> free_list_;
  int32_t num_evictable_ = 0;
  CachedBlockObserver* observer_ = nullptr;
};

/// The status an allocation returns when the pool cannot supply enough blocks even after
/// evicting every evictable cached block. The scheduler acts on it (preempts, or waits);
/// recognise it with isOutOfKvBlocks().
Status outOfKvBlocks(int32_t wanted, int32_t available);
/// True for a status made by outOfKvBlocks().
bool isOutOfKvBlocks(const Status& status);

}  // namespace ingot
