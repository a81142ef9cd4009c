// The op table: every op kind of the artifact format has exactly one definition.
#include <gtest/gtest.h>

#include <set>

#include "runtime/backend/ops/op_definition.h"

namespace ingot {
namespace {

TEST(OpTable, EveryOpKindOfTheFormatHasOneDefinitionWithBothFunctions) {
  std::set<schema::OpKind> seen;
  for (const OpDefinition& op : opDefinitions()) {
    EXPECT_TRUE(seen.insert(op.kind).second) << schema::EnumNameOpKind(op.kind) << " twice";
    EXPECT_NE(op.plan, nullptr) << schema::EnumNameOpKind(op.kind);
    EXPECT_NE(op.run_cpu, nullptr) << schema::EnumNameOpKind(op.kind);
    EXPECT_EQ(findOpDefinition(op.kind), &op);
  }
  for (schema::OpKind kind : schema::EnumValuesOpKind()) {
    if (kind == schema::OpKind::Invalid) {
      EXPECT_EQ(findOpDefinition(kind), nullptr);
      continue;
    }
    EXPECT_NE(findOpDefinition(kind), nullptr) << schema::EnumNameOpKind(kind);
  }
}

}  // namespace
}  // namespace ingot
