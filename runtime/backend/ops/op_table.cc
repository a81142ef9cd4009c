// The op definitions, one row per op kind the runtime runs.
#include "runtime/backend/ops/op_definition.h"

#include <algorithm>

#include "runtime/backend/ops/op_functions.h"

namespace ingot {

using schema::OpKind;

const std::vector<OpDefinition>& opDefinitions() {
  static const std::vector<OpDefinition> table = [] {
    std::vector<OpDefinition> t = {
        {OpKind::Embedding, planEmbedding, runEmbeddingCpu},
        {OpKind::RmsNorm, planNorm, runNormCpu},
        {OpKind::LayerNorm, planNorm, runNormCpu},
        {OpKind::Linear, planLinear, runLinearCpu},
        {OpKind::Rope, planRope, runRopeCpu},
        {OpKind::Attention, planAttention, runAttentionCpu},
        {OpKind::SiluMul, planElementwise, runElementwiseCpu},
        {OpKind::GeluMul, planElementwise, runElementwiseCpu},
        {OpKind::Add, planElementwise, runElementwiseCpu},
        {OpKind::KvWrite, planKvWrite, runKvWriteCpu},
        {OpKind::Logits, planLogits, runLogitsCpu},
        {OpKind::AllReduce, planCollective, runCollectiveCpu},
        {OpKind::AllGather, planCollective, runCollectiveCpu},
    };
    std::sort(t.begin(), t.end(),
              [](const OpDefinition& a, const OpDefinition& b) { return a.kind < b.kind; });
    return t;
  }();
  return table;
}

const OpDefinition* findOpDefinition(schema::OpKind kind) {
  for (const OpDefinition& op : opDefinitions())
    if (op.kind == kind) return &op;
  return nullptr;
}

}  // namespace ingot
