// embedding: token ids -> rows of the table (a vocab-parallel shard gives zeros elsewhere).
#include "runtime/backend/cpu/cpu_ops.h"
#include "runtime/backend/cpu/cpu_step.h"
#include "runtime/backend/ops/op_functions.h"
#include "runtime/backend/ops/step_planner.h"

namespace ingot {

Status planEmbedding(StepPlanner& p, PlannedStep& step) {
  auto str = [](int64_t v) { return std::to_string(v); };
  const int64_t vocab = p.programPlan().vocab_size;
  INGOT_RETURN_IF_ERROR(p.needCounts(1, 1, 1, 1));
  INGOT_RETURN_IF_ERROR(p.needInput(step.inputs[0], kInputTokens, "token ids"));
  INGOT_ASSIGN_OR_RETURN(step.weight, p.matrix(0));
  step.vocab_start = p.paramInt("vocab_start", -1);
  if (step.vocab_start >= 0) {
    // A vocab-parallel shard: rows [vocab_start, vocab_start + rows) of the table.
    if (step.vocab_start + step.weight.rows() > vocab)
      return p.fail("table shard of " + str(step.weight.rows()) + " rows from vocab_start " +
                    str(step.vocab_start) + " runs past the vocabulary of " + str(vocab));
  } else if (p.hasParam("vocab_start")) {
    return p.fail("vocab_start " + str(step.vocab_start) + " is negative");
  } else if (step.weight.rows() < vocab) {
    return p.fail("table has " + str(step.weight.rows()) + " rows for a vocabulary of " +
                  str(vocab));
  }
  return p.needActivation(step.outputs[0], step.weight.cols(), "output");
}

Status runEmbeddingCpu(CpuStep& cpu, const PlannedStep& s) {
  float* out = cpu.buffer(s.outputs[0]);
  const int64_t D = s.weight.cols();
  const int32_t* tokens = cpu.in->tokens.data();
  cpu.rows(D, [&](int64_t t0, int64_t t1) {
    if (s.vocab_start >= 0)
      embeddingShardRows(tokens, s.weight.data, s.weight.type, s.vocab_start, s.weight.rows(), D,
                         out, t0, t1);
    else embeddingRows(tokens, s.weight.data, s.weight.type, D, out, t0, t1);
  });
  return okStatus();
}

}  // namespace ingot
