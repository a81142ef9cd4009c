// BlockTable: appending with all-or-nothing allocation, fork, copy-on-write.
#include "runtime/kv/block_table.h"

#include <algorithm>
#include <utility>

namespace ingot {

BlockTable::BlockTable(BlockPool* pool, int32_t block_size)
    : pool_(pool), block_size_(block_size > 0 ? block_size : kDefaultKvBlockSize) {}

BlockTable::~BlockTable() { release(); }

BlockTable::BlockTable(BlockTable&& other) noexcept
    : pool_(other.pool_),
      block_size_(other.block_size_),
      blocks_(std::move(other.blocks_)),
      tokens_(std::move(other.tokens_)) {
  other.blocks_.clear();
  other.tokens_.clear();
}

BlockTable& BlockTable::operator=(BlockTable&& other) noexcept {
  if (this != &other) {
    release();
    pool_ = other.pool_;
    block_size_ = other.block_size_;
    blocks_ = std::move(other.blocks_);
    tokens_ = std::move(other.tokens_);
    other.blocks_.clear();
    other.tokens_.clear();
  }
  return *this;
}

BlockTable BlockTable::adopt(BlockPool* pool, int32_t block_size,
                                      std::vector<BlockId> blocks, std::vector<int32_t> tokens) {
  BlockTable table(pool, block_size);
  table.blocks_ = std::move(blocks);
  table.tokens_ = std::move(tokens);
  return table;
}

int32_t BlockTable::blocksNeededToAppend(int32_t n) const {
  if (n <= 0) return 0;
  const int64_t total = static_cast<int64_t>(tokens_.size()) + n;
  const int64_t needed_blocks = (total + block_size_ - 1) / block_size_;
  int32_t needed = static_cast<int32_t>(needed_blocks - static_cast<int64_t>(blocks_.size()));
  const bool partial_last = tokens_.size() % block_size_ != 0;
  if (partial_last && pool_->refCount(blocks_.back()) > 1) ++needed;  // copy-on-write
  return needed;
}

StatusOr<AppendResult> BlockTable::append(const std::vector<int32_t>& tokens) {
  AppendResult result;
  if (tokens.empty()) return result;
  const int32_t needed = blocksNeededToAppend(static_cast<int32_t>(tokens.size()));
  // The only fallible step comes first, so failure leaves the table untouched.
  INGOT_ASSIGN_OR_RETURN(std::vector<BlockId> fresh, pool_->allocate(needed));
  size_t next = 0;
  const bool partial_last = tokens_.size() % block_size_ != 0;
  if (partial_last && pool_->refCount(blocks_.back()) > 1) {
    // Invariant: never write into a block another table can read; copy it first.
    const BlockId dst = fresh[next++];
    result.copies.push_back({blocks_.back(), dst});
    pool_->release(blocks_.back());  // still > 0: the other sharers keep it
    blocks_.back() = dst;
  }
  result.slots.reserve(tokens.size());
  for (int32_t token : tokens) {
    if (tokens_.size() % block_size_ == 0) blocks_.push_back(fresh[next++]);
    tokens_.push_back(token);
    result.slots.push_back(slotOf(numTokens() - 1));
  }
  return result;
}

BlockTable BlockTable::fork() const {
  for (BlockId b : blocks_) pool_->retain(b);
  return adopt(pool_, block_size_, blocks_, tokens_);
}

void BlockTable::release() {
  // Release back to front: a sequence's later blocks are the tree's deeper nodes.
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) pool_->release(*it);
  blocks_.clear();
  tokens_.clear();
}

void BlockTable::truncate(int32_t num_tokens) {
  if (num_tokens < 0 || num_tokens >= numTokens()) return;
  const size_t keep_blocks = (static_cast<size_t>(num_tokens) + block_size_ - 1) / block_size_;
  while (blocks_.size() > keep_blocks) {
    pool_->release(blocks_.back());
    blocks_.pop_back();
  }
  tokens_.resize(num_tokens);
}

void BlockTable::setTokens(int32_t pos, const std::vector<int32_t>& tokens) {
  std::copy(tokens.begin(), tokens.end(), tokens_.begin() + pos);
}

}  // namespace ingot
