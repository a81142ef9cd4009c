//===- Pipeline.cpp - the compile pass pipeline ---------------------------===//
#include "compiler/driver/Pipeline.h"

#include "compiler/transforms/Passes.h"
#include "dialects/ingot/IngotDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Transforms/Passes.h"

namespace ingot::compiler {

void registerCompilerDialects(mlir::DialectRegistry &registry) {
  registry.insert<mlir::ingot::IngotDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::math::MathDialect>();
}

void buildCompilePipeline(mlir::OpPassManager &pm, const PipelineOptions &options) {
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
  if (!options.quant.empty()) {
    QuantizeWeightsOptions quant;
    quant.format = options.quant;
    quant.groupSize = options.quantGroupSize;
    quant.skip.assign(options.quantSkip.begin(), options.quantSkip.end());
    pm.addPass(createQuantizeWeights(quant));
  }
  if (options.tensorParallel > 1) {
    ShardTensorParallelOptions shard;
    shard.tp = options.tensorParallel;
    pm.addPass(createShardTensorParallel(shard));
  }
}

mlir::LogicalResult runCompilePipeline(mlir::ModuleOp module, const PipelineOptions &options) {
  if (mlir::failed(mlir::verify(module)))
    return mlir::failure();
  mlir::PassManager pm(module.getContext());
  buildCompilePipeline(pm, options);
  return pm.run(module);
}

} // namespace ingot::compiler
