// ingot-opt: mlir-opt for the ingot dialect (parse, verify, run passes, print).
#include "compiler/transforms/Passes.h"
#include "dialects/ingot/IngotDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  // Generic passes that are useful on ingot modules (canonicalize, cse, ...).
  mlir::registerTransformsPasses();
  // Ingot's own passes (ingot-quantize-weights, ...).
  ingot::compiler::registerIngotCompilerPasses();

  mlir::DialectRegistry registry;
  registry.insert<mlir::ingot::IngotDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::math::MathDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Ingot optimizer driver\n", registry));
}
