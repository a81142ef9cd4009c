//===- Pipeline.h - the compile pass pipeline --------------------*- C++ -*-===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"

namespace ingot::compiler {

/// What the user chose for the pipeline (`ingot compile` flags).
struct PipelineOptions {
  /// Weight quantization of linears: "" (none), "int4", "fp8", "nvfp4" or "mxfp4".
  std::string quant;
  /// Elements per int4 scale along K.
  int64_t quantGroupSize = 32;
  /// Weight-name patterns that stay unquantized (see ingot-quantize-weights).
  std::vector<std::string> quantSkip;
  /// Tensor-parallel ranks (ingot-shard-tensor-parallel); 1 = unsharded.
  int64_t tensorParallel = 1;
};

/// Registers every dialect an input module may use (ingot, func, arith, math).
void registerCompilerDialects(mlir::DialectRegistry &registry);

/// Adds the compile pipeline in order: canonicalize, cse, quantize weights (when asked),
/// shard over tensor-parallel ranks (when asked); fusion, attention specialization and
/// planning join here as they land.
void buildCompilePipeline(mlir::OpPassManager &pm, const PipelineOptions &options = {});

/// Verifies `module`, runs the pipeline, verifies again.
mlir::LogicalResult runCompilePipeline(mlir::ModuleOp module,
                                       const PipelineOptions &options = {});

} // namespace ingot::compiler
