//===- RegionBytecodeEmitter.h - Attention regions to CPU bytecode -*- C++ -*-===//
//
// Lowers an `ingot.attention` mask or score region to the region bytecode of
// schemas/region_bytecode.h, which the CPU backend evaluates.
//
//===----------------------------------------------------------------------===//
#ifndef INGOT_CODEGEN_CPU_REGIONBYTECODEEMITTER_H
#define INGOT_CODEGEN_CPU_REGIONBYTECODEEMITTER_H

#include <cstdint>
#include <vector>

#include "mlir/IR/Region.h"
#include "mlir/IR/Types.h"
#include "mlir/Support/LLVM.h"
#include "schemas/region_bytecode.h"
#include "llvm/ADT/ArrayRef.h"

namespace ingot {

/// Emits bytecode for `region`, a single-block mask `(index b, h, q, kv) -> i1`
/// or score `(f32 s, index b, h, q, kv) -> f32` region of an attention op whose
/// extra operands have `extraOperandTypes` (ranked tensors). The walk is generic:
/// it dispatches on op names (`arith.*`, `math.*`, `ingot.region_load`,
/// `ingot.yield`), so it does not depend on the ingot dialect's C++ classes.
/// Ops whose results do not reach the yield are dropped. Emits an error
/// diagnostic (at the offending op) and fails on any unsupported op, type or
/// attribute; the result is checked by the runtime decoder before it is
/// returned, so a success always decodes.
mlir::FailureOr<std::vector<uint8_t>>
emitRegionBytecode(mlir::Region &region, RegionKind kind,
                   llvm::ArrayRef<mlir::Type> extraOperandTypes);

} // namespace ingot

#endif // INGOT_CODEGEN_CPU_REGIONBYTECODEEMITTER_H
