//===- StepFunctions.cpp - the serving-step functions of a compiled module -===//
#include "compiler/driver/StepFunctions.h"

#include "dialects/ingot/IngotDialect.h"
#include "llvm/ADT/StringSet.h"

namespace ingot::compiler {

/// Largest tensor-parallel group a module may declare.
constexpr int64_t kMaxTensorParallel = 1024;

llvm::SmallVector<mlir::func::FuncOp> findStepFunctions(mlir::ModuleOp module) {
  auto funcs = llvm::to_vector(module.getOps<mlir::func::FuncOp>());
  if (auto tp = module->getAttrOfType<mlir::IntegerAttr>(mlir::ingot::kTensorParallelAttrName);
      tp && tp.getInt() != 1) {
    const int64_t n = tp.getInt();
    if (n < 1 || n > kMaxTensorParallel) {
      module.emitError() << "'" << mlir::ingot::kTensorParallelAttrName << "' = " << n
                         << " is not a tensor-parallel group size (1 .. "
                         << kMaxTensorParallel << ")";
      return {};
    }
    llvm::SmallVector<mlir::func::FuncOp> byRank(n);
    for (mlir::func::FuncOp f : funcs) {
      auto rank = f->getAttrOfType<mlir::IntegerAttr>(mlir::ingot::kTensorParallelRankAttrName);
      if (!rank)
        continue;
      if (rank.getInt() < 0 || rank.getInt() >= n || byRank[rank.getInt()]) {
        f.emitError() << "'" << mlir::ingot::kTensorParallelRankAttrName << "' = "
                      << rank.getInt() << " is out of range or repeated in a module sharded "
                      << "over " << n << " ranks";
        return {};
      }
      byRank[rank.getInt()] = f;
    }
    for (int64_t r = 0; r < n; ++r)
      if (!byRank[r]) {
        module.emitError() << "the module is sharded over " << n
                           << " ranks but has no step function with '"
                           << mlir::ingot::kTensorParallelRankAttrName << "' = " << r;
        return {};
      }
    return byRank;
  }
  for (mlir::func::FuncOp f : funcs)
    if (f.getSymName() == "step")
      return {f};
  if (funcs.size() == 1)
    return {funcs.front()};
  module.emitError() << "expected a serving-step function named 'step' (or exactly "
                        "one function), found "
                     << funcs.size() << " functions";
  return {};
}

size_t countStepTensors(llvm::ArrayRef<mlir::func::FuncOp> steps) {
  size_t sharded = 0;
  llvm::StringSet<> replicated;
  for (mlir::func::FuncOp step : steps)
    step.walk([&](mlir::ingot::WeightOp op) {
      if (op.getShardAttr() || steps.size() == 1)
        ++sharded;
      else
        replicated.insert(op.getName());
    });
  return sharded + replicated.size();
}

} // namespace ingot::compiler
