// The op definitions, one row per op kind the runtime runs.
#include "runtime/backend/ops/op_definition.h"

#include "runtime/backend/ops/op_functions.h"

namespace ingot {

using schema::OpKind;

const std::vector<OpDefinition>& opDefinitions() {
  // One row per op kind, in OpKind order.
  static const std::vector<OpDefinition> table = {
      {OpKind::Embedding, planEmbedding, runEmbeddingCpu},
      {OpKind::RmsNorm, planNorm, runNormCpu},
      {OpKind::LayerNorm, planNorm, runNormCpu},
      {OpKind::Linear, planLinear, runLinearCpu},
      {OpKind::Rope, planRope, runRopeCpu},
      {OpKind::KvWrite, planKvWrite, runKvWriteCpu},
      {OpKind::Attention, planAttention, runAttentionCpu},
      {OpKind::SiluMul, planElementwise, runElementwiseCpu},
      {OpKind::GeluMul, planElementwise, runElementwiseCpu},
      {OpKind::Add, planElementwise, runElementwiseCpu},
      {OpKind::Logits, planLogits, runLogitsCpu},
      {OpKind::AllReduce, planCollective, runCollectiveCpu},
      {OpKind::AllGather, planCollective, runCollectiveCpu},
      {OpKind::AddRmsNorm, planAddRmsNorm, runAddRmsNormCpu},
      {OpKind::RopeKvWrite, planRopeKvWrite, runRopeKvWriteCpu},
      {OpKind::GatedLinear, planGatedLinear, runGatedLinearCpu},
      {OpKind::Scale, planScale, runScaleCpu},
  };
  return table;
}

const OpDefinition* findOpDefinition(schema::OpKind kind) {
  for (const OpDefinition& op : opDefinitions())
    if (op.kind == kind) return &op;
  return nullptr;
}

}  // namespace ingot
