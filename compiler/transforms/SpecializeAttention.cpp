//===- SpecializeAttention.cpp - name each distinct attention variant -----===//
//
// ingot-specialize-attention: the (mask, score) bytecode of every attention op's regions,
// and a `variant<N>` name for each distinct pair (Passes.td).
//
//===----------------------------------------------------------------------===//
#include "compiler/transforms/Passes.h"

#include <map>
#include <utility>
#include <vector>

#include "codegen/cpu/RegionBytecodeEmitter.h"
#include "compiler/transforms/KernelSelection.h"
#include "compiler/transforms/StepFunctions.h"
#include "dialects/ingot/IngotDialect.h"
#include "mlir/IR/Builders.h"

namespace ingot::compiler {
#define GEN_PASS_DEF_SPECIALIZEATTENTION
#include "compiler/transforms/Passes.h.inc"
} // namespace ingot::compiler

namespace ingot::compiler {
namespace {

using Bytecode = std::vector<uint8_t>;

class SpecializeAttentionPass
    : public impl::SpecializeAttentionBase<SpecializeAttentionPass> {
public:
  using Base::Base;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    llvm::SmallVector<mlir::func::FuncOp> steps = findStepFunctions(module);
    if (steps.empty())
      return signalPassFailure();
    std::map<std::pair<Bytecode, Bytecode>, std::string> nameOf;
    mlir::Builder builder(module.getContext());
    for (mlir::func::FuncOp step : steps) {
      mlir::WalkResult walk = step.walk([&](mlir::ingot::AttentionOp op) {
        op->removeAttr(kVariantAttr);
        if (!op.hasMask() && !op.hasScore())
          return mlir::WalkResult::advance();
        mlir::FailureOr<std::pair<Bytecode, Bytecode>> key = variantBytecode(op);
        if (mlir::failed(key))
          return mlir::WalkResult::interrupt();
        auto it = nameOf.find(*key);
        if (it == nameOf.end())
          it = nameOf.emplace(std::move(*key), "variant" + std::to_string(nameOf.size())).first;
        op->setAttr(kVariantAttr, builder.getStringAttr(it->second));
        return mlir::WalkResult::advance();
      });
      if (walk.wasInterrupted())
        return signalPassFailure();
    }
  }

private:
  /// The op's mask and score bytecode (empty for a missing region).
  static mlir::FailureOr<std::pair<Bytecode, Bytecode>>
  variantBytecode(mlir::ingot::AttentionOp op) {
    llvm::SmallVector<mlir::Type> extraTypes;
    for (mlir::Value v : op.getExtra())
      extraTypes.push_back(v.getType());
    std::pair<Bytecode, Bytecode> bytes;
    if (op.hasMask()) {
      auto mask = emitRegionBytecode(op.getMask(), RegionKind::kMask, extraTypes);
      if (mlir::failed(mask))
        return mlir::failure();
      bytes.first = std::move(*mask);
    }
    if (op.hasScore()) {
      auto score = emitRegionBytecode(op.getScore(), RegionKind::kScore, extraTypes);
      if (mlir::failed(score))
        return mlir::failure();
      bytes.second = std::move(*score);
    }
    return bytes;
  }
};

} // namespace
} // namespace ingot::compiler
