// Public header of the ingot dialect: the dialect, its kv_cache type, attributes and ops.
#ifndef INGOT_DIALECTS_INGOT_INGOTDIALECT_H
#define INGOT_DIALECTS_INGOT_INGOTDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
// Must come before the generated op classes: ops with the `Pure` trait use it.
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"

#include "dialects/ingot/IngotOpsDialect.h.inc"

#include "dialects/ingot/IngotEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/ingot/IngotAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/ingot/IngotOpsTypes.h.inc"

#define GET_OP_CLASSES
#include "dialects/ingot/IngotOps.h.inc"

namespace mlir::ingot {

/// Module attribute holding the tensor-parallel group size N of a sharded module
/// (docs/tensor-parallel.md); absent in an unsharded module.
inline constexpr llvm::StringLiteral kTensorParallelAttrName = "ingot.tp";
/// Function attribute naming the rank a sharded serving-step function runs on.
inline constexpr llvm::StringLiteral kTensorParallelRankAttrName = "ingot.tp_rank";

/// True if `type` may flow through an attention mask/score region:
/// i1, i8, i16, i32, i64, index or f32.
bool isRegionValueType(Type type);

/// True if `type` may be the element type of an attention `extra` operand (what
/// `ingot.region_load` can return): i1, i8, i16, i32, i64 or f32.
bool isRegionLoadableType(Type type);

} // namespace mlir::ingot

#endif // INGOT_DIALECTS_INGOT_INGOTDIALECT_H
