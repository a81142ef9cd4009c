//===- FuseElementwise.cpp - fuse a residual add into its rms_norm --------===//
//
// ingot-fuse-elementwise (Passes.td): add + rms_norm -> add_rms_norm.
//
//===----------------------------------------------------------------------===//
#include "compiler/transforms/Passes.h"

#include "dialects/ingot/IngotDialect.h"
#include "mlir/IR/Builders.h"

namespace ingot::compiler {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "compiler/transforms/Passes.h.inc"
} // namespace ingot::compiler

namespace ingot::compiler {
namespace {

using mlir::ingot::AddOp;
using mlir::ingot::AddRmsNormOp;
using mlir::ingot::RmsNormOp;

/// The add whose sum `norm` normalizes, when the fused op can take the norm's place: the
/// add is in the norm's block and every other use of its sum comes after the norm.
AddOp fusableAdd(RmsNormOp norm) {
  auto add = norm.getInput().getDefiningOp<AddOp>();
  if (!add || add->getBlock() != norm->getBlock())
    return nullptr;
  for (mlir::Operation *user : add->getUsers()) {
    if (user == norm.getOperation())
      continue;
    mlir::Operation *inBlock = norm->getBlock()->findAncestorOpInBlock(*user);
    if (!inBlock || !norm->isBeforeInBlock(inBlock))
      return nullptr;
  }
  return add;
}

class FuseElementwisePass : public impl::FuseElementwiseBase<FuseElementwisePass> {
public:
  using Base::Base;

  void runOnOperation() override {
    llvm::SmallVector<std::pair<AddOp, RmsNormOp>> pairs;
    getOperation().walk([&](RmsNormOp norm) {
      if (AddOp add = fusableAdd(norm))
        pairs.push_back({add, norm});
    });
    for (auto [add, norm] : pairs) {
      mlir::OpBuilder b(norm);
      mlir::Type type = norm.getResult().getType();
      auto fused = AddRmsNormOp::create(b, norm.getLoc(), type, type, add.getRhs(),
                                        add.getLhs(), norm.getWeight(), norm.getEpsilonAttr());
      norm.getResult().replaceAllUsesWith(fused.getResult());
      norm.erase();
      add.getResult().replaceAllUsesWith(fused.getSum());
      add.erase();
    }
  }
};

} // namespace
} // namespace ingot::compiler
