// AcceptedKv: after verification, which of a tree's KV slots survive and where they move so
// the accepted path sits contiguously after the prefix; the rest are released.
#include "runtime/spec/accepted_kv.h"

#include <cassert>

namespace ingot {

AcceptedKv planAcceptedKv(const FlatTree& tree, const VerifyResult& result) {
  AcceptedKv plan;
  plan.kept = 1 + static_cast<int32_t>(result.accepted.size());
  for (int32_t node : result.accepted) {
    const int32_t to = tree.depths[node];
    assert(node >= to);
    if (node != to) plan.moves.push_back(KvMove{node, to});
  }
  return plan;
}

}  // namespace ingot
