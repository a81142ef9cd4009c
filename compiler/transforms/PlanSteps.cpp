//===- PlanSteps.cpp - activation slots of the serving steps --------------===//
//
// ingot-plan-steps: each op result that is an activation gets its storage slot, planned by
// the planner the runtime checks against (core/artifact/slot_plan.h; Passes.td).
//
//===----------------------------------------------------------------------===//
#include "compiler/transforms/Passes.h"

#include <vector>

#include "compiler/transforms/StepFunctions.h"
#include "core/artifact/slot_plan.h"
#include "dialects/ingot/IngotDialect.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace ingot::compiler {
#define GEN_PASS_DEF_PLANSTEPS
#include "compiler/transforms/Passes.h.inc"
} // namespace ingot::compiler

namespace ingot::compiler {
namespace {

/// A step function's values as the slot planner's buffers and steps.
class StepDataflow {
public:
  /// Numbers the function's arguments and its step ops' results, in order. Fails, on the
  /// op, when an op is no step or an activation's shape is not [?, static...].
  mlir::LogicalResult build(mlir::func::FuncOp func) {
    llvm::DenseSet<mlir::Value> returned;
    mlir::Block &body = func.getBody().front();
    if (auto ret = llvm::dyn_cast<mlir::func::ReturnOp>(body.getTerminator()))
      returned.insert(ret.getOperands().begin(), ret.getOperands().end());
    for (mlir::BlockArgument arg : func.getArguments())
      add(arg, /*activation=*/false, 0);
    for (mlir::Operation &op : body) {
      if (llvm::isa<mlir::ingot::WeightOp, mlir::func::ReturnOp>(op))
        continue;
      SlotStep step;
      step.op = stepKind(&op);
      if (step.op == schema::OpKind::Invalid)
        return op.emitOpError("is not a step of the serving program");
      for (mlir::Value v : op.getOperands())
        if (auto it = index.find(v); it != index.end())
          step.inputs.push_back(it->second);  // weights are not buffers
      for (mlir::OpResult r : op.getResults()) {
        const bool activation =
            !returned.contains(r) && !llvm::isa<mlir::ingot::KvCacheType>(r.getType());
        auto width = activation ? rowWidth(r.getType()) : mlir::FailureOr<int64_t>(0);
        if (mlir::failed(width))
          return op.emitOpError() << "result #" << r.getResultNumber() << " of type "
                                  << r.getType()
                                  << " cannot be an activation: its shape must be "
                                     "[?, static dims...] (the token rows)";
        step.outputs.push_back(add(r, activation, *width));
      }
      ops.push_back(&op);
      steps.push_back(std::move(step));
    }
    return mlir::success();
  }

  /// Writes the plan onto the ops: `ingot.slots`, one entry per result (-1: not an
  /// activation), on every op with an activation result.
  void annotate(const SlotPlan &plan) {
    mlir::Builder builder(ops.empty() ? nullptr : ops.front()->getContext());
    for (size_t s = 0; s < ops.size(); ++s) {
      llvm::SmallVector<int32_t> slots;
      bool any = false;
      for (int32_t out : steps[s].outputs) {
        slots.push_back(plan.slot[out]);
        any |= plan.slot[out] >= 0;
      }
      if (any)
        ops[s]->setAttr(kSlotsAttr, builder.getDenseI32ArrayAttr(slots));
      else
        ops[s]->removeAttr(kSlotsAttr);
    }
  }

  std::vector<SlotBuffer> buffers;
  std::vector<SlotStep> steps;

private:
  int32_t add(mlir::Value v, bool activation, int64_t width) {
    const int32_t i = static_cast<int32_t>(buffers.size());
    buffers.push_back({activation, width});
    index[v] = i;
    return i;
  }

  /// Elements per token row of an activation of `type`.
  static mlir::FailureOr<int64_t> rowWidth(mlir::Type type) {
    auto ranked = llvm::dyn_cast<mlir::RankedTensorType>(type);
    if (!ranked || ranked.getRank() < 1 || !ranked.isDynamicDim(0))
      return mlir::failure();
    int64_t width = 1;
    for (int64_t d : ranked.getShape().drop_front()) {
      if (mlir::ShapedType::isDynamic(d))
        return mlir::failure();
      width *= d;
    }
    return width;
  }

  llvm::DenseMap<mlir::Value, int32_t> index;
  std::vector<mlir::Operation *> ops;
};

class PlanStepsPass : public impl::PlanStepsBase<PlanStepsPass> {
public:
  using Base::Base;

  void runOnOperation() override {
    llvm::SmallVector<mlir::func::FuncOp> funcs = findStepFunctions(getOperation());
    if (funcs.empty())
      return signalPassFailure();
    for (mlir::func::FuncOp func : funcs) {
      StepDataflow dataflow;
      if (mlir::failed(dataflow.build(func)))
        return signalPassFailure();
      dataflow.annotate(planSlots(dataflow.buffers, dataflow.steps));
    }
  }
};

} // namespace
} // namespace ingot::compiler
