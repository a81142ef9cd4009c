//===- Pipeline.h - the compile pass pipeline --------------------*- C++ -*-===//
#pragma once

#include <cstdint>
#include <functional>
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
  /// CUDA targets of the kernels (ingot-select-kernels); empty = no kernels.
  std::vector<std::string> cudaTargets;
};

/// Registers every dialect an input module may use (ingot, func, arith, math).
void registerCompilerDialects(mlir::DialectRegistry &registry);

/// One named stage of the compile pipeline: the passes it adds.
struct PipelineStage {
  std::string name;
  std::function<void(mlir::OpPassManager &)> addPasses;
};

/// The stages a compile with `options` runs, in order: canonicalize, cse, quantize (with
/// --quant), shard (with --tp > 1), fuse (add + rms_norm into one op), specialize-attention
/// (each distinct mask/score pair named as a variant) and select-kernels (the CUDA kernels
/// of every step for the targets); step planning joins here when it lands.
std::vector<PipelineStage> compilePipelineStages(const PipelineOptions &options = {});

/// What `ingot compile --emit-mlir=STAGE` accepts for `options`: "import" (the module as
/// imported or parsed), every stage's name, and "final" (after the last one).
std::vector<std::string> pipelineStageNames(const PipelineOptions &options = {});

/// Every stage's passes in one pass manager.
void buildCompilePipeline(mlir::OpPassManager &pm, const PipelineOptions &options = {});

/// What runCompilePipeline shows as it goes.
struct PipelineObserver {
  /// Called with the module before the first stage ("import") and after each stage.
  std::function<void(const std::string &stage, mlir::ModuleOp module)> afterStage;
  /// MLIR's IR printing after every pass, to stderr.
  bool printAfterAll = false;
};

/// Verifies `module`, then runs the stages one after the other (the pass manager verifies
/// after each pass).
mlir::LogicalResult runCompilePipeline(mlir::ModuleOp module,
                                       const PipelineOptions &options = {},
                                       const PipelineObserver &observer = {});

} // namespace ingot::compiler
