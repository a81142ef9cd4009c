// BlockTable: one sequence's logical -> physical KV block mapping, with fork and copy-on-write.
#pragma once

#include <cstdint>
#include <vector>

#include "core/base/status.h"
#include "runtime/kv/block_pool.h"

namespace ingot {

/// A copy the backend must perform before the step that writes the new tokens
/// (CpuBackend::copyKvBlocks(src, dst)): the whole of block `src` into block `dst`.
struct BlockCopy {
  BlockId src = 0;
  BlockId dst = 0;
  bool operator==(const BlockCopy& o) const { return src == o.src && dst == o.dst; }
};

/// Where appended tokens go.
struct AppendResult {
  /// One KV slot (block * block_size + offset) per appended token: the step's slot_mapping.
  std::vector<int32_t> slots;
  /// Copy-on-write copies to perform before the step, in order.
  std::vector<BlockCopy> copies;
};

/// The KV blocks of one sequence, in logical order, and the tokens whose KV they hold (or
/// will hold once computed). Holds one reference on each of its blocks; move-only, and
/// releases them when destroyed or release()d.
///
/// Invariants: blocks().size() == ceil(numTokens() / blockSize()); no block appears twice;
/// a block this table may still write into (the partially filled last block) is never
/// cached — full blocks are never written again, so sharing them needs no copy.
class BlockTable {
 public:
  BlockTable(BlockPool* pool, int32_t block_size);
  ~BlockTable();
  BlockTable(BlockTable&& other) noexcept;
  BlockTable& operator=(BlockTable&& other) noexcept;
  BlockTable(const BlockTable&) = delete;
  BlockTable& operator=(const BlockTable&) = delete;

  /// A table over `blocks` (already retained on its behalf, e.g. by a prefix match or a
  /// fork) holding `tokens`; requires blocks.size() == ceil(tokens.size() / block_size).
  static BlockTable adopt(BlockPool* pool, int32_t block_size,
                                   std::vector<BlockId> blocks, std::vector<int32_t> tokens);

  /// Appends tokens, allocating blocks as needed and copying a shared last block before
  /// writing into it. All or nothing: when the pool cannot supply the blocks, returns
  /// outOfKvBlocks() and the table and pool are unchanged.
  StatusOr<AppendResult> append(const std::vector<int32_t>& tokens);

  /// Blocks append(n tokens) would take from the pool (new blocks plus a copy-on-write).
  int32_t blocksNeededToAppend(int32_t n) const;

  /// A second table sharing every block (each reference count + 1), for parallel samples.
  /// The first write into the shared last block by either table copies it.
  BlockTable fork() const;

  /// Drops this table's references; the table becomes empty.
  void release();

  /// Shortens the table to its first `num_tokens` tokens (speculative tokens rejected):
  /// blocks no longer needed go back to the pool; the rest keep their KV. The caller must
  /// not cut into tokens another table or the prefix cache shares. No-op when not shorter.
  void truncate(int32_t num_tokens);

  /// Replaces the tokens recorded at positions [pos, pos + tokens.size()) (a verified
  /// speculative path whose KV was moved into place). Requires the range to be inside the
  /// table; the caller must not rewrite tokens of shared or cached blocks.
  void setTokens(int32_t pos, const std::vector<int32_t>& tokens);

  int32_t blockSize() const { return block_size_; }
  int32_t numTokens() const { return static_cast<int32_t>(tokens_.size()); }
  const std::vector<BlockId>& blocks() const { return blocks_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  /// KV slot of logical position `pos` (0 <= pos < numTokens()).
  int32_t slotOf(int32_t pos) const {
    return blocks_[pos / block_size_] * block_size_ + pos % block_size_;
  }

 private:
  BlockPool* pool_;
  int32_t block_size_;
  std::vector<BlockId> blocks_;
  std::vector<int32_t> tokens_;
};

}  // namespace ingot
