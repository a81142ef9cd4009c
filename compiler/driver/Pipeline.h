//===- Pipeline.h - the compile pass pipeline --------------------*- C++ -*-===//
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"

namespace ingot::compiler {

/// Registers every dialect an input module may use (ingot, func, arith, math).
void registerCompilerDialects(mlir::DialectRegistry &registry);

/// Adds the compile pipeline in order: canonicalize, cse (fusion, quantization,
/// attention specialization and planning join here as they land).
void buildCompilePipeline(mlir::OpPassManager &pm);

/// Verifies `module`, runs the pipeline, verifies again.
mlir::LogicalResult runCompilePipeline(mlir::ModuleOp module);

} // namespace ingot::compiler
