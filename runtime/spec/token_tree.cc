// TokenTree: a tree of draft tokens rooted at the last accepted token, and its flattened
// form (tokens, rope positions, parents, bit-packed ancestor mask) for one verify pass.
#include "runtime/spec/token_tree.h"

#include <algorithm>
#include <cassert>

namespace ingot {

/// Bits in one word of the ancestor mask.
constexpr int32_t kMaskWordBits = 64;

std::vector<int32_t> FlatTree::pathTo(int32_t node) const {
  std::vector<int32_t> path;
  for (int32_t i = node; i >= 0; i = parents[i]) path.push_back(i);
  std::reverse(path.begin(), path.end());
  return path;
}

std::vector<int32_t> FlatTree::ancestorMaskWords32(int32_t words32_per_row) const {
  const int32_t n = size();
  assert(words32_per_row * 32 >= n);
  std::vector<int32_t> out(static_cast<size_t>(n) * words32_per_row, 0);
  for (int32_t i = 0; i < n; ++i) {
    for (int32_t w = 0; w < words_per_row; ++w) {
      uint64_t word = ancestor_mask[static_cast<size_t>(i) * words_per_row + w];
      int32_t* row = out.data() + static_cast<size_t>(i) * words32_per_row;
      if (2 * w < words32_per_row) row[2 * w] = static_cast<int32_t>(word & 0xffffffffu);
      if (2 * w + 1 < words32_per_row) row[2 * w + 1] = static_cast<int32_t>(word >> 32);
    }
  }
  return out;
}

std::vector<double> FlatTree::gatherRows(const std::vector<double>& by_tree_node,
                                         int64_t width) const {
  std::vector<double> out(static_cast<size_t>(size()) * width);
  for (int32_t i = 0; i < size(); ++i)
    std::copy_n(by_tree_node.begin() + source[i] * width, width, out.begin() + i * width);
  return out;
}

TokenTree::TokenTree(int32_t root_token) {
  nodes_.push_back(TreeNode{root_token, -1, 0, 1.0});
  children_.emplace_back();
}

int32_t TokenTree::addChild(int32_t parent, int32_t token, double draft_prob) {
  assert(parent >= 0 && parent < size());
  const TreeNode& p = nodes_[parent];
  int32_t index = size();
  nodes_.push_back(TreeNode{token, parent, p.depth + 1, p.path_prob * draft_prob});
  children_.emplace_back();
  children_[parent].push_back(index);
  max_depth_ = std::max(max_depth_, nodes_.back().depth);
  return index;
}

int32_t TokenTree::addChain(int32_t parent, const std::vector<int32_t>& tokens) {
  for (int32_t t : tokens) parent = addChild(parent, t);
  return parent;
}

std::vector<int32_t> TokenTree::pathTo(int32_t node) const {
  std::vector<int32_t> path;
  for (int32_t i = node; i >= 0; i = nodes_[i].parent) path.push_back(i);
  std::reverse(path.begin(), path.end());
  return path;
}

std::vector<int32_t> TokenTree::pathTokens(int32_t node) const {
  std::vector<int32_t> tokens;
  for (int32_t i : pathTo(node)) tokens.push_back(nodes_[i].token);
  return tokens;
}

FlatTree TokenTree::flatten(int32_t base_position, TreeOrder order) const {
  const int32_t n = size();
  FlatTree flat;
  // Tree node indices in flat order.
  std::vector<int32_t>& source = flat.source;
  source.reserve(n);
  if (order == TreeOrder::kBreadthFirst) {
    source.push_back(0);
    for (size_t head = 0; head < source.size(); ++head)
      for (int32_t c : children_[source[head]]) source.push_back(c);
  } else {
    std::vector<int32_t> stack = {0};
    while (!stack.empty()) {
      int32_t v = stack.back();
      stack.pop_back();
      source.push_back(v);
      // Push in reverse so the first-added child is visited first.
      for (auto it = children_[v].rbegin(); it != children_[v].rend(); ++it) stack.push_back(*it);
    }
  }
  std::vector<int32_t> flat_of(n);
  for (int32_t i = 0; i < n; ++i) flat_of[source[i]] = i;

  flat.words_per_row = (n + kMaskWordBits - 1) / kMaskWordBits;
  flat.tokens.resize(n);
  flat.positions.resize(n);
  flat.parents.resize(n);
  flat.depths.resize(n);
  flat.child_offsets.assign(n + 1, 0);
  flat.ancestor_mask.assign(static_cast<size_t>(n) * flat.words_per_row, 0);
  for (int32_t i = 0; i < n; ++i) {
    const TreeNode& node = nodes_[source[i]];
    flat.tokens[i] = node.token;
    flat.depths[i] = node.depth;
    flat.positions[i] = base_position + node.depth;
    int32_t parent = node.parent < 0 ? -1 : flat_of[node.parent];
    flat.parents[i] = parent;
    uint64_t* row = flat.ancestor_mask.data() + static_cast<size_t>(i) * flat.words_per_row;
    // Topological order: the parent's row is complete, so ours is the parent's plus self.
    if (parent >= 0) {
      const uint64_t* parent_row =
          flat.ancestor_mask.data() + static_cast<size_t>(parent) * flat.words_per_row;
      std::copy_n(parent_row, flat.words_per_row, row);
    }
    row[i / kMaskWordBits] |= uint64_t{1} << (i % kMaskWordBits);
    flat.child_offsets[i + 1] = flat.child_offsets[i] + static_cast<int32_t>(children_[source[i]].size());
  }
  flat.child_list.reserve(n - 1);
  for (int32_t i = 0; i < n; ++i)
    for (int32_t c : children_[source[i]]) flat.child_list.push_back(flat_of[c]);
  return flat;
}

}  // namespace ingot
