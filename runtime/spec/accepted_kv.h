// AcceptedKv: after verification, which of a tree's KV slots survive and where they move so
// the accepted path sits contiguously after the prefix; the rest are released.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/spec/token_tree.h"
#include "runtime/spec/verify.h"

namespace ingot {

/// One K/V copy, in every layer, between positions of the request's tree region: from
/// tree_start + from to tree_start + to (logical positions; the block table maps them to
/// slots).
struct KvMove {
  int32_t from = 0;
  int32_t to = 0;
  bool operator==(const KvMove& o) const { return from == o.from && to == o.to; }
};

/// The KV edits that commit a verified tree written at positions tree_start + flat index.
struct AcceptedKv {
  /// Copies to perform in order. Accepted node at depth d moves to offset d; moves go in
  /// increasing depth and a depth-d node has flat index >= d in any topological order, so
  /// no move overwrites a source a later move reads. Nodes already in place are omitted.
  std::vector<KvMove> moves;
  /// Offsets [0, kept) hold the root and the accepted path afterwards; [kept, n) are
  /// rejected and their positions can be released (the bonus token is the next input).
  int32_t kept = 1;
};

/// The commit plan for `result` over `tree`.
AcceptedKv planAcceptedKv(const FlatTree& tree, const VerifyResult& result);

}  // namespace ingot
