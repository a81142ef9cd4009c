// TokenTree: a tree of draft tokens rooted at the last accepted token, and its flattened
// form (tokens, rope positions, parents, bit-packed ancestor mask) for one verify pass.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ingot {

/// One node of a draft tree.
struct TreeNode {
  int32_t token = 0;
  /// Index of the parent node; -1 for the root.
  int32_t parent = -1;
  /// Distance from the root (root = 0); the node's rope position is base + depth.
  int32_t depth = 0;
  /// Draft probability of the whole path root..node (product of each step's draft
  /// probability; 1 for the root). Dynamic trees grow and prune by it.
  double path_prob = 1.0;
};

/// Order in which flatten() lays nodes out. Both are topological (a parent precedes its
/// children) and keep siblings in the order they were added.
enum class TreeOrder { kBreadthFirst, kDepthFirst };

/// A tree flattened for one target forward pass; index i ("flat index") is the i-th row of
/// the pass. Flat index 0 is always the root.
///
/// Ancestor mask layout (what the attention mask region reads for one request):
///   words_per_row = ceil(n / 64); row-major uint64_t[n][words_per_row];
///   bit (j % 64) of word ancestor_mask[i * words_per_row + j / 64] is set iff flat node j
///   is node i or an ancestor of node i. Bits past n are zero.
/// On a little-endian machine the same bytes read as int32_t[n][2 * words_per_row] put bit
/// j in 32-bit word j / 32 at bit j % 32 — the i32 `tree_bits` operand of the CPU
/// treeMaskBytecode(); ancestorMaskWords32() builds that form portably.
struct FlatTree {
  std::vector<int32_t> tokens;     ///< [n] token id of each node
  std::vector<int32_t> positions;  ///< [n] rope position: base_position + depth
  std::vector<int32_t> parents;    ///< [n] flat index of the parent; -1 for the root
  std::vector<int32_t> depths;     ///< [n] distance from the root
  std::vector<int32_t> source;     ///< [n] TokenTree node index of each flat node
  /// Children of flat node i: child_list[child_offsets[i] .. child_offsets[i + 1]), flat
  /// indices in the order the siblings were added (CSR, [n + 1] offsets).
  std::vector<int32_t> child_offsets;
  std::vector<int32_t> child_list;
  int32_t words_per_row = 0;            ///< ceil(n / 64)
  std::vector<uint64_t> ancestor_mask;  ///< [n * words_per_row], layout above

  int32_t size() const { return static_cast<int32_t>(tokens.size()); }
  int32_t numChildren(int32_t i) const { return child_offsets[i + 1] - child_offsets[i]; }
  const int32_t* childrenBegin(int32_t i) const { return child_list.data() + child_offsets[i]; }
  /// Whether node q may attend to node kv (kv is q or an ancestor of q).
  bool isAncestorOrSelf(int32_t kv, int32_t q) const {
    return (ancestor_mask[static_cast<size_t>(q) * words_per_row + kv / 64] >> (kv % 64)) & 1;
  }
  /// Flat indices root .. node along the tree.
  std::vector<int32_t> pathTo(int32_t node) const;
  /// The mask as int32_t[n][words32_per_row] (bit j of row i in word j / 32, bit j % 32),
  /// zero-padded; words32_per_row must be at least ceil(n / 32).
  std::vector<int32_t> ancestorMaskWords32(int32_t words32_per_row) const;
  /// Rows of a per-tree-node table ([num tree nodes, width], tree node order) gathered into
  /// flat order ([n, width]), e.g. draft distributions recorded while the tree was built.
  std::vector<double> gatherRows(const std::vector<double>& by_tree_node, int64_t width) const;
};

/// A tree of draft tokens under a root token. Nodes are numbered in the order they are
/// added; a parent always exists before its children, so that order is topological too.
class TokenTree {
 public:
  /// The root is the last accepted token: in the KV cache already, or this step's input.
  explicit TokenTree(int32_t root_token);

  /// Adds `token` under `parent` (an existing node) and returns its index. `draft_prob` is
  /// the draft's probability of `token` after the parent's path (1 when not known).
  int32_t addChild(int32_t parent, int32_t token, double draft_prob = 1.0);
  /// Adds a chain of tokens below `parent`; returns the index of the last one (or parent).
  int32_t addChain(int32_t parent, const std::vector<int32_t>& tokens);

  int32_t size() const { return static_cast<int32_t>(nodes_.size()); }
  const TreeNode& node(int32_t i) const { return nodes_[i]; }
  const std::vector<TreeNode>& nodes() const { return nodes_; }
  /// Children of node i in the order they were added.
  const std::vector<int32_t>& children(int32_t i) const { return children_[i]; }
  int32_t maxDepth() const { return max_depth_; }
  /// Node indices root .. node.
  std::vector<int32_t> pathTo(int32_t node) const;
  /// Tokens along root .. node, the root's included.
  std::vector<int32_t> pathTokens(int32_t node) const;

  /// Lays the tree out for one verify pass; the root gets rope position `base_position`.
  FlatTree flatten(int32_t base_position, TreeOrder order = TreeOrder::kBreadthFirst) const;

 private:
  std::vector<TreeNode> nodes_;
  std::vector<std::vector<int32_t>> children_;
  int32_t max_depth_ = 0;
};

}  // namespace ingot
