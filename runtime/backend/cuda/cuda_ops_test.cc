// The CUDA op table against the runtime's: what the CUDA backend cannot run is a short,
// named list, and it runs nothing the runtime does not define.
#include <gtest/gtest.h>

#include <set>

#include "runtime/backend/cuda/cuda_ops.h"
#include "runtime/backend/ops/op_definition.h"

namespace ingot {
namespace {

TEST(CudaOpTable, CoversEveryRuntimeOpButTheNamedOnes) {
  // Kinds the CUDA backend refuses at load (no kernels yet): keep in step with
  // docs/cuda-backend.md.
  const std::set<schema::OpKind> notYet = {schema::OpKind::LayerNorm};
  for (const OpDefinition& op : opDefinitions()) {
    const CudaOpDefinition* cuda = findCudaOpDefinition(op.kind);
    EXPECT_EQ(cuda == nullptr, notYet.count(op.kind) == 1) << schema::EnumNameOpKind(op.kind);
    if (cuda) EXPECT_NE(cuda->enqueue, nullptr) << schema::EnumNameOpKind(op.kind);
  }
  std::set<schema::OpKind> seen;
  for (const CudaOpDefinition& cuda : cudaOpDefinitions()) {
    EXPECT_TRUE(seen.insert(cuda.kind).second) << schema::EnumNameOpKind(cuda.kind) << " twice";
    EXPECT_NE(findOpDefinition(cuda.kind), nullptr) << schema::EnumNameOpKind(cuda.kind);
  }
}

}  // namespace
}  // namespace ingot
