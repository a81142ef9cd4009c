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

std::vector<PipelineStage> compilePipelineStages(const PipelineOptions &options) {
  std::vector<PipelineStage> stages;
  stages.push_back({"canonicalize", [](mlir::OpPassManager &pm) {
                      pm.addPass(mlir::createCanonicalizerPass());
                    }});
  stages.push_back({"cse", [](mlir::OpPassManager &pm) { pm.addPass(mlir::createCSEPass()); }});
  if (!options.quant.empty()) {
    QuantizeWeightsOptions quant;
    quant.format = options.quant;
    quant.groupSize = options.quantGroupSize;
    quant.skip.assign(options.quantSkip.begin(), options.quantSkip.end());
    stages.push_back({"quantize", [quant](mlir::OpPassManager &pm) {
                        pm.addPass(createQuantizeWeights(quant));
                      }});
  }
  if (options.tensorParallel > 1) {
    ShardTensorParallelOptions shard;
    shard.tp = options.tensorParallel;
    stages.push_back({"shard", [shard](mlir::OpPassManager &pm) {
                        pm.addPass(createShardTensorParallel(shard));
                      }});
  }
  stages.push_back({"fuse", [](mlir::OpPassManager &pm) {
                      pm.addPass(createFuseElementwise());
                    }});
  stages.push_back({"specialize-attention", [](mlir::OpPassManager &pm) {
                      pm.addPass(createSpecializeAttention());
                    }});
  SelectKernelsOptions select;
  select.targets.assign(options.cudaTargets.begin(), options.cudaTargets.end());
  stages.push_back({"select-kernels", [select](mlir::OpPassManager &pm) {
                      pm.addPass(createSelectKernels(select));
                    }});
  stages.push_back({"plan", [](mlir::OpPassManager &pm) { pm.addPass(createPlanSteps()); }});
  return stages;
}

std::vector<std::string> pipelineStageNames(const PipelineOptions &options) {
  std::vector<std::string> names = {"import"};
  for (const PipelineStage &stage : compilePipelineStages(options))
    names.push_back(stage.name);
  names.push_back("final");
  return names;
}

void buildCompilePipeline(mlir::OpPassManager &pm, const PipelineOptions &options) {
  for (const PipelineStage &stage : compilePipelineStages(options))
    stage.addPasses(pm);
}

mlir::LogicalResult runCompilePipeline(mlir::ModuleOp module, const PipelineOptions &options,
                                       const PipelineObserver &observer) {
  if (mlir::failed(mlir::verify(module)))
    return mlir::failure();
  if (observer.afterStage)
    observer.afterStage("import", module);
  if (observer.printAfterAll)  // IR printing needs single-threaded execution
    module.getContext()->disableMultithreading();
  for (const PipelineStage &stage : compilePipelineStages(options)) {
    mlir::PassManager pm(module.getContext());
    stage.addPasses(pm);
    if (observer.printAfterAll)
      pm.enableIRPrinting([](mlir::Pass *, mlir::Operation *) { return false; },
                          [](mlir::Pass *, mlir::Operation *) { return true; },
                          /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false);
    if (mlir::failed(pm.run(module)))
      return mlir::failure();
    if (observer.afterStage)
      observer.afterStage(stage.name, module);
  }
  return mlir::success();
}

} // namespace ingot::compiler
