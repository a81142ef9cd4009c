//===- StepFunctions.h - the serving-step functions of a compiled module -*- C++ -*-===//
//
// Which functions of a module the artifact lowers to programs: the unsharded serving step,
// or, in a module `ingot-shard-tensor-parallel` produced, one step per rank.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

namespace ingot::compiler {

/// The function named `step`, or the module's only function; in a module sharded over
/// `ingot.tp` = N ranks, the N functions with `ingot.tp_rank` 0 .. N-1, in rank order.
/// Empty (after an error on the module or function) when the module has none of these.
llvm::SmallVector<mlir::func::FuncOp> findStepFunctions(mlir::ModuleOp module);

/// How many artifact tensors the steps' `ingot.weight` ops become: with several steps
/// (ranks), a replicated weight (no `#ingot.shard`) once by name, a sharded one per rank.
size_t countStepTensors(llvm::ArrayRef<mlir::func::FuncOp> steps);

} // namespace ingot::compiler
