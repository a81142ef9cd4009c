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
#include "schemas/artifact_generated.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

namespace ingot::compiler {

/// The function named `step`, or the module's only function; in a module sharded over
/// `ingot.tp` = N ranks, the N functions with `ingot.tp_rank` 0 .. N-1, in rank order.
/// Empty (after an error on the module or function) when the module has none of these.
llvm::SmallVector<mlir::func::FuncOp> findStepFunctions(mlir::ModuleOp module);

/// The serving step's first arguments, which the runtime binds by position: tokens,
/// positions, kv_cache, block_tables, seq_lens, query_start, slot_mapping, logit_rows.
inline constexpr unsigned kNumStepInputs = 8;
/// The name of argument `i` < kNumStepInputs ("" beyond).
const char *stepInputName(unsigned i);

/// Checks the signature the runtime relies on: the eight inputs (the KV cache an
/// !ingot.kv_cache, the others i32 tensors of their rank), ranked-tensor extra inputs of
/// attention regions after them, and the results (logits, updated KV cache).
mlir::LogicalResult verifyStepSignature(mlir::func::FuncOp func);

/// On a step op (ingot-plan-steps): the activation slot of each result, -1 for results that
/// are not activations (array<i32>).
inline constexpr const char *kSlotsAttr = "ingot.slots";

/// The artifact step kind of an op (the ingot model ops), or Invalid for ops that are not
/// steps.
schema::OpKind stepKind(mlir::Operation *op);

/// How many artifact tensors the steps' `ingot.weight` ops become: with several steps
/// (ranks), a replicated weight (no `#ingot.shard`) once by name, a sharded one per rank.
size_t countStepTensors(llvm::ArrayRef<mlir::func::FuncOp> steps);

} // namespace ingot::compiler
